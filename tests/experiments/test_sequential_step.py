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
    for model in ("SASRec", "GRU4Rec"):
        assert f"| {model} | released |" in table and f"| {model} | kept |" in table
    assert "python experiments/sequential_step.py --dataset tinyseq" in table and "Seed 2020" in table
    (record_file,) = (tmp_path / "results" / "runs" / "performance").glob("sequential-step-*.json")
    records = json.loads(record_file.read_text())["records"]
    assert [(r["model"], r["heap"]) for r in records] == [
        ("SASRec", "released"),
        ("GRU4Rec", "released"),
        ("SASRec", "kept"),
        ("GRU4Rec", "kept"),
    ]
    for r in records:
        recbole, ours, bf16 = r["eval_losses"]
        assert ours == pytest.approx(recbole, rel=1e-6) and bf16 == pytest.approx(recbole, rel=1e-2)
        assert r["steps_timed"] == 2 and r["ours_step_s"] > 0


def test_an_unknown_model_is_refused(capsys):
    with pytest.raises(SystemExit):
        main(["--models", "SASRec,BERT4Rec"])
    assert "BERT4Rec" in capsys.readouterr().err


def test_profile_prints_the_costliest_ops_of_a_step_of_each_model(tmp_path, capsys):
    data = write_sequences(tmp_path / "data")
    argv = ["--profile", "--models", "SASRec", "--dataset", "tinyseq", "--batch_size", "16", "--heap", "released"]
    main([*argv, f"--data_path={data}", "--config_files", ML100K_SEQUENTIAL])
    out = capsys.readouterr().out
    assert "## RecBole's SASRec: one step" in out and "## this project's (fp32) SASRec: one step" in out
    assert "Self CPU" in out and "aten::" in out
