"""RecBole's training epoch without a host sync per step, and with CUDA graphs where a model's step allows."""

import torch
from recbole.trainer import Trainer

from recbole_mgformer.model.abstract_recommender import model_contract
from recbole_mgformer.training.cuda_graph import (
    GraphedStep,
    cuda_graph_blocker,
    cuda_graph_option,
    resolve_cuda_graph,
)
from recbole_mgformer.training.distributed import is_distributed


def to_device(interaction, device):
    """``interaction`` (a RecBole Interaction) on ``device``: on CUDA each tensor is copied from pinned memory
    without blocking the host (the copy is ordered before the step's kernels on the stream), elsewhere as RecBole
    moves it."""
    if device.type != "cuda":
        return interaction.to(device)
    for key, value in interaction.interaction.items():
        if isinstance(value, torch.Tensor) and value.device.type == "cpu":
            interaction.interaction[key] = value.pin_memory().to(device, non_blocking=True)
    return interaction


RECBOLE_TRAIN_EPOCH = Trainer._train_epoch


def add_losses(total, losses, dtype):
    """The epoch's running sum of losses (a tensor, or a tuple part by part) on the device, in ``dtype``."""
    if isinstance(losses, tuple):
        parts = tuple(part.detach().to(dtype) for part in losses)
        return parts if total is None else tuple(map(torch.add, total, parts))
    part = losses.detach().to(dtype)
    return part if total is None else total + part


class DeviceLoopMixin:
    """RecBole's training epoch without a host sync per step: the epoch's loss is summed on the device (in float64,
    so the logged loss is the very sum RecBole's ``losses.item()`` additions make), checked for NaN once at the
    epoch's end, and CUDA batches are copied from pinned memory without blocking. RecBole's loop synchronises three
    times a step (the blocking copy, ``.item()``, the NaN check), which on a GPU leaves it idle between steps.

    With ``cuda_graph`` on (``auto``: on a GPU, for a model whose step is capturable;
    recbole_mgformer/training/cuda_graph.py)
    each full batch replays one CUDA graph of the whole step. A model's ``before_step()`` runs before every step,
    graphed or eager, and its ``step_hook`` is True while it does.

    Serves trainers whose epoch is RecBole's ``Trainer._train_epoch`` (they say so with ``recbole_epoch``), in
    single-process runs; any other trainer (its own epoch, DDP's gradient hooks) runs its own loop unchanged."""

    recbole_epoch = False  # True: the trainer's epoch is RecBole's ``Trainer._train_epoch``, which this loop replaces
    cuda_graph = False  # resolved from the ``cuda_graph`` setting by __init__
    graph_capture = True  # False: GraphedStep's eager stand-in for capture and replay (tests on a CPU)
    graphed_step = None  # the GraphedStep, made at the first graphed epoch (after a resume loaded the optimizer)

    def __init__(self, config, model):
        super().__init__(config, model)
        option = cuda_graph_option(config["cuda_graph"])
        if getattr(self, "optimizer", None) is None:  # a trainer without steps (decision trees)
            reason = "its trainer takes no gradient steps"
        else:
            reason = cuda_graph_blocker(
                self.model,
                self.device,
                self.optimizer,
                own_epoch=not self._runs_recbole_epoch(),
                distributed=is_distributed(config),
                enable_amp=self.enable_amp,
                clip_grad_norm=self.clip_grad_norm,
            )
        self.cuda_graph = resolve_cuda_graph(option, reason, getattr(self, "logger", None))
        self.cuda_graph_required = option is True

    def _runs_recbole_epoch(self):
        # RecBole's own loop only, as imported: a patched one (tests, profilers) runs as it is
        return self.recbole_epoch and Trainer._train_epoch is RECBOLE_TRAIN_EPOCH

    def _train_epoch(self, train_data, epoch_idx, loss_func=None, show_progress=False):
        if not self._runs_recbole_epoch() or not self.config["single_spec"]:
            return super()._train_epoch(train_data, epoch_idx, loss_func, show_progress)
        return self._device_train_epoch(train_data, epoch_idx, loss_func, show_progress)

    def _graph_runner(self):
        """The GraphedStep of this trainer's model and optimizer, or None when ``cuda_graph`` is off."""
        if not getattr(self, "cuda_graph", False):
            return None
        runner = self.graphed_step
        if runner is None or runner.model is not self.model or runner.optimizer is not self.optimizer:
            runner = self.graphed_step = GraphedStep(
                self.model,
                self.optimizer,
                self.clip_grad_norm,
                capture=self.graph_capture,
                required=getattr(self, "cuda_graph_required", False),
            )
        return runner

    def _device_train_epoch(self, train_data, epoch_idx, loss_func=None, show_progress=False):
        from recbole.utils import get_gpu_usage, set_color
        from tqdm import tqdm

        self.model.train()
        runner = self._graph_runner() if loss_func is None else None  # another loss function runs eagerly
        loss_func = loss_func or self.model.calculate_loss
        before_step = model_contract(self.model).before_step
        total_loss = None  # a float64 tensor on the device, or a tuple of them
        accumulate = torch.float32 if self.device.type == "mps" else torch.float64  # MPS has no float64
        iter_data = (
            tqdm(train_data, total=len(train_data), ncols=100, desc=set_color(f"Train {epoch_idx:>5}", "pink"))
            if show_progress
            else train_data
        )
        scaler = torch.amp.GradScaler("cuda", enabled=self.enable_scaler)  # as RecBole: enabled only with CUDA
        if before_step is not None:
            self.model.step_hook = True
        try:
            for interaction in iter_data:
                interaction = to_device(interaction, self.device)
                if before_step is not None:
                    before_step()  # the step's host-side decisions, outside any graph
                if runner is not None:
                    losses = runner.step(interaction)
                else:
                    losses = self._eager_step(interaction, loss_func, scaler)
                total_loss = add_losses(total_loss, losses, accumulate)
                if self.gpu_available and show_progress:
                    iter_data.set_postfix_str(set_color("GPU RAM: " + get_gpu_usage(self.device), "yellow"))
        finally:
            if before_step is not None:
                self.model.step_hook = False
        if total_loss is None:
            return None
        # the epoch's one sync: a NaN in any step's loss makes the sum NaN
        if isinstance(total_loss, tuple):
            total_loss = tuple(part.item() for part in total_loss)
            self._check_nan(torch.tensor(sum(total_loss)))
            return total_loss
        total_loss = total_loss.item()
        self._check_nan(torch.tensor(total_loss))
        return total_loss

    def _eager_step(self, interaction, loss_func, scaler):
        """RecBole's step: zeroed gradients, the loss (under autocast with ``enable_amp``), its scaled backward,
        clipping and the optimizer's step through the scaler. Returns the loss (or tuple of losses)."""
        from torch.nn.utils import clip_grad_norm_

        self.optimizer.zero_grad()
        with torch.autocast(device_type=self.device.type, enabled=self.enable_amp):
            losses = loss_func(interaction)
        loss = sum(losses) if isinstance(losses, tuple) else losses
        scaler.scale(loss).backward()
        if self.clip_grad_norm:
            clip_grad_norm_(self.model.parameters(), **self.clip_grad_norm)
        scaler.step(self.optimizer)
        scaler.update()
        return losses
