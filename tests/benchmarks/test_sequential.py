import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks import sequential  # noqa: E402


def write_histories(folder, name="tinyseq", n_users=20, n_items=25, length=8):
    """Users walking forward through the items, as RecBole atomic interactions with timestamps."""
    path = folder / name
    path.mkdir(parents=True)
    lines = ["user_id:token\titem_id:token\ttimestamp:float"]
    for user in range(n_users):
        lines += [f"u{user}\ti{(3 * user + step) % n_items}\t{step}" for step in range(length)]
    (path / f"{name}.inter").write_text("\n".join(lines) + "\n")
    return folder


@pytest.fixture
def bench(tmp_path, monkeypatch):
    """The benchmark's arguments on a tiny dataset under the ml-100k protocol, writing under tmp_path."""
    monkeypatch.setattr(sequential, "protocol_file", lambda dataset: ROOT / "properties" / "sequential" / "ml-100k.yaml")
    data = write_histories(tmp_path / "data")
    return ["--models", "GRU4Rec", "--datasets", "tinyseq", "--seeds", "1", "--data_path", str(data),
            "--runs", str(tmp_path / "runs"), "--table", str(tmp_path / "sequential.md"),
            "--checkpoint_dir", str(tmp_path / "saved"), "--epochs", "3", "--embedding_size=8", "--hidden_size=8",
            "--train_batch_size=16", "--stopping_step=50", "--state=WARNING"]


def test_a_run_is_recorded_with_its_epochs_and_skipped_on_a_rerun(bench, tmp_path, capsys):
    sequential.main(bench)
    [record_path] = (tmp_path / "runs" / "tinyseq").glob("gru4rec-*-seed1.json")
    record = json.loads(record_path.read_text())
    assert record["epochs"] == 3 and len(record["valid_history"]) == 3 and record["resumed_from_epoch"] is None
    assert record["best_epoch"] in (0, 1, 2) and 0 <= record["test"]["ndcg@10"] <= 1
    assert not list((tmp_path / "saved" / "tinyseq").glob("*.latest.*"))
    assert "| GRU4Rec embedding_size=8 epochs=3" in (tmp_path / "sequential.md").read_text()

    sequential.main(bench)
    assert "[skip] GRU4Rec" in capsys.readouterr().out


def test_an_interrupted_run_continues_from_its_last_epoch(bench, tmp_path, monkeypatch, capsys):
    from recbole.model.sequential_recommender.gru4rec import GRU4Rec

    calculate_loss, steps = GRU4Rec.calculate_loss, []

    def dies_in_the_third_epoch(self, interaction):
        steps.append(1)
        if len(steps) == 18:  # 20 users x 5 training prefixes / 16 a batch = 7 steps an epoch
            raise KeyboardInterrupt  # the machine goes away
        return calculate_loss(self, interaction)

    with monkeypatch.context() as patch, pytest.raises(KeyboardInterrupt):
        patch.setattr(GRU4Rec, "calculate_loss", dies_in_the_third_epoch)
        sequential.main(bench)
    saved = tmp_path / "saved" / "tinyseq"
    assert len(list(saved.glob("*.latest.pth"))) == 1 and not (tmp_path / "runs" / "tinyseq").exists()

    sequential.main(bench)
    assert "at epoch 2" in capsys.readouterr().out
    [record_path] = (tmp_path / "runs" / "tinyseq").glob("*.json")
    record = json.loads(record_path.read_text())
    # the history of epochs 0 and 1 comes back from the last epoch's files, not just the best checkpoint's score
    assert record["epochs"] == 3 and record["resumed_from_epoch"] == 2
    assert [epoch for epoch, _ in record["valid_history"]] == [0, 1, 2]
    assert not list(saved.glob("*.latest.*"))
