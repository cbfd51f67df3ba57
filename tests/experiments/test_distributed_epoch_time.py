import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from experiments.distributed import main, parse_setting, render  # noqa: E402


def test_settings_read_as_processes_by_threads():
    assert parse_setting("2x1") == (2, 1) and parse_setting("1X2") == (1, 2)
    with pytest.raises(SystemExit, match="processes x threads"):
        parse_setting("two")
    with pytest.raises(SystemExit, match="at least 1"):
        parse_setting("0x1")


def test_speedups_are_to_one_process_in_the_same_repeat():
    base = {"model": "M", "device": "cpu", "steps": 2, "steps_per_epoch": 4}
    records = [
        {**base, "processes": 1, "threads": 1, "epoch_seconds": 4.0, "repeat": 0},
        {**base, "processes": 2, "threads": 1, "epoch_seconds": 2.0, "repeat": 0},
        {**base, "processes": 1, "threads": 1, "epoch_seconds": 8.0, "repeat": 1},
        {**base, "processes": 2, "threads": 1, "epoch_seconds": 2.0, "repeat": 1},
    ]
    table = render(records, "d", "provenance")
    assert "| M | 2 x 1 | cpu | 2.00 / 2.00 / 2.00 | 2.00 / 3.00 / 4.00 | 2 / 4 |" in table


@pytest.mark.slow
def test_one_and_two_processes_time_an_epoch(tiny_data, tmp_path):
    main(
        [
            "--dataset",
            "tiny",
            "--models",
            "LightGCN[n_layers=1]",
            "--settings",
            "1x1,2x1",
            "--max_steps",
            "2",
            "--results",
            str(tmp_path),
            f"--data_path={tiny_data}",
            "--embedding_size=8",
            "--train_batch_size=16",
        ]
    )
    table = (tmp_path / "distributed-tiny.md").read_text()
    assert "| LightGCN n_layers=1 | 1 x 1 | cpu | " in table and "| LightGCN n_layers=1 | 2 x 1 | cpu | " in table
    assert list((tmp_path / "runs" / "distributed").glob("epoch-time-tiny-*.json"))
