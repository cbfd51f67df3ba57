import copy
import os
import sys

import pytest
import torch
from recbole.trainer import Trainer
from recbole.utils import init_seed

from recbole_mgformer.trainer import DeviceLoopMixin

TRAINER_FILES = (os.path.join("recbole_mgformer", "trainer.py"), os.path.join("recbole", "trainer", "trainer.py"))


class SyncCounter:
    """Counts the calls a trainer makes that read a tensor's value on the host (a device sync on a GPU): .item(),
    .tolist(), .cpu(), .numpy() and bool() of a tensor, made from a trainer module's own code."""

    def __init__(self, monkeypatch):
        self.calls = []
        for name in ("item", "tolist", "cpu", "numpy", "__bool__"):
            original = getattr(torch.Tensor, name)
            monkeypatch.setattr(torch.Tensor, name, self.counting(name, original))

    def counting(self, name, original):
        def wrapper(tensor, *args, **kwargs):
            caller = sys._getframe(1).f_code.co_filename
            if caller.endswith(TRAINER_FILES):
                self.calls.append(name)
            return original(tensor, *args, **kwargs)
        return wrapper


def fresh_epoch(trainer, model, weights, optimizer_state, seed):
    model.load_state_dict(weights)
    model.training_steps = 0
    trainer.optimizer.load_state_dict(copy.deepcopy(optimizer_state))
    init_seed(seed, True)


@pytest.mark.parametrize("model_name", ["MGFormer", "DirectAU"])
def test_an_epoch_syncs_once_not_per_step_and_logs_recbole_s_loss(tiny_setup, monkeypatch, model_name):
    config, model, trainer, (train, _, _) = tiny_setup(model_name, train_batch_size=16)
    assert isinstance(trainer, DeviceLoopMixin) and len(train) >= 4
    train = list(train)  # the same batches in the same order for both loops
    weights, optimizer_state = copy.deepcopy(model.state_dict()), copy.deepcopy(trainer.optimizer.state_dict())

    fresh_epoch(trainer, model, weights, optimizer_state, config["seed"])
    counter = SyncCounter(monkeypatch)
    loss = trainer._train_epoch(train, 0)
    ours, weights_after = counter.calls, copy.deepcopy(model.state_dict())

    fresh_epoch(trainer, model, weights, optimizer_state, config["seed"])
    counter.calls = []
    recbole_loss = Trainer._train_epoch(trainer, train, 0)  # RecBole's own loop, the same epoch
    assert len(counter.calls) >= 2 * len(train)  # .item() and the NaN check each step: what the counter sees
    assert ours == ["item", "__bool__"]  # the epoch's sum, and its NaN check
    assert isinstance(loss, float) and loss == recbole_loss  # the logged loss: the same additions in float64
    for key, value in model.state_dict().items():
        torch.testing.assert_close(weights_after[key], value, rtol=0, atol=0)


def test_a_nan_loss_stops_the_epoch_at_its_end(tiny_setup):
    _, model, trainer, (train, _, _) = tiny_setup("MGFormer", train_batch_size=16)
    with torch.no_grad():
        model.user_embedding.weight.fill_(float("nan"))
    with pytest.raises(ValueError, match="Training loss is nan"):
        trainer._train_epoch(train, 0)


def test_tuple_losses_are_summed_part_by_part(tiny_setup):
    _, model, trainer, (train, _, _) = tiny_setup("MGFormer", train_batch_size=16)
    single = model.calculate_loss
    calls = []

    def two_parts(interaction):
        loss = single(interaction)
        calls.append(float(loss.detach()))
        return loss * 0.25, loss * 0.75

    total = trainer._train_epoch(train, 0, loss_func=two_parts)
    assert isinstance(total, tuple) and len(total) == 2
    assert total[0] == pytest.approx(0.25 * sum(calls), rel=1e-6)
    assert total[1] == pytest.approx(0.75 * sum(calls), rel=1e-6)
