import copy
import os
import sys

import pytest
import torch
from recbole.trainer import Trainer
from recbole.utils import init_seed

from recbole_mgformer.model.abstract_recommender import model_contract
from recbole_mgformer.training.device_loop import DeviceLoopMixin

TRAINER_FILES = (
    os.path.join("recbole_mgformer", "training", "trainer.py"),
    os.path.join("recbole_mgformer", "training", "device_loop.py"),
    os.path.join("recbole_mgformer", "training", "cuda_graph.py"),
    os.path.join("recbole", "trainer", "trainer.py"),
)


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


class CudaCopies:
    """The trainer's CUDA path on a CPU: ``device`` claims CUDA, and each batch's ``pin_memory()`` and
    ``.to(cuda, non_blocking=...)`` are recorded and leave the tensor where it is (on the CPU, beside the model)."""

    def __init__(self, monkeypatch):
        self.pinned, self.non_blocking = 0, []
        to = torch.Tensor.to

        def pin_memory(tensor):
            self.pinned += 1
            return tensor

        def fake_to(tensor, *args, **kwargs):
            if args and isinstance(args[0], torch.device) and args[0].type == "cuda":
                self.non_blocking.append(kwargs.get("non_blocking", False))
                return tensor
            return to(tensor, *args, **kwargs)

        monkeypatch.setattr(torch.Tensor, "pin_memory", pin_memory)
        monkeypatch.setattr(torch.Tensor, "to", fake_to)


def fresh_epoch(trainer, model, weights, optimizer_state, seed):
    model.load_state_dict(weights)
    model.training_steps = 0
    trainer.optimizer.load_state_dict(copy.deepcopy(optimizer_state))
    init_seed(seed, True)
    for generator in model_contract(model).cuda_graph_generators():  # SimGCL's noise
        generator.manual_seed(seed)


@pytest.mark.parametrize("path", ["eager", "graphed", "cuda", "cuda, graphed"])
@pytest.mark.parametrize("model_name", ["MGFormer", "DirectAU", "SimGCL", "XSimGCL", "SGL"])
def test_an_epoch_syncs_once_not_per_step_and_logs_recbole_s_loss(tiny_setup, monkeypatch, model_name, path):
    """Eager, through GraphedStep's static buffers (recbole_mgformer/training/cuda_graph.py, its CPU stand-in for
    capture and replay), and on the CUDA path (batches copied from pinned memory without blocking): one sync an epoch,
    and RecBole's loss and weights."""
    config, model, trainer, (train, _, _) = tiny_setup(model_name, train_batch_size=23)
    assert isinstance(trainer, DeviceLoopMixin) and len(train) >= 8
    train = list(train)  # the same batches in the same order for both loops
    assert len(train[-1]) < len(train[0])  # the epoch's last, shorter batch runs eagerly beside the replays
    weights, optimizer_state = copy.deepcopy(model.state_dict()), copy.deepcopy(trainer.optimizer.state_dict())

    fresh_epoch(trainer, model, weights, optimizer_state, config["seed"])
    trainer.cuda_graph, trainer.graph_capture = "graphed" in path, False
    copies = CudaCopies(monkeypatch) if path.startswith("cuda") else None
    if copies:
        trainer.device = torch.device("cuda")
    counter = SyncCounter(monkeypatch)
    loss = trainer._train_epoch(train, 0)
    ours, weights_after = counter.calls, copy.deepcopy(model.state_dict())
    if copies:
        fields = len(train[0].interaction)
        assert copies.pinned == copies.non_blocking.count(True) == fields * len(train) == len(copies.non_blocking)
        monkeypatch.undo()
        trainer.device = torch.device("cpu")
    if "graphed" in path:
        assert dict(trainer.graphed_step.counts) == {"warmup": 3, "capture": 1, "replay": len(train) - 4, "eager": 1}

    fresh_epoch(trainer, model, weights, optimizer_state, config["seed"])
    counter = SyncCounter(monkeypatch)
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
