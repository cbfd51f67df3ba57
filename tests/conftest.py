"""Shared fixtures: a small generated RecBole dataset, and a scratch working directory so RecBole's
./log, ./log_tensorboard and ./saved never land in the checkout."""

import os
import pickle
import shutil
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
import torch

import recbole_mgformer
import recbole_mgformer.config.defaults as defaults
from recbole_mgformer.quick_start import build_config, prepare


@pytest.fixture(autouse=True, scope="session")
def registered():
    """The test process is an entry point: many tests call RecBole's own functions (Config, create_dataset,
    run_recbole) on the project's models. That each entry point registers by itself, and that importing any module
    registers nothing, is tests/integration/test_patches.py's."""
    recbole_mgformer.register()


@pytest.fixture(autouse=True)
def scratch_cwd(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def write_interactions(folder, name="tiny", n_users=40, n_items=60, per_user=12, seed=0):
    """A clustered implicit dataset: users prefer the items of their own group, so a model can learn."""
    rng = np.random.default_rng(seed)
    path = folder / name
    path.mkdir(parents=True, exist_ok=True)
    lines = ["user_id:token\titem_id:token"]
    for user in range(n_users):
        group = user % 3
        preferred = [i for i in range(n_items) if i % 3 == group]
        items = rng.choice(preferred, size=per_user, replace=False)
        lines += [f"u{user}\ti{item}" for item in items]
    (path / f"{name}.inter").write_text("\n".join(lines) + "\n")
    return folder


def write_split(folder, name, test_file):
    """``name``'s interactions split by user into ``.train.inter`` (all but 3) and ``.test.inter`` (3); with
    ``test_file`` "test" the validation file is the test file, as ``gowalla-full`` and ``yelp2018-full`` read it."""
    write_interactions(folder, name)
    whole = folder / name / f"{name}.inter"
    header, *rows = whole.read_text().splitlines()
    whole.unlink()
    by_user = {}
    for row in rows:
        by_user.setdefault(row.split("\t")[0], []).append(row)
    parts = {"train": [], "valid": [], "test": []}
    for user_rows in by_user.values():
        parts["train"] += user_rows[:-3]
        parts["valid"] += user_rows[-3:-2] if test_file == "valid" else []
        parts["test"] += user_rows[-3:] if test_file == "test" else user_rows[-2:]
    for part, lines in parts.items():
        (folder / name / f"{name}.{part}.inter").write_text("\n".join([header, *lines]) + "\n")
    return {"benchmark_filename": ["train", test_file, "test"], "data_path": str(folder)}


def write_context_dataset(folder, name="toyctx", score=lambda user: f"{0.0 if user % 2 else 0.5 + user / 10}"):
    """A small context-aware dataset: users with a token feature (missing for u3) and a float feature
    (``score(user)``, a string; '' leaves it missing), items with a genre sequence of varying length (i5: none)
    and a year (missing for i4); ratings carry the labels."""
    path = folder / name
    path.mkdir(parents=True)
    users = ["user_id:token\tgender:token\tscore:float"]
    users += [f"u{u}\t{'' if u == 3 else 'MF'[u % 2]}\t{score(u)}" for u in range(7)]
    items = ["item_id:token\tgenres:token_seq\tyear:token"]
    genres = ["a", "a b", "b c d", "c", "a d", "", "b"]
    items += [f"i{i}\t{genres[i]}\t{'' if i == 4 else 1990 + i % 3}" for i in range(7)]
    inter = ["user_id:token\titem_id:token\trating:float"]
    inter += [f"u{u}\ti{i}\t{1 + (u + 2 * i) % 5}" for u in range(7) for i in range(7)]
    for suffix, lines in (("user", users), ("item", items), ("inter", inter)):
        (path / f"{name}.{suffix}").write_text("\n".join(lines) + "\n")
    return folder


# how RecBole reads write_context_dataset's files: every feature, ratings of 4 and more as positives, a labeled split
CONTEXT_PROTOCOL = {
    "load_col": {
        "inter": ["user_id", "item_id", "rating"],
        "user": ["user_id", "gender", "score"],
        "item": ["item_id", "genres", "year"],
    },
    "threshold": {"rating": 4},
    "numerical_features": ["score"],
    "normalize_all": False,
    "eval_args": {"split": {"RS": [0.6, 0.2, 0.2]}, "order": "RO", "group_by": None, "mode": "labeled"},
    "valid_metric": "AUC",
    "train_neg_sample_args": None,
}


TINY_CONFIG = {
    "eval_args": {"split": {"RS": [0.8, 0.1, 0.1]}, "order": "RO", "group_by": "user", "mode": "full"},
    "metrics": ["Recall", "NDCG"],
    "topk": [5, 20],
    "valid_metric": "NDCG@20",
    "show_progress": False,
    "epochs": 2,
    "train_batch_size": 64,
    "embedding_size": 8,
    "state": "WARNING",
}


# a quiet run of d = 8 on the toy dataset, scored on the general table's metrics (with data_path and epochs)
TINY_RUN_CONFIG = {
    "embedding_size": 8,
    "show_progress": False,
    "state": "WARNING",
    "metrics": ["Recall", "NDCG"],
    "topk": [20],
    "valid_metric": "NDCG@20",
}


@pytest.fixture
def tiny_data(tmp_path):
    return write_interactions(tmp_path / "data")


REPOSITORY = Path(__file__).resolve().parents[1]
# two epochs of small models, scored as the boards score: enough to write every record a script writes
SCRIPT_OPTIONS = (
    "--epochs=2",
    "--embedding_size=8",
    "--state=WARNING",
    "--metrics=[Recall,NDCG]",
    "--topk=[20]",
    "--valid_metric=NDCG@20",
)


@pytest.fixture
def run_script(tiny_data, tmp_path):
    """``run(name, **environment)``: runs ``experiments/<name>`` from a copy in tmp_path (a script works from the
    folder above its own, where RecBole's log/ lands) on the toy dataset, its results under tmp_path/results and its
    checkpoints under tmp_path/saved; asserts that it succeeded and returns the finished process."""

    def run(name, **environment):
        (tmp_path / "experiments").mkdir(exist_ok=True)
        shutil.copy(REPOSITORY / "experiments" / name, tmp_path / "experiments")
        env = {
            **os.environ,
            "PYTHON": sys.executable,
            "PYTHONPATH": str(REPOSITORY),
            "DATASET": "tiny",
            "RESULTS": str(tmp_path / "results"),
            "CHECKPOINTS": str(tmp_path / "saved"),
            **environment,
        }
        command = ["bash", str(tmp_path / "experiments" / name), "--data_path", str(tiny_data), *SCRIPT_OPTIONS]
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        return done

    return run


@pytest.fixture
def tiny_setup(tiny_data):
    """``make(model, **overrides)`` -> (config, model, trainer, (train, valid, test)) on the tiny dataset."""

    def make(model="MGFormer", **overrides):
        config, _ = build_config(model, "tiny", config_dict={**TINY_CONFIG, "data_path": str(tiny_data), **overrides})
        model_instance, trainer, data = prepare(config)
        return config, model_instance, trainer, data

    return make


def dense_normalized_adjacency(interactions):
    """``D^-1/2 A D^-1/2`` of ``A = [[0, R], [R^T, 0]]`` written out densely, isolated nodes left at zero;
    ``interactions`` is a scipy (n_users, n_items) matrix. Returns a float64 numpy array."""
    r = (np.asarray(interactions.todense()) > 0).astype(np.float64)
    n_users, n_items = r.shape
    a = np.zeros((n_users + n_items, n_users + n_items))
    a[:n_users, n_users:], a[n_users:, :n_users] = r, r.T
    degree = a.sum(axis=1)
    scale = np.array([d**-0.5 if d > 0 else 0.0 for d in degree])
    return scale[:, None] * a * scale[None, :]


@pytest.fixture
def dense_adjacency():
    """``dense(train_data) -> (n, n) float32 tensor``: the reference adjacency of a training split."""
    return lambda train: torch.from_numpy(dense_normalized_adjacency(train._dataset.inter_matrix(form="coo"))).float()


@pytest.fixture(scope="session")
def ml100k_pop():
    """Pop's result on ml-100k under the project's protocol, the floor every trained model must clear."""
    from recbole_mgformer import run_recommender

    return run_recommender("Pop", "ml-100k", config_dict={"show_progress": False, "state": "WARNING"}, saved=False)


@pytest.fixture
def dataset_configs(tmp_path, monkeypatch):
    """``add(name, text)`` writes ``properties/dataset/<name>.yaml`` into a copy of properties/ the code then reads."""
    properties = tmp_path / "properties"
    shutil.copytree(defaults.properties_dir(), properties)
    monkeypatch.setattr(defaults, "properties_dir", lambda: properties)

    def add(name, text):
        (properties / "dataset" / f"{name}.yaml").write_text(text)

    return add


# a process that takes a claim (recbole_mgformer.benchmark.claims) and keeps it
HOLD_A_CLAIM = """
import fcntl, os, sys, time
handle = open(sys.argv[1], "a+")
fcntl.flock(handle, fcntl.LOCK_EX)
handle.seek(0); handle.truncate(); handle.write(f"{os.getpid()}\\n"); handle.flush()
print("held", flush=True)
time.sleep(600)
"""


@contextmanager
def held_elsewhere(path):
    """Another process holding the claim at ``path`` until the block ends, then killed (no clean release)."""
    pytest.importorskip("fcntl")  # no claims without flock
    path.parent.mkdir(parents=True, exist_ok=True)
    holder = subprocess.Popen([sys.executable, "-c", HOLD_A_CLAIM, str(path)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        yield holder
    finally:
        holder.kill()
        holder.wait()


# ------------------------------------------------------------------------------------------------ command lines

# the toy dataset's metrics, those the general table shows, at RecBole's quiet log level
TINY_METRICS = ["--state=WARNING", "--metrics=[Recall,NDCG]", "--topk=[20]", "--valid_metric=NDCG@20"]


def output_args(data, tmp_path, results="results"):
    """Where a run reads its data and writes its records (``tmp_path / results``) and checkpoints (``tmp_path /
    'saved'``): the options the benchmark and the probes share."""
    return ["--data_path", str(data), "--results", str(tmp_path / results), "--checkpoint_dir", str(tmp_path / "saved")]


def benchmark_args(models, data, tmp_path, *settings, dataset="tiny", seeds="0", results="results"):
    """``python -m recbole_mgformer.benchmark``'s arguments: ``models`` on ``dataset`` for ``seeds``, written under
    tmp_path (``output_args``), then ``settings`` (``--key=value`` options, a search budget, ...)."""
    return [
        "--models",
        models,
        "--datasets",
        dataset,
        "--seeds",
        seeds,
        *output_args(data, tmp_path, results),
        *settings,
    ]


def search_budget_args(tmp_path, *more):
    """The benchmark's equal-budget search of 2 trials of at most 2 epochs an entry, then ``more``; its tuned files
    and Ray's folders under tmp_path."""
    return [
        "--tuned-dir",
        str(tmp_path / "tuned"),
        "--tune-budget",
        "2",
        "--tune-epochs",
        "2",
        *more,
        "--tune-storage",
        str(tmp_path / "tune"),
    ]


def tune_args(model, tmp_path, *settings, storage="tune", results="results"):
    """``python -m recbole_mgformer.tune``'s arguments: a search of ``model`` on the toy dataset with ``settings``,
    Ray's folder at ``tmp_path / storage`` and the report under ``tmp_path / results``."""
    return [
        "--model",
        model,
        "--dataset",
        "tiny",
        *settings,
        "--storage",
        str(tmp_path / storage),
        "--results",
        str(tmp_path / results),
    ]


# ------------------------------------------------------------------------------------------------ payloads


class Payload:
    """A pickle payload: unpickling it opens ``path`` for writing, which creates the file."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return open, (self.path, "w")


def write_payload(file, marker):
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_bytes(pickle.dumps(Payload(marker)))
    return file


def eval_payload(marker):
    """A setting RecBole's ``eval`` runs: it creates ``marker`` and evaluates to 0.01."""
    return f"__import__('builtins').open({str(marker)!r}, 'w') and 0.01"


# after ``setup`` (Python source), a child process's median page faults for a 41 MB product, above glibc's largest
# default mmap threshold: about 10,000 4 KiB pages when each product is mapped anew, a few when freed memory is reused
_LARGE_PRODUCT_FAULTS = """
import resource, torch
x = torch.ones(2048, 2, 50, 50)
for _ in range(24):  # the first ones grow the heap
    torch.mul(x, 2.0)
faults = []
for _ in range(9):  # the median product's: a neighbour's memory pressure can fault a few in any one
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    torch.mul(x, 2.0)
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print(sorted(faults)[4])
"""


def faults_per_large_product(setup):
    code = f"import sys\nsys.path.insert(0, {str(REPOSITORY)!r})\n{setup}\n{_LARGE_PRODUCT_FAULTS}"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(run.stdout.split()[-1])
