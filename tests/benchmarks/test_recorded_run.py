import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.recorded_run import run_and_record  # noqa: E402


def test_a_run_is_recorded_once_and_skipped_after(tmp_path, capsys):
    calls = []

    def train():
        calls.append(1)
        return {"best_valid_result": {"auc": 0.7}, "test_result": {"auc": 0.71}}

    path = tmp_path / "runs" / "m-seed1.json"
    record = run_and_record(path, "M seed 1", train, {"model": "M", "seed": 1}, "auc")
    assert json.loads(path.read_text()) == record
    assert record["model"] == "M" and record["valid"] == {"auc": 0.7} and record["test"] == {"auc": 0.71}
    assert {"seconds", "commit", "versions", "machine"} <= set(record)
    assert run_and_record(path, "M seed 1", train, {"model": "M"}, "auc") is None
    assert calls == [1]
    assert "[done] M seed 1: valid auc 0.7000, test auc 0.7100" in capsys.readouterr().out
