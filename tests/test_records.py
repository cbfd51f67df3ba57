import subprocess

import torch

import recbole_mgformer.model.precision as precision
from recbole_mgformer.records import (
    display_path,
    git_commit,
    machine,
    mean_std,
    notes_lines,
    read_records,
    write_record,
)


def git(repo, *args):
    subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", *args], cwd=repo, check=True,
                   capture_output=True)


def test_commit_is_dirty_for_code_changes_but_not_for_results(tmp_path):
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "table.md").write_text("old\n")
    (tmp_path / "model.py").write_text("x = 1\n")
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-qm", "first")
    clean = git_commit(tmp_path)
    assert len(clean) >= 7 and not clean.endswith("-dirty")
    (tmp_path / "results" / "table.md").write_text("new\n")  # a benchmark rewriting its table
    assert git_commit(tmp_path) == clean
    (tmp_path / "model.py").write_text("x = 2\n")
    assert git_commit(tmp_path) == clean + "-dirty"


def test_records_round_trip(tmp_path):
    write_record(tmp_path / "a.json", {"variant": "A", "valid": {"ndcg@20": 0.5}})
    assert read_records(tmp_path) == [{"variant": "A", "valid": {"ndcg@20": 0.5}}]


def test_display_path_is_relative_inside_the_base_and_unchanged_outside(tmp_path, monkeypatch):
    inside = tmp_path / "properties" / "x.yaml"
    assert display_path(inside, tmp_path) == "properties/x.yaml"
    assert display_path("/elsewhere/y.yaml", tmp_path) == "/elsewhere/y.yaml"
    assert display_path(None, tmp_path) is None
    monkeypatch.chdir(tmp_path)
    assert display_path(inside) == "properties/x.yaml"


def test_mean_std_cells():
    assert mean_std([0.25]) == "0.2500"
    assert mean_std([0.2, 0.3]) == "0.2500 ± 0.0707"


def test_notes_are_appended_when_they_exist(tmp_path):
    notes = tmp_path / "notes.md"
    assert notes_lines(notes) == [] and notes_lines(None) == []
    notes.write_text("\nEAGPS is below SASRec.\n\n")
    assert notes_lines(notes) == ["EAGPS is below SASRec.", ""]


def test_machine_says_whether_the_cpu_multiplies_bf16_natively(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(precision, "_cpu_multiplies_bf16", lambda: True)
    with_bf16 = machine()
    monkeypatch.setattr(precision, "_cpu_multiplies_bf16", lambda: False)
    without = machine()
    assert with_bf16 == without.replace(", ", " with native bf16, ", 1) and "bf16" not in without
