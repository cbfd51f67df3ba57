import random

import numpy as np
import pytest
import torch

from recbole_mgformer.training.random_state import capture_random_state, model_generators, restore_random_state


class Noisy(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = torch.nn.Module()
        self.inner.noise = torch.Generator().manual_seed(3)


class Loader:
    def __init__(self):
        self.generator = torch.Generator().manual_seed(4)


def draws(model, loader):
    return (
        random.random(),
        float(np.random.random()),
        float(torch.rand(())),
        float(torch.rand((), generator=model.inner.noise)),
        float(torch.rand((), generator=loader.generator)),
    )


def test_restoring_a_saved_state_replays_every_stream_and_loads_with_weights_only(tmp_path):
    model, loader = Noisy(), Loader()
    assert set(model_generators(model)) == {"inner.noise"}
    torch.save({"random_state": capture_random_state(model, loader)}, tmp_path / "state.pth")
    first = draws(model, loader)
    assert draws(model, loader) != first
    saved = torch.load(tmp_path / "state.pth", weights_only=True)["random_state"]
    restore_random_state(saved, model, loader)
    assert draws(model, loader) == first


def test_a_state_naming_a_generator_the_model_lacks_is_refused():
    model, loader = Noisy(), Loader()
    state = capture_random_state(model, loader)
    del model.inner.noise
    with pytest.raises(ValueError, match=r"generators this Noisy does not have \(inner.noise\)"):
        restore_random_state(state, model, loader)
