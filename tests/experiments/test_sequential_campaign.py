"""experiments/sequential_campaign.sh: each stream searches and seeds every model with the same budget, then trains
the tuned models under the whole-sequence protocol at their tuned settings, skipping a model not yet tuned."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from recbole_mgformer.benchmark.entries import parse_entry
from recbole_mgformer.config.defaults import properties_dir

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "experiments" / "sequential_campaign.sh"


def commands(tmp_path, stream, dataset):
    """The benchmark commands the stream runs (argument lists after ``-m recbole_mgformer.benchmark``), and stderr."""
    log = tmp_path / "commands.jsonl"
    fake_python = tmp_path / "python"
    fake_python.write_text(
        f"#!{sys.executable}\nimport json, sys\nopen({str(log)!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n"
    )
    fake_python.chmod(0o755)
    env = {"PYTHON": str(fake_python), "PATH": "/usr/bin:/bin", "DATASET": dataset}
    done = subprocess.run(["bash", str(SCRIPT), stream], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert all(line[:2] == ["-m", "recbole_mgformer.benchmark"] for line in lines)
    return [line[2:] for line in lines], done.stderr


def models_of(command):
    return command[command.index("--models") + 1]


@pytest.mark.parametrize("stream", ["A", "B"])
def test_each_stream_searches_every_model_with_one_budget_then_trains_the_tuned_ones_on_whole_sequences(
    tmp_path, stream
):
    ran, skipped = commands(tmp_path, stream, "ml-100k-seq")
    tuned = {
        m for m in ("SASRec", "GRU4Rec", "EAGPS") if (properties_dir() / "benchmark/ml-100k-seq" / f"{m}.yaml").exists()
    }
    searched = [c for c in ran if "--tune-budget" in c]
    assert sorted(models_of(c) for c in searched) == ["EAGPS-ablations", "GRU4Rec", "SASRec"]
    budgets = {tuple(x for x in c if x != models_of(c) and x != "--models") for c in searched}
    assert len(budgets) == 1  # the same budget, cap and patience for every model
    protocol = [c for c in ran if "--tune-budget" not in c]
    assert sorted(parse_entry(models_of(c))[0] for c in protocol) == sorted(tuned)
    assert all(parse_entry(models_of(c))[1] == {"train_protocol": "sequence"} for c in protocol)
    assert "EAGPS" in tuned  # committed: at least one model trains on whole sequences here
    assert all({"--epochs=50", "--stopping_step=10", "--eval_step=1"} <= set(c) for c in protocol)
    for model in {"SASRec", "GRU4Rec", "EAGPS"} - tuned:
        assert f"{model} has no tuned settings for ml-100k-seq yet" in skipped


def test_an_untuned_dataset_trains_nothing_on_whole_sequences(tmp_path):
    ran, skipped = commands(tmp_path, "A", "no-such-dataset")
    assert all("--tune-budget" in c for c in ran) and skipped.count("skipped") == 3


@pytest.mark.parametrize("dataset", ["ml-100k-seq-whole", "amazon-beauty-seq-whole"])
def test_a_dataset_under_the_whole_sequence_protocol_runs_the_campaign_without_the_protocol_step(tmp_path, dataset):
    # the dataset sets train_protocol: sequence itself: its searched rows are already the whole-sequence rows
    assert "train_protocol: sequence" in (properties_dir() / "dataset" / f"{dataset}.yaml").read_text()
    ran, skipped = commands(tmp_path, "B", dataset)
    assert [models_of(c) for c in ran] == ["EAGPS-ablations", "GRU4Rec", "SASRec"]
    assert all("--tune-budget" in c for c in ran) and "skipped" not in skipped
