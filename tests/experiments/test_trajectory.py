import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from experiments.trajectory import main, token_parts  # noqa: E402

TINY = [
    "--eval_args={split: {RS: [0.8, 0.1, 0.1]}, order: RO, group_by: user, mode: full}",
    "--metrics=[Recall, NDCG]",
    "--topk=[20]",
    "--valid_metric=NDCG@20",
    "--embedding_size=8",
    "--train_batch_size=64",
]


def run(tiny_data, tmp_path, *extra):
    return main(["--dataset", "tiny", "--data_path", str(tiny_data), "--results", str(tmp_path), *TINY, *extra])


def test_epoch_minus_one_is_the_untrained_model_and_each_epoch_trains_it(tiny_data, tmp_path, tiny_setup):
    rows = run(tiny_data, tmp_path, "--epochs", "2")
    assert [row["epoch"] for row in rows] == [-1, 0, 1]
    assert rows[0]["loss"] is None and all(row["loss"] is not None for row in rows[1:])
    _, model, trainer, (_, valid, _) = tiny_setup(train_batch_size=64, topk=[20])  # the same seed, untrained
    untrained = trainer.evaluate(valid, load_best_model=False, show_progress=False)["ndcg@20"]
    assert rows[0]["valid"] == pytest.approx(untrained)
    assert rows[1]["embedding_norm"] != pytest.approx(rows[0]["embedding_norm"])  # the epoch moved E
    assert 0 < rows[2]["attention_norm"] and -1 <= rows[2]["attention_cosine_to_mean"] <= 1
    page = (tmp_path / "exploration" / "trajectories-tiny.md").read_text()
    assert "`python experiments/trajectory.py --dataset tiny" in page and "seed 2020, commit" in page
    assert "| -1 |  | " in page and "Attn cosine to mean" in page and "Best validation epoch:" in page


def test_a_model_without_attention_has_no_attention_columns(tiny_data, tmp_path):
    rows = run(tiny_data, tmp_path, "--epochs", "0", "--attention=False")
    assert len(rows) == 1 and "attention_norm" not in rows[0]
    assert "Attn cosine" not in (tmp_path / "exploration" / "trajectories-tiny.md").read_text()


def test_negative_epochs_are_refused(tiny_data, tmp_path):
    with pytest.raises(SystemExit):
        run(tiny_data, tmp_path, "--epochs", "-1")


def test_token_parts_of_a_model_without_attention_are_its_tokens(tiny_setup):
    _, model, _, _ = tiny_setup(attention=False)
    parts = token_parts(model)
    assert parts["attention_norm"] == 0.0 and parts["encoding_norm"] > 0 and parts["embedding_norm"] > 0
