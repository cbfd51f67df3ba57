import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from conftest import TINY_METRICS, held_elsewhere, output_args  # noqa: E402

from experiments.attention_probes import control_of, main, paired_delta  # noqa: E402

TINY = [*TINY_METRICS, "--embedding_size=8"]


def probe_args(tiny_data, tmp_path, models, epochs=2):
    return [
        "--dataset",
        "tiny",
        "--models",
        models,
        "--seeds",
        "0",
        "--epochs",
        str(epochs),
        "--stopping_step",
        "5",
        *output_args(tiny_data, tmp_path),
        *TINY,
    ]


def test_probes_write_records_a_table_and_resume(tiny_data, tmp_path, capsys):
    args = probe_args(
        tiny_data, tmp_path, "MGFormer[attention=False],MGFormer[degree_gate=True; learn_temperature=True]"
    )
    assert main(args) == 0
    runs = tmp_path / "results" / "exploration" / "runs" / "tiny"
    control = json.loads((runs / "probe-mgformer-attention-false-seed0.json").read_text())
    gated = json.loads((runs / "probe-mgformer-degree-gate-true-learn-temperature-true-seed0.json").read_text())
    assert gated["probe_schedule"] == {
        "epochs": 2,
        "stopping_step": 5,
        "learning_rate": 0.005,
        "train_batch_size": 1024,
    }
    assert gated["config"]["learning_rate"] == 0.005 and gated["epochs"] == 2
    assert set(gated["test_popularity"]) == {"Unpopular", "Normal", "Popular"}
    learned = gated["attention_diagnostics"]
    assert 0 < learned["z"]["min"] <= learned["z"]["max"] < 1
    assert {"temperature", "gate_slope", "gate_bias", "residual_scale"} <= set(learned["layer0"])
    assert learned["layer0"]["query_max_abs"] > 0 and learned["layer0"]["key_max_abs"] > 0
    assert control["attention_diagnostics"] == {} and gated["train_seconds_per_epoch"] > 0
    table = (tmp_path / "results" / "notes" / "attention-probes-tiny.md").read_text()
    assert "| MGFormer attention=False | 1 |" in table
    row = next(line for line in table.splitlines() if line.startswith("| MGFormer degree_gate=True"))
    delta = gated["test"]["ndcg@20"] - control["test"]["ndcg@20"]
    assert f"| {delta:+.4f} (1) | MGFormer attention=False |" in row
    assert "Schedule: {'epochs': 2" in table
    capsys.readouterr()
    before = (runs / "probe-mgformer-attention-false-seed0.json").read_text()
    assert main(args) == 0
    assert capsys.readouterr().out.count("record exists, skipped") == 2
    assert (runs / "probe-mgformer-attention-false-seed0.json").read_text() == before


def test_a_record_of_another_schedule_is_an_error(tiny_data, tmp_path, capsys):
    main(probe_args(tiny_data, tmp_path, "MGFormer[attention=False]", epochs=1))
    with pytest.raises(SystemExit):
        main(probe_args(tiny_data, tmp_path, "MGFormer[attention=False]", epochs=2))
    assert "was made with the schedule" in capsys.readouterr().err


def test_a_misspelled_option_fails_before_any_run(tiny_data, tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(probe_args(tiny_data, tmp_path, "MGFormer[token_propgation=2]"))
    assert "token_propagation" in capsys.readouterr().err
    assert not (tmp_path / "results" / "exploration" / "runs" / "tiny").exists()


def test_a_variant_is_compared_with_its_own_tokens_without_attention():
    def group(overrides, model="MGFormer"):
        return [{"model": model, "overrides": overrides}]

    groups = {
        "plain": group({"attention": False}),
        "propagated": group({"token_propagation": 2, "attention": False}),
        "propagated attention": group({"attention_temperature": 0.5, "token_propagation": 2}),
        "attention": group({"degree_gate": True}),
        "DirectAU": group({}, "DirectAU"),
    }
    assert control_of(groups["propagated attention"], groups) == "propagated"
    assert control_of(groups["attention"], groups) == "plain"
    assert control_of(groups["plain"], groups) is None and control_of(groups["DirectAU"], groups) is None
    assert control_of(group({"embedding_size": 128}), groups) is None  # no control at that size


def test_the_paired_delta_matches_seeds():
    control = [{"seed": 0, "test": {"ndcg@20": 0.10}}, {"seed": 1, "test": {"ndcg@20": 0.20}}]
    variant = [
        {"seed": 1, "test": {"ndcg@20": 0.23}},
        {"seed": 0, "test": {"ndcg@20": 0.11}},
        {"seed": 7, "test": {"ndcg@20": 0.9}},
    ]
    assert paired_delta(variant, control) == "+0.0200 ± 0.0141 (2)"
    assert paired_delta(variant, []) == ""


def test_a_probe_another_process_trains_is_skipped_not_a_crash(tiny_data, tmp_path, capsys):
    args = probe_args(tiny_data, tmp_path, "MGFormer[attention=False]", epochs=1)
    with held_elsewhere(tmp_path / "saved" / "tiny" / "mgformer-attention-false-seed0.lock") as holder:
        assert main(args) == 0
    out = capsys.readouterr().out
    assert f"MGFormer attention=False on tiny, seed 0: skipped, another process (pid {holder.pid}) holds" in out
    runs = tmp_path / "results" / "exploration" / "runs" / "tiny"
    assert not (runs / "probe-mgformer-attention-false-seed0.json").exists()
