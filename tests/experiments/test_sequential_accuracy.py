import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "model" / "sequential_recommender"))

from sequence_data import ML100K_SEQUENTIAL, write_sequences  # noqa: E402

from experiments.sequential_accuracy import main  # noqa: E402


def test_every_form_trains_at_each_seed_is_paired_by_user_and_a_rerun_skips_finished_runs(tmp_path, capsys):
    data = write_sequences(tmp_path / "data")
    argv = ["--dataset", "tinyseq", "--epochs", "1", "--seeds", "0,1", "--results", str(tmp_path / "results")]
    argv += [f"--data_path={data}", "--config_files", ML100K_SEQUENTIAL]
    main(argv)
    folder = tmp_path / "results" / "runs" / "performance" / "sequential-accuracy"
    names = sorted(p.name for p in folder.glob("*.json"))
    forms = {"sasrec": ("recbole", "ours", "sequence"), "gru4rec": ("recbole", "ours", "sequence")}
    forms["eagps"] = ("ours", "sequence")  # RecBole has no EAGPS
    assert names == sorted(f"{m}-{form}-epochs1-seed{s}.json" for m in forms for form in forms[m] for s in (0, 1))
    record = json.loads((folder / "sasrec-ours-epochs1-seed0.json").read_text())
    assert record["test"]["ndcg@10"] == pytest.approx(
        sum(record["per_user"].values()) / len(record["per_user"]), abs=1e-4
    )
    page = (tmp_path / "results" / "sequential-accuracy.md").read_text()
    assert "| SASRec | RecBole's | 2 |" in page and "| GRU4Rec | ours | 2 |" in page
    assert "SASRec: ours is **" in page and "GRU4Rec: ours is **" in page and "from 2 seed(s)" in page
    for model in ("SASRec", "GRU4Rec", "EAGPS"):
        assert f"| {model} | ours, whole sequences | 2 |" in page
        assert f"{model}: ours, whole sequences is **" in page
    assert "EAGPS: ours is" not in page and "| EAGPS | RecBole's |" not in page
    capsys.readouterr()
    main(argv)  # everything found: nothing trains again, the page is the same
    assert "epochs" not in capsys.readouterr().out.split("# Sequential models")[0]
    assert (tmp_path / "results" / "sequential-accuracy.md").read_text() == page


def test_a_strided_form_trains_and_is_compared_with_ours(tmp_path):
    data = write_sequences(tmp_path / "data")
    argv = ["--models", "GRU4Rec", "--dataset", "tinyseq", "--epochs", "1", "--seeds", "0", "--strides", "3"]
    main([*argv, "--results", str(tmp_path / "results"), f"--data_path={data}", "--config_files", ML100K_SEQUENTIAL])
    folder = tmp_path / "results" / "runs" / "performance" / "sequential-accuracy"
    assert (folder / "gru4rec-sequence-stride3-epochs1-seed0.json").exists()
    page = (tmp_path / "results" / "sequential-accuracy.md").read_text()
    assert "| GRU4Rec | ours, whole sequences, stride 3 | 1 |" in page
    assert "GRU4Rec: ours, whole sequences, stride 3 is **" in page


def test_an_unknown_model_or_no_epoch_is_refused(capsys):
    with pytest.raises(SystemExit):
        main(["--models", "SASRec,BERT4Rec"])
    assert "BERT4Rec" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--epochs", "0"])
    assert "--epochs must be at least 1" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--strides", "ten"])
    assert "--strides must be whole numbers" in capsys.readouterr().err
