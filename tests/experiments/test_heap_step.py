import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from experiments.heap_step import main  # noqa: E402


def test_main_times_a_step_under_each_heap_in_its_own_process_and_writes_the_table(tiny_data, tmp_path):
    argv = ["--dataset", "tiny", "--data_path", str(tiny_data), "--batch_size", "16", "--rounds", "1"]
    model = "MGFormer[attention=False; embedding_size=8; loss=softmax; train_protocol=user]"
    assert main([*argv, "--steps", "2", "--warmup", "1", "--model", model, "--results", str(tmp_path)]) == 0
    table = (tmp_path / "heap_step-tiny.md").read_text()
    assert "| released |" in table and "| kept |" in table and f"`{model}`" in table
    (record_file,) = (tmp_path / "runs" / "performance").glob("heap-step-tiny-*.json")
    records = json.loads(record_file.read_text())["records"]
    assert set(records) == {"released", "kept"}
    assert all(r["steps_timed"] == 2 and r["step_ms_median"] > 0 for r in records.values())
