import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from experiments.time_to_accuracy import epochs_needed, main, trained_settings, wall_seconds  # noqa: E402


def record(variant, seed, history, best_epoch, batch=32, eval_step=1, overrides=None, **config):
    return {
        "variant": variant,
        "seed": seed,
        "valid_history": history,
        "best_epoch": best_epoch,
        "valid": {"ndcg@20": max((s for _, s in history), default=0.1)},
        "commit": "abc1234",
        "machine": "test machine",
        "overrides": overrides or {},
        "tuned_config": None,
        "config": {
            "train_batch_size": batch,
            "embedding_size": 8,
            "eval_step": eval_step,
            "learning_rate": 0.001,
            **config,
        },
    }


def command(models, runs, tiny_data, tmp_path):
    """The script's arguments: ``models`` on the toy dataset, records read from ``runs``, target ndcg@20 0.05, two
    measured steps once, pages under tmp_path/out."""
    return [
        "--dataset",
        "tiny",
        "--models",
        models,
        "--target",
        "0.05",
        "--max_steps",
        "2",
        "--repeats",
        "1",
        "--runs",
        str(runs),
        "--results",
        str(tmp_path / "out"),
        f"--data_path={tiny_data}",
    ]


def test_epochs_needed_counts_epochs_and_validations_to_target_and_best():
    history = [[0, 0.01], [1, 0.05], [2, 0.07], [3, 0.08], [4, 0.079]]
    assert epochs_needed(record("M", 0, history, 3), 0.06) == {"target": (3, 3), "best": (4, 4)}
    assert epochs_needed(record("M", 0, history, 3), 0.5)["target"] is None  # never reached
    every_other = record("M", 0, [[1, 0.05], [3, 0.07]], 3, eval_step=2)
    assert epochs_needed(every_other, 0.06) == {"target": (4, 2), "best": (4, 2)}
    assert epochs_needed(record("M", 0, [], 7), 0.06) == {"target": None, "best": (8, 8)}  # no history kept


def test_wall_seconds_adds_warm_up_once_and_each_epoch_and_validation():
    cost = {"one_off_seconds": 5.0, "epoch_seconds": 10.0, "validation_seconds": 2.0}
    assert wall_seconds(cost, (3, 3)) == 5 + 30 + 6


def test_trained_settings_take_the_records_values_of_sizes_and_entry_overrides():
    settings = trained_settings(
        record("M", 0, [], 1, batch=64, overrides={"attention": False}, attention=False, compile=True)
    )
    assert settings == {"attention": False, "embedding_size": 8, "train_batch_size": 64}  # compile: speed only


def test_main_joins_records_with_measured_costs(tiny_data, tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    for seed, best in ((0, 2), (1, 3)):
        history = [[e, 0.02 * (e + 1)] for e in range(best + 2)]
        (runs / f"mgformer-seed{seed}.json").write_text(json.dumps(record("MGFormer", seed, history, best)))
    (runs / "lightgcn-seed0.json").write_text(json.dumps(record("LightGCN", 0, [], 4)))  # best 0.1: '?'
    below = record("LightGCN", 1, [], 4)
    below["valid"]["ndcg@20"] = 0.04  # never reached the target, history or not
    (runs / "lightgcn-seed1.json").write_text(json.dumps(below))
    rows = main(command("MGFormer,LightGCN", runs, tiny_data, tmp_path))
    mgformer, lightgcn = rows
    assert mgformer["seeds"] == [0, 1] and [c[0] for c in mgformer["target_counts"]] == [3, 3]
    assert [c[0] for c in mgformer["best_counts"]] == [3, 4]
    assert mgformer["seconds_to_best"][1] > mgformer["seconds_to_best"][0] > 0
    assert lightgcn["seconds_to_target"] == [None, None] and lightgcn["target_known"] == [False, True]
    table = (tmp_path / "out" / "time_to_accuracy-tiny.md").read_text()
    assert "| MGFormer | 32 | 8 | 0.001 | 0, 1 | 3, 3 |" in table
    assert "| LightGCN | 32 | 8 | 0.001 | 0, 1 | ?, - | not reached |" in table


def test_main_names_the_command_that_trains_a_missing_row(tmp_path):
    with pytest.raises(SystemExit):
        main(["--dataset", "tiny", "--models", "BPR", "--runs", str(tmp_path)])


def test_costs_of_an_earlier_run_are_reused_and_new_records_re_render(tiny_data, tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "mgformer-seed0.json").write_text(json.dumps(record("MGFormer", 0, [[0, 0.01], [1, 0.07]], 1)))
    common = command("MGFormer", runs, tiny_data, tmp_path)
    (first,) = main(common)
    (runs / "mgformer-seed1.json").write_text(json.dumps(record("MGFormer", 1, [[0, 0.06]], 0)))
    saved = tmp_path / "out" / "runs" / "performance" / "time-to-accuracy-tiny.json"
    (again,) = main(common + ["--costs", str(saved), "--data_path=/nonexistent"])  # nothing is measured
    assert again["measurements"] == first["measurements"] and again["seeds"] == [0, 1]
    assert again["cost_provenance"] == first["cost_provenance"]
