"""Shared fixtures: a small generated RecBole dataset, and a scratch working directory so RecBole's
./log, ./log_tensorboard and ./saved never land in the checkout."""

import numpy as np
import pytest

from recbole_mgformer.quick_start import build_config, prepare


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


@pytest.fixture
def tiny_data(tmp_path):
    return write_interactions(tmp_path / "data")


@pytest.fixture
def tiny_setup(tiny_data):
    """``make(model, **overrides)`` -> (config, model, trainer, (train, valid, test)) on the tiny dataset."""

    def make(model="MGFormer", **overrides):
        config, _ = build_config(model, "tiny", config_dict={**TINY_CONFIG, "data_path": str(tiny_data), **overrides})
        model_instance, trainer, data = prepare(config)
        return config, model_instance, trainer, data

    return make
