import json
import subprocess
from pathlib import Path

import pytest
import torch

import recbole_mgformer.model.precision as precision
from recbole_mgformer.config.defaults import properties_dir
from recbole_mgformer.records import (
    RecordExists,
    code_commit,
    display_path,
    git_commit,
    machine,
    mean_std,
    notes_lines,
    read_records,
    shown_path,
    write_record,
)


def git(repo, *args):
    subprocess.run(
        ["git", "-c", "user.email=t@t", "-c", "user.name=t", *args], cwd=repo, check=True, capture_output=True
    )


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


def test_commit_ignores_the_top_level_results_from_any_folder_of_the_checkout(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "table.md").write_text("old\n")
    (tmp_path / "model.py").write_text("x = 1\n")
    (tmp_path / "pkg" / "code.py").write_text("y = 1\n")
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-qm", "first")
    clean = git_commit(tmp_path / "pkg")
    (tmp_path / "results" / "table.md").write_text("new\n")
    assert git_commit(tmp_path / "pkg") == clean
    (tmp_path / "model.py").write_text("x = 2\n")  # outside the folder asked from, inside the checkout
    assert git_commit(tmp_path / "pkg") == clean + "-dirty"


def test_code_commit_is_unknown_for_a_copy_in_no_checkout(tmp_path, monkeypatch):
    import recbole_mgformer.records as records

    monkeypatch.setattr(records, "PACKAGE_DIR", tmp_path)  # as an installed copy: no git checkout holds it
    assert code_commit() == "unknown"
    git(tmp_path, "init", "-q")  # a checkout that does not track the package (a virtualenv inside a checkout)
    (tmp_path / "other.py").write_text("x = 1\n")
    git(tmp_path, "add", "other.py")
    git(tmp_path, "commit", "-qm", "first")
    assert code_commit() == "unknown"
    (tmp_path / "records.py").write_text("z = 1\n")  # a checkout that tracks it: its commit
    git(tmp_path, "add", "records.py")
    git(tmp_path, "commit", "-qm", "second")
    assert code_commit() == git_commit(tmp_path) != "unknown"


def test_shown_path_names_package_files_and_results_files_wherever_they_lie(tmp_path):
    tuned = properties_dir() / "benchmark" / "ml-100k" / "BPR.yaml"
    assert shown_path(tuned, tmp_path / "results") == "properties/benchmark/ml-100k/BPR.yaml"
    results = tmp_path / "copy" / "results"
    assert shown_path(results / "runs", results) == "results/runs"
    assert shown_path(results / "exploration" / "runs", results) == "results/exploration/runs"
    assert shown_path(str(tmp_path / "mine.yaml"), results) == str(tmp_path / "mine.yaml")  # as given elsewhere
    assert shown_path(None, results) is None


def test_records_round_trip(tmp_path):
    write_record(tmp_path / "a.json", {"variant": "A", "valid": {"ndcg@20": 0.5}})
    assert read_records(tmp_path) == [{"variant": "A", "valid": {"ndcg@20": 0.5}}]


def test_a_record_is_replaced_only_when_asked_and_a_new_one_never_replaces_another_runs(tmp_path):
    path = tmp_path / "runs" / "bpr-seed0.json"
    write_record(path, {"run": 1})
    write_record(path, {"run": 2})  # the same run updating its record (the default)
    assert json.loads(path.read_text()) == {"run": 2}
    with pytest.raises(RecordExists, match=r"bpr-seed0.json: another process wrote this record while this one ran"):
        write_record(path, {"run": 3}, overwrite=False)
    assert json.loads(path.read_text()) == {"run": 2}
    assert write_record(tmp_path / "runs" / "bpr-seed1.json", {"run": 4}, overwrite=False).exists()
    assert sorted(p.name for p in path.parent.iterdir()) == ["bpr-seed0.json", "bpr-seed1.json"]  # no temporaries


def test_a_records_temporary_is_its_own(tmp_path, monkeypatch):
    # The old temporary was the record's name with .tmp: a file of that name was lost, and two writers of one record
    # at once shared it (the second's rename found it gone).
    neighbour = tmp_path / "a.tmp"
    neighbour.write_text("someone's file\n")
    real_write_text, nested = Path.write_text, []

    def another_writer_meanwhile(self, *args, **kwargs):
        written = real_write_text(self, *args, **kwargs)
        if not nested:
            nested.append(self)
            write_record(tmp_path / "a.json", {"writer": "other"})
        return written

    monkeypatch.setattr(Path, "write_text", another_writer_meanwhile)
    write_record(tmp_path / "a.json", {"writer": "this"})
    assert json.loads((tmp_path / "a.json").read_text()) == {"writer": "this"}  # the last whole record, nothing mixed
    assert neighbour.read_text() == "someone's file\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json", "a.tmp"]


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
