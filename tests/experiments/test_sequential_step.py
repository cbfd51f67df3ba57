import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "model" / "sequential_recommender"))

from sequence_data import ML100K_SEQUENTIAL, write_sequences  # noqa: E402

from experiments.sequential_step import main  # noqa: E402


def test_main_times_recboles_models_and_ours_under_both_heaps_and_writes_the_table(tmp_path):
    data = write_sequences(tmp_path / "data")
    argv = ["--dataset", "tinyseq", "--batch_size", "16", "--repeats", "1", "--steps", "2", "--results"]
    main([*argv, str(tmp_path / "results"), f"--data_path={data}", "--config_files", ML100K_SEQUENTIAL])
    table = (tmp_path / "results" / "sequential-step.md").read_text()
    for model in ("SASRec", "GRU4Rec", "EAGPS"):
        assert f"| {model} | released |" in table and f"| {model} | kept |" in table
    assert "python experiments/sequential_step.py --dataset tinyseq" in table and "Seed 2020" in table
    assert "RecBole has no EAGPS" in table and "experiments/eagps_reference.py" in table
    (record_file,) = (tmp_path / "results" / "runs" / "performance").glob("sequential-step-*.json")
    records = json.loads(record_file.read_text())["records"]
    assert [(r["model"], r["heap"]) for r in records] == [
        (model, heap) for heap in ("released", "kept") for model in ("SASRec", "GRU4Rec", "EAGPS")
    ]
    for r in records:
        recbole, ours, *bf16 = r["eval_losses"]  # EAGPS: the reference's in RecBole's place
        assert ours == pytest.approx(recbole, rel=1e-6) and len(bf16) == 1
        assert all(x == pytest.approx(recbole, rel=1e-2) for x in bf16)
        assert r["steps_timed"] == 2 and r["ours_step_s"] > 0 and r["recbole_step_s"] > 0
    eagps = [r for r in records if r["model"] == "EAGPS"]
    assert all(r["reference"] == "experiments/eagps_reference.py" and r["ours_bf16_step_s"] > 0 for r in eagps)
    assert "## An epoch under the whole-sequence protocol" in table
    for r in records:  # the window arm: fewer rows a step, about as many steps an epoch
        assert r["sequence_step_s"] > 0 and 1 <= r["sequence_windows_per_step"] < 16
        assert abs(r["sequence_steps_per_epoch"] - r["steps_per_epoch"]) <= 0.5 * r["steps_per_epoch"]
        # the ratio of the two epochs, within what rounding the steps to 4 decimals (and it to 2) leaves
        ratio = r["steps_per_epoch"] / r["sequence_steps_per_epoch"]
        low = (r["recbole_step_s"] - 5e-5) / (r["sequence_step_s"] + 5e-5) * ratio - 0.005
        high = (r["recbole_step_s"] + 5e-5) / (r["sequence_step_s"] - 5e-5) * ratio + 0.005
        assert low <= r["epoch_speedup_sequence"] <= high
        assert r["sequence_bf16_step_s"] > 0


def test_an_unknown_model_is_refused(capsys):
    with pytest.raises(SystemExit):
        main(["--models", "SASRec,BERT4Rec"])
    assert "BERT4Rec" in capsys.readouterr().err


def test_profile_prints_the_costliest_ops_of_a_step_of_each_model(tmp_path, capsys):
    data = write_sequences(tmp_path / "data")
    argv = ["--profile", "--models", "SASRec,EAGPS", "--dataset", "tinyseq", "--batch_size", "16"]
    main([*argv, "--heap", "released", f"--data_path={data}", "--config_files", ML100K_SEQUENTIAL])
    out = capsys.readouterr().out
    assert "## RecBole's SASRec: one step" in out and "## this project's (fp32) SASRec: one step" in out
    assert "## the reference (experiments/eagps_reference.py) EAGPS: one step" in out
    assert "## this project's (fp32) EAGPS: one step" in out
    assert "## this project's (fp32, whole sequences) SASRec: one step" in out
    assert "Self CPU" in out and "aten::" in out


def test_the_heap_option_is_replaced_in_either_spelling():
    from experiments.sequential_step import without_option

    argv = ["--models", "SASRec", "--heap", "released", "--repeats", "2", "--heap=kept"]
    assert without_option(argv, "--heap") == ["--models", "SASRec", "--repeats", "2"]
