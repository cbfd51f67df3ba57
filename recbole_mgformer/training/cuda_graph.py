"""One CUDA graph per training step (issue 52): the ``cuda_graph: auto | true | false`` setting and its step runner.

On a GPU a step of MGFormer launches hundreds of small kernels, and the host's launching, not the arithmetic, sets
its time. :class:`GraphedStep` captures the whole step (the model's loss, backward, gradient clipping and the
optimizer's step, Adam with ``capturable=True`` so its bias corrections stay on the device) once as a CUDA graph
and replays it for every batch of the captured shapes, after copying the batch into static buffers; any other
batch (an epoch's last, shorter one) runs eagerly, exactly as it is, without padding.

A replay runs no Python. What a step decides on the host belongs in the model's ``before_step()``, which the
trainer calls before every step, graphed or eager (MGFormer's feature-redraw clock: a due redraw writes into the
feature buffers in place, so the graph reads the new features); while the trainer does so, it sets the model's
``step_hook`` to True. A model declares its step capturable with the class attribute ``CUDA_GRAPH_SAFE = True``,
names in ``cuda_graph_blocker()`` what makes a configuration of it uncapturable (a reason, or None), and lists
in ``cuda_graph_generators()`` the generators its step draws from (registered with the graph, so each replay
draws anew). These hooks and their defaults are declared once, by
:class:`recbole_mgformer.model.abstract_recommender.ModelContract`.

``GraphedStep(capture=False)`` runs the same static-buffer path eagerly on any device: the tests' CPU stand-in for
capture and replay. It fails a replayed step that changes what a replay would not repeat: a module's plain Python
attribute (a step counter) or a CPU generator's state (keys drawn on the host).
"""

import collections
import logging
import warnings

import torch
from torch.nn.utils import clip_grad_norm_

from recbole_mgformer.model.abstract_recommender import model_contract

WORDS = {"auto": "auto", "true": True, "false": False}


def cuda_graph_option(value):
    """The ``cuda_graph`` setting as ``"auto"``, True or False; unset (None) is ``auto``."""
    if value is None:
        return "auto"
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in WORDS:
        return WORDS[value.strip().lower()]
    raise ValueError(
        f"cuda_graph is {value!r}: choose auto (one CUDA graph per step where the device and model "
        "allow it), true or false (e.g. --cuda_graph=false, or `cuda_graph: false` in a config file)"
    )


def optimizer_blocker(optimizer):
    """Why ``optimizer`` cannot step inside a CUDA graph, or None: an optimizer with a ``capturable`` option (Adam,
    AdamW, RMSprop) keeps its step count on the device with it; SGD has no host-side state; others read theirs on
    the host (Adagrad, SparseAdam)."""
    if "capturable" in optimizer.defaults or type(optimizer) is torch.optim.SGD:
        return None
    return (
        f"its optimizer {type(optimizer).__name__} keeps host-side state a graph would freeze "
        "(learner: adam, rmsprop or sgd step inside one)"
    )


def cuda_graph_blocker(
    model, device, optimizer, own_epoch=False, distributed=False, enable_amp=False, clip_grad_norm=None
):
    """Why this run's training step cannot be one CUDA graph, or None when it can."""
    name = type(model).__name__
    if torch.device(device).type != "cuda":
        return f"the device is {device}: a CUDA graph needs a GPU (device: cuda)"
    hooks = model_contract(model)
    if not hooks.CUDA_GRAPH_SAFE:
        return (
            f"{name} does not declare its training step capturable (CUDA_GRAPH_SAFE): it may decide on the host "
            "or change shapes within a step"
        )
    reason = hooks.cuda_graph_blocker()
    if reason:
        return f"{name}: {reason}"
    if own_epoch:
        return "its trainer runs its own epoch, not the loop whose step the graph replaces"
    if distributed:
        return "a data-parallel run averages gradients in DDP's hooks, outside the graph"
    if enable_amp:
        return "enable_amp: the gradient scaler checks for infinities on the host every step"
    if clip_grad_norm and clip_grad_norm.get("error_if_nonfinite"):
        return "clip_grad_norm's error_if_nonfinite reads the norm on the host every step"
    return optimizer_blocker(optimizer)


def resolve_cuda_graph(value, reason, logger=None):
    """``cuda_graph`` for a run whose step cannot be captured for ``reason`` (None: it can) -> True to capture.
    ``true`` with a reason is an error naming it; ``auto`` logs its choice."""
    choice = cuda_graph_option(value)
    if choice is True and reason:
        raise ValueError(
            f"cuda_graph: true, but {reason}. Set cuda_graph: auto (a graph wherever one applies) or "
            "false to train eagerly"
        )
    on = choice is True or (choice == "auto" and reason is None)
    if choice == "auto":
        (logger or logging.getLogger()).info(
            "cuda_graph: auto -> "
            + ("on: each full training batch replays one CUDA graph of the whole step" if on else f"off, as {reason}")
        )
    return on


def make_capturable(optimizer):
    """``capturable=True`` wherever the optimizer has the option, with its step counts moved to their parameters'
    device (where torch keeps them for a capturable optimizer): its step then reads no host value."""
    for group in optimizer.param_groups:
        if "capturable" not in group:
            continue
        group["capturable"] = True
        for param in group["params"]:
            step = optimizer.state.get(param, {}).get("step")
            if isinstance(step, torch.Tensor) and step.device != param.device:
                optimizer.state[param]["step"] = step.to(param.device)


def drop_capturable_off_cuda(optimizer):
    """``capturable=False`` for groups whose parameters are not on CUDA: a checkpoint of a graphed GPU run resumed
    on a CPU, where torch refuses a capturable step."""
    for group in optimizer.param_groups:
        if group.get("capturable") and any(param.device.type != "cuda" for param in group["params"]):
            group["capturable"] = False


def batch_fields(interaction):
    """{field: tensor} of a RecBole Interaction, or of a plain dict batch."""
    return interaction.interaction if hasattr(interaction, "interaction") else interaction


def detached(losses):
    return tuple(part.detach() for part in losses) if isinstance(losses, tuple) else losses.detach()


def python_state(model, exempt=()):
    """What a step may change on the host: each module's plain Python attributes (numbers, strings, None) and the
    state of each CPU generator it holds, but those in ``exempt`` (generators a graph registers on a GPU)."""
    state = {}
    for name, module in model.named_modules():
        for key, value in vars(module).items():
            if value is None or isinstance(value, (bool, int, float, str)):
                state[name, key] = value
            elif (
                isinstance(value, torch.Generator)
                and value.device.type == "cpu"
                and not any(value is generator for generator in exempt)
            ):
                state[name, key] = value.get_state()
    return state


def _same(a, b):
    return torch.equal(a, b) if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) else a == b


def _settings_key(value):
    # a tensor hyperparameter (an lr tensor) by identity: its value may change in place, which a graph follows
    return ("tensor", id(value)) if isinstance(value, torch.Tensor) else value


class GraphedStep:
    """A training step captured once as a CUDA graph and replayed for each batch of the captured shapes.

    ``step(interaction)`` trains on one batch and returns its detached loss (a tensor, or a tuple of them), valid
    until the next step: the trainer adds it to the epoch's sum at once. The first ``warmup_steps`` batches of the
    captured shapes train eagerly on a side stream (CUDA's rule before a capture: lazy initialisations, Adam's
    state); the next is captured and replayed, and so is every later one. A change of the optimizer's
    hyperparameters (a learning-rate schedule) captures again. With ``required`` False a capture that fails
    warns once and the run goes on eagerly; with it True (``cuda_graph: true``) the failure is an error.
    """

    def __init__(self, model, optimizer, clip_grad_norm=None, capture=True, warmup_steps=3, required=False):
        self.model, self.optimizer = model, optimizer
        self.clip_grad_norm = clip_grad_norm or None
        self.capture, self.warmup_steps, self.required = capture, warmup_steps, required
        self.generators = list(model_contract(model).cuda_graph_generators())
        self.parameters = [p for group in optimizer.param_groups for p in group["params"]]
        self.static = self.static_batch = None  # {field: tensor} of the captured shapes, and as the model reads it
        self.graph = self.outputs = self.settings = self.grads = self.stream = None
        self.warmed_up = 0
        self.failed = False  # a capture failed: every step runs eagerly
        self.counts = collections.Counter()  # what each step ran: warmup, capture, replay, eager
        if capture:
            make_capturable(optimizer)

    def step(self, interaction):
        fields = batch_fields(interaction)
        if self.static is None and not self.failed:
            self.static = {key: value.detach().clone() for key, value in fields.items()}
            self.static_batch = self.static if isinstance(interaction, dict) else type(interaction)(self.static)
        if self.failed or not self._fits(fields):
            self.counts["eager"] += 1
            return self._eager(interaction)
        for key, value in fields.items():
            self.static[key].copy_(value, non_blocking=True)
        if self.warmed_up < self.warmup_steps:
            self.warmed_up += 1
            self.counts["warmup"] += 1
            return self._on_side_stream(self._eager, self.static_batch)
        if self.graph is None or self._optimizer_settings() != self.settings:
            if not self._capture():
                self.counts["eager"] += 1
                return self._eager(self.static_batch)
        self.counts["replay"] += 1
        return self._replay()

    def _fits(self, fields):
        return fields.keys() == self.static.keys() and all(
            isinstance(value, torch.Tensor)
            and value.shape == static.shape
            and value.dtype == static.dtype
            and value.device == static.device
            for value, static in zip(fields.values(), self.static.values())
        )

    def _run(self, batch):
        """Loss, backward, clipping and the optimizer's step, as the trainer's eager step makes them."""
        losses = self.model.calculate_loss(batch)
        loss = sum(losses) if isinstance(losses, tuple) else losses
        loss.backward()
        if self.clip_grad_norm:
            clip_grad_norm_(self.model.parameters(), **self.clip_grad_norm)
        self.optimizer.step()
        return detached(losses)

    def _eager(self, batch):
        self.optimizer.zero_grad(set_to_none=True)
        return self._run(batch)

    def _on_side_stream(self, function, *args):
        if not self.capture:
            return function(*args)
        if self.stream is None:
            self.stream = torch.cuda.Stream()
        self.stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.stream):
            result = function(*args)
        torch.cuda.current_stream().wait_stream(self.stream)
        return result

    def _optimizer_settings(self):
        return [
            {key: _settings_key(value) for key, value in group.items() if key != "params"}
            for group in self.optimizer.param_groups
        ]

    def _capture(self):
        """Capture the step on the static batch (nothing runs: a replay follows). False when it failed."""
        self.counts["capture"] += 1
        self.graph = self.outputs = self.grads = None
        self.settings = self._optimizer_settings()
        if not self.capture:
            self.graph = "emulated"
            return True
        # None, so the captured backward writes fresh gradients (no accumulation into last step's) in the graph's pool
        self.optimizer.zero_grad(set_to_none=True)
        graph = torch.cuda.CUDAGraph()
        for generator in self.generators:
            graph.register_generator_state(generator)
        try:
            with torch.cuda.graph(graph):
                outputs = self._run(self.static_batch)
        except Exception as error:  # any op that syncs or allocates on the host under capture
            message = (
                f"capturing {type(self.model).__name__}'s training step as a CUDA graph failed "
                f"({type(error).__name__}: {error})"
            )
            if self.required:
                raise RuntimeError(
                    f"cuda_graph: true, but {message}; set cuda_graph: false (or auto) to train eagerly"
                ) from error
            warnings.warn(f"{message}; training eagerly from here on (cuda_graph: auto)", RuntimeWarning, stacklevel=3)
            torch.cuda.synchronize()
            self.failed, self.static = True, None
            return False
        self.graph, self.outputs = graph, outputs
        self.grads = [param.grad for param in self.parameters]  # the graph's gradients, kept alive with it
        return True

    def _replay(self):
        if not self.capture:
            before = python_state(self.model, self.generators)
            outputs = self._eager(self.static_batch)
            changed = sorted(
                f"{name or 'model'}.{key}"
                for (name, key), value in python_state(self.model, self.generators).items()
                if not _same(before.get((name, key), value), value)
            )
            if changed:
                raise RuntimeError(
                    f"{type(self.model).__name__}'s training step changed {', '.join(changed[:5])} on "
                    "the host, which a CUDA graph's replay would not repeat: move it to the model's "
                    "before_step(), or leave CUDA_GRAPH_SAFE unset"
                )
            return outputs
        self.graph.replay()
        for param, grad in zip(self.parameters, self.grads):  # an eager step in between set others
            if grad is not None and param.grad is not grad:
                param.grad = grad
        return self.outputs
