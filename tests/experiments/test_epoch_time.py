import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from experiments.epoch_time import measure, render  # noqa: E402


def test_measure_times_steps_and_evaluation_and_renders_ratios(tiny_data):
    overrides = {"data_path": str(tiny_data), "embedding_size": 8}
    records = []
    for repeat in range(2):
        for model in ("LightGCN", "MGFormer"):
            result = measure(model, "tiny", 32, 2, overrides)
            result["repeat"] = repeat
            records.append(result)
    first = records[1]
    assert first["measured_steps"] == 2 and first["steps_per_epoch"] >= 2
    assert first["epoch_seconds"] > 0 and first["evaluation_seconds"] > 0 and first["peak_memory_bytes"] > 0
    table = render(records, "tiny", "provenance line")
    assert "| LightGCN | 32 | " in table and "| 1.00 / 1.00 / 1.00 |" in table and "provenance line" in table


def test_main_takes_variants_in_brackets_and_names_their_rows(tiny_data, tmp_path):
    from experiments.epoch_time import main

    main(
        [
            "--dataset",
            "tiny",
            "--models",
            "LightGCN,MGFormer[key_sample_size=16]",
            "--batch_sizes",
            "32",
            "--repeats",
            "1",
            "--max_steps",
            "2",
            "--results",
            str(tmp_path),
            f"--data_path={tiny_data}",
            "--embedding_size=8",
        ]
    )
    table = (tmp_path / "epoch_time-tiny.md").read_text()
    assert "| MGFormer key_sample_size=16 | 32 | " in table and "| LightGCN | 32 | " in table
