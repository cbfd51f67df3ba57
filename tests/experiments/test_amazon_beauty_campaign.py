"""experiments/amazon_beauty_campaign.sh: the commands each stream runs, with the same budget and valid options."""

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from recbole_mgformer.benchmark.entries import parse_entry, split_models
from recbole_mgformer.config.defaults import properties_dir

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "experiments" / "amazon_beauty_campaign.sh"
BUDGET = [
    "--datasets",
    "amazon-beauty",
    "--seeds",
    "0,1,2",
    "--tune-budget",
    "8",
    "--tune-epochs",
    "100",
    "--tune-grace",
    "10",
    "--tune-cpus",
    "1",
]


def commands(tmp_path, *args):
    """The benchmark commands the script runs, each as its argument list after ``-m recbole_mgformer.benchmark``."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    log = tmp_path / "commands.jsonl"
    fake_python = tmp_path / "python"
    fake_python.write_text(
        f"#!{sys.executable}\nimport json, sys\nopen({str(log)!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n"
    )
    fake_python.chmod(0o755)
    done = subprocess.run(
        ["bash", str(SCRIPT), *args],
        env={"PYTHON": str(fake_python), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert all(line[:2] == ["-m", "recbole_mgformer.benchmark"] for line in lines)
    return [line[2:] for line in lines]


def option(command, name):
    return command[command.index(name) + 1] if name in command else None


def has_precision_option(model):
    defaults = properties_dir() / "model" / f"{model}.yaml"
    return defaults.is_file() and "precision" in (yaml.safe_load(defaults.read_text()) or {})


def models_of(commands):
    return [entry for command in commands for entry in split_models(option(command, "--models"))]


def test_the_streams_run_every_issue_row_once_with_the_same_budget(tmp_path):
    stream_a, stream_b = commands(tmp_path / "a", "A"), commands(tmp_path / "b", "B")
    # each ends on the other's last entries (the ablations, SGL), so claims split what is left between the streams
    assert stream_b[-1] == [*BUDGET, "--models", "MGFormer-ablations", "--precision=fp32"]
    assert stream_a[-1] == [*BUDGET, "--models", "SGL"] and "SGL" in models_of(stream_b[:-1])
    assert set(models_of(stream_a)) & set(models_of(stream_b)) == set(split_models("MGFormer-ablations")) | {"SGL"}
    entries = models_of(stream_a[:-1]) + models_of(stream_b[:-1])
    assert len(entries) == len(set(entries))
    assert {parse_entry(entry)[0] for entry in entries} == {
        "MGFormer",
        "DirectAU",
        "XSimGCL",
        "SimGCL",
        "SGL",
        "LightGCN",
        "BPR",
    }
    assert "MGFormer[attention=False]" in entries and "MGFormer[feature_map=focused]" in entries
    for command in stream_a + stream_b:
        assert command[: len(BUDGET)] == BUDGET


def test_fp32_goes_to_the_models_with_a_precision_option_and_no_other(tmp_path):
    # RecBole's config check refuses a key no part of the run reads, so a stray --precision would fail the stream
    for command in commands(tmp_path / "a", "A") + commands(tmp_path / "b", "B"):
        models = {parse_entry(entry)[0] for entry in split_models(option(command, "--models"))}
        with_option = {model for model in models if has_precision_option(model)}
        assert with_option in (set(), models), f"split {models}: only {with_option} take --precision"
        assert ("--precision=fp32" in command) == bool(with_option)


def test_extra_options_reach_every_command_and_a_missing_stream_is_a_usage_error(tmp_path):
    for command in commands(tmp_path, "B", "--device=cuda"):
        assert "--device=cuda" in command
    done = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True)
    assert done.returncode == 2 and "usage:" in done.stderr and "A|B" in done.stderr


@pytest.mark.parametrize("stream", ["A", "B"])
def test_the_notes_name_each_stream(stream):
    notes = (ROOT / "results" / "amazon-beauty" / "notes.md").read_text()
    assert shlex.join(["bash", "experiments/amazon_beauty_campaign.sh", stream]) in notes
