"""Tiny generated sequences under the project's sequential protocol, and RecBole's model beside the project's."""

from pathlib import Path

import numpy as np
import pytest
import torch

from recbole_mgformer.quick_start import build_config, prepare

ROOT = Path(__file__).resolve().parents[3]
ML100K_SEQUENTIAL = str(ROOT / "properties" / "dataset" / "ml-100k-seq.yaml")  # the protocol, on any data
TINY = {"show_progress": False, "state": "WARNING", "epochs": 1, "MAX_ITEM_LIST_LENGTH": 8, "train_batch_size": 64}


def write_sequences(folder, n_users=30, n_items=40, seed=0, name="tinyseq"):
    """Users of 4 to 14 items, so prefixes of every length up to the window and beyond it (padding and truncation)."""
    rng = np.random.default_rng(seed)
    lines = ["user_id:token\titem_id:token\ttimestamp:float"]
    for user in range(n_users):
        items = rng.choice(n_items, size=int(rng.integers(4, 15)), replace=False)
        lines += [f"u{user}\ti{item}\t{1000 * user + t}" for t, item in enumerate(items)]
    (folder / name).mkdir(parents=True, exist_ok=True)
    (folder / name / f"{name}.inter").write_text("\n".join(lines) + "\n")
    return folder


@pytest.fixture(name="sequential_setup")
def sequential_setup_fixture(tmp_path):
    """``make(model, **overrides) -> (config, model, (train, valid, test))`` on the tiny sequences."""
    data = write_sequences(tmp_path / "data")

    def make(model, **overrides):
        config, _ = build_config(model, "tinyseq", [ML100K_SEQUENTIAL], {**TINY, "data_path": str(data), **overrides})
        built, _, splits = prepare(config)
        return config, built, splits

    return make


def recbole_twin(recbole_class, config, model, train):
    """RecBole's model with ``model``'s weights."""
    twin = recbole_class(config, train._dataset)
    twin.load_state_dict(model.state_dict())
    return twin


def assert_same_gradients(model, twin, rtol=1e-4, atol=1e-7):
    for name, parameter in model.named_parameters():
        reference = twin.get_parameter(name).grad
        assert (parameter.grad is None) == (reference is None), name
        if reference is not None:
            np.testing.assert_allclose(parameter.grad.numpy(), reference.numpy(), rtol=rtol, atol=atol, err_msg=name)


def assert_same_loss_and_gradients(model, twin, ours, theirs):
    """The two models' losses from one batch agree, and so do their gradients after backward."""
    torch.testing.assert_close(ours, theirs, rtol=1e-6, atol=1e-6)
    ours.backward()
    theirs.backward()
    assert_same_gradients(model, twin)


def assert_same_scores(model, twin, batch, test):
    """In evaluation mode the two models score a test batch's every item, and ``batch``'s pairs, alike."""
    model.eval(), twin.eval()
    evaluation = next(iter(test))[0]
    with torch.no_grad():
        torch.testing.assert_close(model.full_sort_predict(evaluation), twin.full_sort_predict(evaluation))
        torch.testing.assert_close(model.predict(batch), twin.predict(batch))
