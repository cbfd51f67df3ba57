import json
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


FAKE_SELFREC = {
    "SELFRec.py": """
class SELFRec:
    def __init__(self, conf):
        self.conf = conf

    def execute(self):
        from model.graph.Fake import Fake
        Fake(self.conf).execute()
""",
    "util/conf.py": """
import yaml

class ModelConf:
    def __init__(self, path):
        self.config = yaml.safe_load(open(path))

    def __getitem__(self, key):
        return self.config[key]
""",
    "base/graph_recommender.py": """
class GraphRecommender:
    def fast_evaluation(self, epoch):
        raise AssertionError("SELFRec's own evaluation ran")
""",
    "model/graph/Fake.py": """
from types import SimpleNamespace
import torch
from base.graph_recommender import GraphRecommender

def read(path):
    return [line.split()[:2] for line in open(path)]

class Fake(GraphRecommender):
    # ids in order of first appearance, as SELFRec maps them; embeddings fixed, so the scores are known
    def __init__(self, conf):
        train, test = read(conf["training.set"]), read(conf["test.set"])
        user, item, train_u, test_u = {}, {}, {}, {}
        for u, i in train:
            user.setdefault(u, len(user)), item.setdefault(i, len(item))
            train_u.setdefault(u, {})[i] = 1
        for u, i in test:
            test_u.setdefault(u, {})[i] = 1
        self.data = SimpleNamespace(user=user, item=item, training_set_u=train_u, test_set=test_u)
        self.epochs = conf["max.epoch"]
        generator = torch.Generator().manual_seed(0)
        self.user_emb = torch.randn(len(user), 4, generator=generator)
        self.item_emb = torch.randn(len(item), 4, generator=generator)

    def execute(self):
        for epoch in range(self.epochs):
            self.fast_evaluation(epoch)
        raise AssertionError("SELFRec's slow final ranking ran")
""",
    "conf/Fake.yaml": "model: {name: Fake, type: graph}\nmax.epoch: 20\n",
}


def test_a_fake_selfrec_model_is_ranked_each_epoch_and_stopped_before_its_own_final_ranking(tmp_path, monkeypatch):
    import torch

    selfrec = tmp_path / "SELFRec"
    for name, text in FAKE_SELFREC.items():
        (selfrec / name).parent.mkdir(parents=True, exist_ok=True)
        (selfrec / name).write_text(text)
    rng = np.random.default_rng(1)
    interactions = (rng.random((40, 30)) < 0.3).astype(np.float32)
    interactions[:, 0] = interactions[0, :] = 1  # every user and item trains
    held_out = (rng.random((40, 30)) < 0.5) & (interactions == 0)
    train = sp.csr_matrix(np.where(held_out, 0, interactions))
    (tmp_path / "data" / "gowalla").mkdir(parents=True)
    sp.save_npz(tmp_path / "data" / "gowalla" / "train.npz", train)
    sp.save_npz(tmp_path / "data" / "gowalla" / "test.npz", sp.csr_matrix(held_out.astype(np.float32)))
    # what the harness changes for SELFRec, undone after the test
    monkeypatch.setattr("experiments.selfrec_check.DATASETS", tmp_path / "data")
    monkeypatch.setattr(torch.Tensor, "cuda", torch.Tensor.cuda)
    monkeypatch.setattr(torch.nn.Module, "cuda", torch.nn.Module.cuda)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.chdir(tmp_path)
    imported_before = set(sys.modules)
    try:
        main(["--selfrec", str(selfrec), "--model", "Fake", "--epochs", "2", "--results", str(tmp_path / "results")])
    finally:
        fake_packages = ("SELFRec", "base", "util", "model", "numba")  # only this test's imports of them go
        for name in [m for m in set(sys.modules) - imported_before if m.split(".")[0] in fake_packages]:
            del sys.modules[name]

    (record_path,) = (tmp_path / "results" / "runs" / "selfrec").glob("gowalla-fake-*.json")
    record = json.loads(record_path.read_text())
    assert [entry["epoch"] for entry in record["test_by_epoch"]] == [0, 1]
    assert record["selfrec_conf"]["max.epoch"] == 2
    # The same fixed embeddings, ranked directly in SELFRec's id order.
    coo = train.tocoo()
    users = {u: k for k, u in enumerate(dict.fromkeys(coo.row))}
    items = {i: k for k, i in enumerate(dict.fromkeys(coo.col))}
    generator = torch.Generator().manual_seed(0)
    user_e, item_e = torch.randn(len(users), 4, generator=generator), torch.randn(len(items), 4, generator=generator)
    tested = [u for u in range(40) if held_out[u].any()]
    scores = (user_e @ item_e.T).numpy()[[users[u] for u in tested]]
    expected = direct_recall_and_ndcg(
        scores,
        [[items[i] for i in np.flatnonzero(train[u].toarray())] for u in tested],
        [[items[i] for i in np.flatnonzero(held_out[u])] for u in tested],
        20,
    )
    for entry in record["test_by_epoch"]:
        assert (entry["recall@20"], entry["ndcg@20"]) == pytest.approx(expected)
