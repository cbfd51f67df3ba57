"""Run a model of SELFRec (Yu et al.'s self-supervised recommendation library) on a LightGCN split, on a CPU, to set
its test scores epoch by epoch beside ours: where our model behaves unexpectedly, this tells a defect of ours from
the model's own behaviour at those settings.

    git clone https://github.com/Coder-Yu/SELFRec /tmp/SELFRec   # checked at 5b02294
    python experiments/selfrec_check.py --selfrec /tmp/SELFRec --model SimGCL --dataset gowalla --epochs 3

It trains with SELFRec's own code and its ``conf/<model>.yaml`` settings (only the data paths and ``max.epoch``
changed); the ``.cuda()`` calls become no-ops. After each epoch it ranks every item for every test user, training
items excluded, and prints test Recall@20 / NDCG@20 as RecBole defines them (vectorised here: SELFRec's per-user
loop would take hours on a CPU). SELFRec's own final ranking is skipped. Writes
``results/runs/selfrec/<dataset>-<model>-<stamp>.json``. Nothing of SELFRec's is copied into this repository.
"""

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from recbole_mgformer.records import git_commit, machine, package_versions, write_record  # noqa: E402

DATASETS = ROOT.parent / "shared" / "datasets"
TOP_K = 20


class EpochsDone(Exception):
    """Raised after the last epoch's evaluation: it ends SELFRec's run before its own (slow) final ranking."""


def write_selfrec_split(dataset_dir, out_dir):
    """``train.npz`` and ``test.npz`` (users x items) as SELFRec's ``user item 1`` lines; returns the two paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for part in ("train", "test"):
        matrix = sp.load_npz(dataset_dir / f"{part}.npz").tocoo()
        path = out_dir / f"{part}.txt"
        np.savetxt(path, np.column_stack([matrix.row, matrix.col, np.ones_like(matrix.row)]), fmt="%d")
        paths.append(path)
    return paths


def recall_and_ndcg_at_k(scores, train_items, test_items, k=TOP_K):
    """Mean Recall@k and NDCG@k over users: ``scores`` (u, n_items); ``train_items`` and ``test_items`` lists of
    item-id arrays per row. Training items are excluded from the ranking; the ideal DCG counts min(|test|, k) hits."""
    scores = scores.copy()
    for row, items in enumerate(train_items):
        scores[row, items] = -np.inf
    top = np.argpartition(-scores, k, axis=1)[:, :k]
    top = np.take_along_axis(top, np.argsort(-np.take_along_axis(scores, top, axis=1), axis=1), axis=1)
    discounts = 1.0 / np.log2(np.arange(2, k + 2))
    recall = ndcg = 0.0
    for row, truth in enumerate(test_items):
        hits = np.isin(top[row], truth)
        recall += hits.sum() / len(truth)
        ndcg += (hits * discounts).sum() / discounts[: min(len(truth), k)].sum()
    return recall / len(test_items), ndcg / len(test_items)


def run_selfrec(selfrec, model, train_path, test_path, epochs, out):
    """Train SELFRec's ``model`` in this process (its ``.cuda()`` calls made no-ops); return its settings and one
    (epoch, recall, ndcg) per epoch."""
    import torch
    import torch.nn as nn
    import yaml

    torch.Tensor.cuda = lambda self, *args, **kwargs: self
    nn.Module.cuda = lambda self, *args, **kwargs: self
    try:
        import numba  # noqa: F401
    except ImportError:  # SELFRec imports it only to compile kNN helpers these models never call
        sys.modules["numba"] = type(sys)("numba")
        sys.modules["numba"].jit = lambda *args, **kwargs: lambda f: f
    sys.path.insert(0, str(selfrec))
    os.chdir(out)  # SELFRec writes ./log and ./results
    from base.graph_recommender import GraphRecommender
    from SELFRec import SELFRec
    from util.conf import ModelConf

    scores_by_epoch = []

    def evaluate(recommender, epoch):
        data = recommender.data
        users = list(data.test_set)
        rows = np.array([data.user[u] for u in users])
        user_e, item_e = recommender.user_emb.detach().numpy(), recommender.item_emb.detach().numpy()
        recall = ndcg = 0.0
        for start in range(0, len(users), 2048):
            block = users[start : start + 2048]
            train = [np.array([data.item[i] for i in data.training_set_u[u]]) for u in block]
            test = [np.array([data.item[i] for i in data.test_set[u]]) for u in block]
            r, n = recall_and_ndcg_at_k(user_e[rows[start : start + 2048]] @ item_e.T, train, test)
            recall, ndcg = recall + r * len(block), ndcg + n * len(block)
        scores_by_epoch.append((epoch, recall / len(users), ndcg / len(users)))
        print(f"epoch {epoch}: test recall@20 {recall / len(users):.4f}, ndcg@20 {ndcg / len(users):.4f}", flush=True)
        if epoch + 1 == epochs:
            raise EpochsDone

    GraphRecommender.fast_evaluation = evaluate
    conf = yaml.safe_load((Path(selfrec) / "conf" / f"{model}.yaml").read_text())
    conf.update({"training.set": str(train_path), "test.set": str(test_path), "max.epoch": epochs})
    conf_path = out / f"{model}.yaml"
    conf_path.write_text(yaml.safe_dump(conf))
    try:
        SELFRec(ModelConf(str(conf_path))).execute()
    except EpochsDone:
        pass
    return conf, scores_by_epoch


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--selfrec", type=Path, required=True, help="a SELFRec checkout")
    parser.add_argument("--model", default="SimGCL")
    parser.add_argument("--dataset", default="gowalla", choices=["gowalla", "yelp2018"])
    parser.add_argument("--epochs", type=int, default=3, help="epochs to train and rank after (at least 1)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work_dir", type=Path, default=Path("saved/selfrec"))
    parser.add_argument("--results", type=Path, default=ROOT / "results")
    args = parser.parse_args(argv)
    if args.epochs < 1:
        parser.error(f"--epochs {args.epochs}: train at least 1 epoch")
    if not (args.selfrec / "SELFRec.py").is_file():
        parser.error(f"--selfrec {args.selfrec} is not a SELFRec checkout (no SELFRec.py): clone Coder-Yu/SELFRec")
    graph_models = sorted(
        path.stem for path in (args.selfrec / "model" / "graph").glob("*.py") if path.stem.isidentifier()
    )
    if args.model not in graph_models:  # SELFRec builds an import statement from the name and runs it
        parser.error(f"--model {args.model!r} is no graph model of this SELFRec checkout; choose one of {graph_models}")

    import random

    import torch

    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    # absolute paths: SELFRec runs in the work folder
    selfrec, work, results = args.selfrec.resolve(), (args.work_dir / args.dataset).resolve(), args.results.resolve()
    train_path, test_path = write_selfrec_split(DATASETS / args.dataset, work)
    selfrec_commit = subprocess.run(
        ["git", "-C", str(selfrec), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    started = time.time()
    conf, epochs = run_selfrec(selfrec, args.model, train_path, test_path, args.epochs, work)
    record = {
        "model": args.model,
        "dataset": args.dataset,
        "selfrec_commit": selfrec_commit or "unknown",
        "selfrec_conf": {k: v for k, v in conf.items() if k not in ("training.set", "test.set", "output")},
        "test_by_epoch": [{"epoch": e, "recall@20": r, "ndcg@20": n} for e, r, n in epochs],
        "seed": args.seed,
        "wall_s": round(time.time() - started, 1),
        "commit": git_commit(ROOT),
        "machine": machine(),
        "versions": package_versions(),
    }
    path = results / "runs" / "selfrec" / f"{args.dataset}-{args.model.lower()}-{time.strftime('%Y%m%d-%H%M%S')}.json"
    write_record(path, record)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
