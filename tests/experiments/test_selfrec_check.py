import math
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from experiments.selfrec_check import main, recall_and_ndcg_at_k, write_selfrec_split  # noqa: E402


def direct_recall_and_ndcg(scores, train_items, test_items, k):
    """One user at a time: sort every unseen item by score, count hits in the first k."""
    recalls, ndcgs = [], []
    for row, (train, truth) in enumerate(zip(train_items, test_items)):
        ranked = [i for i in sorted(range(scores.shape[1]), key=lambda i: -scores[row, i]) if i not in set(train)][:k]
        hits = [i in set(truth) for i in ranked]
        recalls.append(sum(hits) / len(truth))
        dcg = sum(h / math.log2(rank + 2) for rank, h in enumerate(hits))
        ndcgs.append(dcg / sum(1 / math.log2(rank + 2) for rank in range(min(len(truth), k))))
    return np.mean(recalls), np.mean(ndcgs)


def test_metrics_match_a_per_user_ranking_and_skip_training_items():
    rng = np.random.default_rng(0)
    scores = rng.normal(size=(30, 50))
    train = [rng.choice(50, size=rng.integers(1, 10), replace=False) for _ in range(30)]
    test = [rng.choice(np.setdiff1d(np.arange(50), t), size=rng.integers(1, 25), replace=False) for t in train]
    got = recall_and_ndcg_at_k(scores, train, test, k=20)
    assert got == pytest.approx(direct_recall_and_ndcg(scores, train, test, 20))
    # A training item scored highest is never a hit: giving the test items top scores makes both metrics 1 where
    # they fit in k.
    perfect = np.zeros((1, 50))
    perfect[0, [1, 2]], perfect[0, 0] = 5.0, 10.0
    assert recall_and_ndcg_at_k(perfect, [np.array([0])], [np.array([1, 2])], k=20) == pytest.approx((1.0, 1.0))


def test_split_files_hold_every_interaction_as_selfrec_lines(tmp_path):
    train = sp.csr_matrix(np.array([[1, 0, 1], [0, 1, 0]], dtype=np.float32))
    test = sp.csr_matrix(np.array([[0, 1, 0], [1, 0, 0]], dtype=np.float32))
    sp.save_npz(tmp_path / "train.npz", train)
    sp.save_npz(tmp_path / "test.npz", test)
    train_path, test_path = write_selfrec_split(tmp_path, tmp_path / "out")
    assert sorted(train_path.read_text().split("\n")[:-1]) == ["0 0 1", "0 2 1", "1 1 1"]
    assert sorted(test_path.read_text().split("\n")[:-1]) == ["0 1 1", "1 0 1"]


def test_a_path_that_is_no_selfrec_checkout_is_refused_by_name(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["--selfrec", str(tmp_path)])
    assert "is not a SELFRec checkout" in capsys.readouterr().err


def test_a_model_that_selfrec_lacks_is_refused_before_it_reaches_selfrec(tmp_path, capsys):
    (tmp_path / "SELFRec.py").write_text("")
    (tmp_path / "model" / "graph").mkdir(parents=True)
    (tmp_path / "model" / "graph" / "SimGCL.py").write_text("")
    with pytest.raises(SystemExit):
        main(["--selfrec", str(tmp_path), "--model", "os; import os"])
    assert "is no graph model of this SELFRec checkout; choose one of ['SimGCL']" in capsys.readouterr().err
