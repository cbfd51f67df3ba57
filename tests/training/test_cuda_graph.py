"""recbole_mgformer/training/cuda_graph.py on a CPU: the option, what blocks a graph, and GraphedStep's static-buffer
path through its eager stand-in for capture and replay (``capture=False``). Its equality with the eager step and its
one sync an epoch: tests/training/test_trainer_device_loop.py."""

import contextlib
import copy
import logging
import math

import pytest
import torch

from recbole_mgformer.training.checkpoint_files import load_checkpoint, save_atomically
from recbole_mgformer.training.cuda_graph import (
    GraphedStep,
    cuda_graph_blocker,
    cuda_graph_option,
    drop_capturable_off_cuda,
    resolve_cuda_graph,
)

CUDA = torch.device("cuda")  # a device name only: the blockers are checked as a GPU run would check them


@pytest.mark.parametrize(
    "value, expected",
    [
        (None, "auto"),
        ("auto", "auto"),
        (" AUTO ", "auto"),
        (True, True),
        ("true", True),
        (False, False),
        ("False", False),
    ],
)
def test_the_option_reads_auto_true_and_false(value, expected):
    assert cuda_graph_option(value) == expected


@pytest.mark.parametrize("value", ["sometimes", "on", 1, 0, [True]])
def test_any_other_value_is_an_error_naming_the_option_and_its_choices(value):
    with pytest.raises(ValueError, match=r"cuda_graph is .*: choose auto .*, true or false"):
        cuda_graph_option(value)


def test_auto_is_off_on_a_cpu_and_says_why_once(caplog):
    with caplog.at_level(logging.INFO):
        assert resolve_cuda_graph("auto", "the device is cpu: a CUDA graph needs a GPU") is False
    assert [r.getMessage() for r in caplog.records] == [
        "cuda_graph: auto -> off, as the device is cpu: a CUDA graph needs a GPU"
    ]
    assert resolve_cuda_graph(False, None) is False and resolve_cuda_graph(True, None) is True
    with caplog.at_level(logging.INFO):
        assert resolve_cuda_graph("auto", None) is True
    assert "cuda_graph: auto -> on" in caplog.records[-1].getMessage()


def test_true_with_a_blocker_is_an_error_naming_it_and_the_fix():
    with pytest.raises(ValueError, match=r"cuda_graph: true, but why not\. Set cuda_graph: auto .* or false"):
        resolve_cuda_graph("true", "why not")


def test_the_trainer_refuses_true_on_a_cpu_and_turns_auto_off(tiny_setup):
    with pytest.raises(ValueError, match=r"cuda_graph: true, but the device is cpu: a CUDA graph needs a GPU"):
        tiny_setup("MGFormer", cuda_graph=True)
    with pytest.raises(ValueError, match=r"cuda_graph is 'sometimes'"):
        tiny_setup("DirectAU", cuda_graph="sometimes")
    _, _, trainer, _ = tiny_setup("MGFormer")  # properties/model/MGFormer.yaml: auto
    assert trainer.cuda_graph is False and trainer.config["cuda_graph"] == "auto"
    _, _, trainer, _ = tiny_setup("BPR", cuda_graph=False)  # a key of every model's trainer, with or without a YAML
    assert trainer.cuda_graph is False


@pytest.mark.parametrize(
    "model_name, overrides, blocker",
    [
        ("MGFormer", {}, None),
        ("MGFormer", {"attention": False}, None),
        ("MGFormer", {"feature_redraw_interval": 2}, None),  # the redraw happens in before_step, outside the graph
        ("DirectAU", {}, None),
        ("SimGCL", {"lambda": 0.0}, None),
        ("MGFormer", {"key_sample_size": 10}, "MGFormer: key_sample_size draws each step's keys on the host"),
        ("MGFormer", {"degree_mask": "adjacency"}, "MGFormer: degree_mask: adjacency gathers the edges"),
        ("SimGCL", {}, None),  # the contrastive loss masks repeated ids: static shapes
        ("XSimGCL", {}, None),
        ("SGL", {}, None),  # its views are redrawn in train(), into fixed buffers
        ("SGL", {"type": "RW"}, None),
        ("LightGCN", {}, "LightGCN does not declare its training step capturable (CUDA_GRAPH_SAFE)"),
    ],
)
def test_what_blocks_a_graph_on_a_gpu(tiny_setup, model_name, overrides, blocker):
    _, model, trainer, _ = tiny_setup(model_name, **overrides)
    reason = cuda_graph_blocker(model, CUDA, trainer.optimizer)
    assert reason == blocker if blocker is None else reason.startswith(blocker)
    if blocker is not None:  # cuda_graph: true there names it
        with pytest.raises(ValueError) as error:
            resolve_cuda_graph(True, reason)
        assert f"cuda_graph: true, but {reason}." in str(error.value)


def test_what_blocks_a_graph_beside_the_model(tiny_setup):
    _, model, trainer, _ = tiny_setup("DirectAU")
    assert cuda_graph_blocker(model, torch.device("cpu"), trainer.optimizer).startswith("the device is cpu")
    assert "own epoch" in cuda_graph_blocker(model, CUDA, trainer.optimizer, own_epoch=True)
    assert "data-parallel" in cuda_graph_blocker(model, CUDA, trainer.optimizer, distributed=True)
    assert "enable_amp" in cuda_graph_blocker(model, CUDA, trainer.optimizer, enable_amp=True)
    assert "error_if_nonfinite" in cuda_graph_blocker(
        model, CUDA, trainer.optimizer, clip_grad_norm={"max_norm": 1, "error_if_nonfinite": True}
    )
    assert cuda_graph_blocker(model, CUDA, trainer.optimizer, clip_grad_norm={"max_norm": 1}) is None
    assert "Adagrad" in cuda_graph_blocker(model, CUDA, torch.optim.Adagrad(model.parameters()))
    assert cuda_graph_blocker(model, CUDA, torch.optim.SGD(model.parameters(), lr=0.1)) is None


def graphed_epochs(trainer, train, epochs):
    trainer.cuda_graph, trainer.graph_capture = True, False  # GraphedStep's eager stand-in
    return [trainer._train_epoch(train, epoch) for epoch in range(epochs)]


def test_redraws_happen_on_schedule_through_the_hook_and_match_the_eager_run(tiny_setup):
    config, model, trainer, (train, _, _) = tiny_setup("MGFormer", train_batch_size=23, feature_redraw_interval=3)
    train = list(train)
    assert len(train[-1]) < len(train[0])
    weights, optimizer_state = copy.deepcopy(model.state_dict()), copy.deepcopy(trainer.optimizer.state_dict())
    layer = model.layers[0]
    redraw, redrawn_at = layer.redraw_features, []

    def spy(generator):
        redrawn_at.append(model.training_steps)
        return redraw(generator)

    layer.redraw_features = spy
    graphed_losses = graphed_epochs(trainer, train, 2)
    steps = 2 * len(train)
    assert model.training_steps == steps and redrawn_at == list(range(3, steps + 1, 3))
    assert int(model.feature_draws) == steps // 3 and model.step_hook is False  # off again after the epochs
    assert dict(trainer.graphed_step.counts) == {"warmup": 3, "capture": 1, "replay": steps - 5, "eager": 2}
    graphed = copy.deepcopy(model.state_dict())

    model.load_state_dict(weights)
    model.training_steps = 0
    trainer.optimizer.load_state_dict(optimizer_state)
    trainer.cuda_graph = False
    eager_losses = [trainer._train_epoch(train, epoch) for epoch in range(2)]
    assert graphed_losses == eager_losses
    for key, value in model.state_dict().items():
        torch.testing.assert_close(graphed[key], value, rtol=0, atol=0, msg=key)


def test_the_stand_in_replay_refuses_a_step_that_changes_host_state(tiny_setup):
    """What a replay would not repeat: MGFormer's redraw clock ticking inside calculate_loss (without the trainer's
    hook), and keys drawn on the host (key_sample_size, which cuda_graph_blocker names)."""
    _, model, trainer, (train, _, _) = tiny_setup("MGFormer", train_batch_size=23)
    batches = list(train)[:3]
    step = GraphedStep(model, trainer.optimizer, capture=False, warmup_steps=1)
    step.step(batches[0])  # the warm-up is an eager step
    with pytest.raises(
        RuntimeError,
        match=r"MGFormer's training step changed model\.training_steps on the host.*"
        r"before_step\(\)",
    ):
        step.step(batches[1])
    model.step_hook = True
    step.step(batches[2])  # with the hook's flag the step leaves the clock alone

    _, model, trainer, (train, _, _) = tiny_setup("MGFormer", train_batch_size=23, key_sample_size=10)
    model.step_hook = True
    step = GraphedStep(model, trainer.optimizer, capture=False, warmup_steps=0)
    with pytest.raises(RuntimeError, match=r"changed model\.key_generator on the host"):
        step.step(next(iter(train)))


def test_a_changed_learning_rate_captures_again(tiny_setup):
    _, model, trainer, (train, _, _) = tiny_setup("DirectAU", train_batch_size=23)
    batches = list(train)[:6]
    step = GraphedStep(model, trainer.optimizer, capture=False, warmup_steps=1)
    for batch in batches[:3]:
        step.step(batch)
    assert step.counts["capture"] == 1
    for group in trainer.optimizer.param_groups:
        group["lr"] *= 0.5
    for batch in batches[3:]:
        step.step(batch)
    assert dict(step.counts) == {"warmup": 1, "capture": 2, "replay": 5}


def test_a_graphed_gpu_run_s_checkpoint_resumes_on_a_cpu(tiny_setup):
    """A graphed run's Adam is capturable, and its checkpoint says so; torch refuses a capturable step on a CPU."""
    _, _, trainer, (train, valid, _) = tiny_setup("DirectAU", epochs=1)
    trainer.fit(train, valid, saved=True, show_progress=False)
    checkpoint = load_checkpoint(trainer.saved_model_file)
    for group in checkpoint["optimizer"]["param_groups"]:
        group["capturable"] = True
    save_atomically(checkpoint, trainer.saved_model_file)

    _, _, resumed, _ = tiny_setup("DirectAU", epochs=2)
    resumed.resume_checkpoint(trainer.saved_model_file)
    assert not any(group["capturable"] for group in resumed.optimizer.param_groups)
    assert math.isfinite(resumed._train_epoch(train, 1))

    parameter = torch.nn.Parameter(torch.ones(2))
    optimizer = torch.optim.Adam([parameter], capturable=True)
    drop_capturable_off_cuda(optimizer)
    assert optimizer.param_groups[0]["capturable"] is False


class FailingCapture:
    """torch.cuda's stream and graph calls on a CPU, the capture failing as an op that syncs under capture does."""

    class Stream:
        def wait_stream(self, other):
            pass

    class CUDAGraph:
        def register_generator_state(self, generator):
            pass

    def __init__(self, monkeypatch):
        for name, value in (
            ("Stream", self.Stream),
            ("current_stream", self.Stream),
            ("CUDAGraph", self.CUDAGraph),
            ("stream", lambda stream: contextlib.nullcontext()),
            ("graph", self.graph),
            ("synchronize", lambda: None),
        ):
            monkeypatch.setattr(torch.cuda, name, value)

    @staticmethod
    @contextlib.contextmanager
    def graph(cuda_graph):
        raise RuntimeError("CUDA error: operation not permitted when stream is capturing")
        yield


def test_a_failed_capture_trains_on_eagerly_under_auto_and_is_an_error_under_true(tiny_setup, monkeypatch):
    _, model, trainer, (train, _, _) = tiny_setup("DirectAU", train_batch_size=23)
    batches = list(train)[:6]
    weights, optimizer_state = copy.deepcopy(model.state_dict()), copy.deepcopy(trainer.optimizer.state_dict())
    eager_losses = []
    for batch in batches:
        trainer.optimizer.zero_grad()
        loss = model.calculate_loss(batch)
        loss.backward()
        trainer.optimizer.step()
        eager_losses.append(loss.detach())
    eager_weights = copy.deepcopy(model.state_dict())

    model.load_state_dict(weights)
    trainer.optimizer.load_state_dict(copy.deepcopy(optimizer_state))
    FailingCapture(monkeypatch)
    step = GraphedStep(model, trainer.optimizer, required=False)
    drop_capturable_off_cuda(trainer.optimizer)  # made capturable for a GPU; this CPU refuses it
    with pytest.warns(
        RuntimeWarning,
        match=r"capturing DirectAU's training step as a CUDA graph failed "
        r"\(RuntimeError: .*stream is capturing\); training eagerly",
    ):
        losses = [step.step(batch) for batch in batches]
    assert dict(step.counts) == {"warmup": 3, "capture": 1, "eager": 3} and step.failed
    for ours, eager in zip(losses, eager_losses):
        torch.testing.assert_close(ours, eager, rtol=0, atol=0)
    for key, value in model.state_dict().items():
        torch.testing.assert_close(value, eager_weights[key], rtol=0, atol=0)

    step = GraphedStep(model, trainer.optimizer, required=True, warmup_steps=0)
    drop_capturable_off_cuda(trainer.optimizer)
    with pytest.raises(
        RuntimeError,
        match=r"cuda_graph: true, but capturing DirectAU's training step as a CUDA "
        r"graph failed .*; set cuda_graph: false \(or auto\) to train eagerly",
    ):
        step.step(batches[0])
