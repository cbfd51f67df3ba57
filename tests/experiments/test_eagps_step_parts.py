import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "model" / "sequential_recommender"))

from sequence_data import ML100K_SEQUENTIAL, write_sequences  # noqa: E402

from experiments.eagps_step_parts import main  # noqa: E402


def test_main_times_each_part_of_eagps_whole_sequence_step_and_writes_the_table(tmp_path):
    data = write_sequences(tmp_path / "data")
    argv = ["--dataset", "tinyseq", "--batch_size", "16", "--steps", "2", "--results", str(tmp_path / "results")]
    main([*argv, f"--data_path={data}", "--config_files", ML100K_SEQUENTIAL])
    table = (tmp_path / "results" / "eagps-step-parts.md").read_text()
    assert "python experiments/eagps_step_parts.py --dataset tinyseq" in table and "Seed 2020" in table
    (record_file,) = (tmp_path / "results" / "runs" / "performance").glob("eagps-step-parts-*.json")
    parts = json.loads(record_file.read_text())["parts_ms"]
    assert len(parts) == 8 and all(ms > 0 for ms in parts.values())
    assert parts["step"] > parts["graph encoder without external attention"]  # the step holds the encoder
    for name, ms in parts.items():
        assert f"| {name} | {ms:.2f} |" in table
