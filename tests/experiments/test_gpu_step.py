import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from experiments.gpu_step import main  # noqa: E402


def test_the_cpu_smoke_run_times_every_variant_eager_and_graphed_and_counts_the_epochs_syncs(tmp_path):
    """The CUDA-only rows (one CUDA graph, compiled loss) wait for a GPU; the rest must run anywhere."""
    main(
        [
            "--device",
            "cpu",
            "--users",
            "120",
            "--items",
            "80",
            "--interactions",
            "900",
            "--batch_size",
            "32",
            "--repeats",
            "1",
            "--steps",
            "2",
            "--out",
            str(tmp_path),
        ]
    )
    record = json.loads((tmp_path / "gpu_step.json").read_text())
    rows = {row["variant"]: row for row in record["rows"]}
    assert all("error" not in row for row in rows.values()), rows
    assert rows["LightGCN"]["step_ms"] > 0 and rows["LightGCN"]["ops_per_step"] > 50
    auto = rows["MGFormer, auto sizes (one chunk, one block on a GPU)"]
    assert auto["key_chunk_size"] == 2048 and auto["uniformity_block_rows"] == 256  # auto on a CPU
    syncs = rows["syncs in one epoch of 2 steps (cuda sync debug mode)"]
    assert syncs["this project's epoch"] == 0  # no CUDA here: the mode reports nothing, the row still runs
    assert syncs["this project's epoch, one CUDA graph a step"] == 0 and "RecBole's epoch" in syncs
    assert "| LightGCN | " in (tmp_path / "gpu_step.md").read_text()

    # the CUDA-graph column: through the trainer's runner's eager stand-in for capture and replay here (static
    # buffers, warm-up, capture, replays), which must equal the twin's eager steps bit for bit
    variants = [row for row in record["rows"] if "ops_per_step" in row]
    assert len(variants) == 5
    for row in variants:
        assert "graph_error" not in row, row
        assert row["graph_counts"] == {"warmup": 3, "capture": 1, "replay": 7}  # 8 checked steps, then 2 timed
        assert row["graph_step_ms"] > 0
        assert row["graph_max_relative_loss_difference"] == 0 and row["graph_max_parameter_difference"] == 0
    table = (tmp_path / "gpu_step.md").read_text()
    assert "| eager ms | compiled ms | CUDA graph ms | graph vs eager (loss, parameters) |" in table
    assert table.count("| 0.0e+00, 0.0e+00 |") == 5
