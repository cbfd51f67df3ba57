"""Checkpoints that load with ``torch.load(weights_only=True)``.

RecBole's trainers pickle the whole ``Config`` into each checkpoint; torch >= 2.6 refuses to load
that by default, and allowing it would let a checkpoint run arbitrary code. Here a checkpoint holds
only state dicts and plain values, and every load goes through :func:`load_checkpoint`.
"""

import functools
import numbers
import os
import secrets
import socket
import zipfile

import numpy
import scipy.sparse
import torch
from recbole.trainer import Trainer
from recbole.utils import ModelType, get_local_time

from recbole_mgformer.cuda_graph import (
    GraphedStep,
    cuda_graph_blocker,
    cuda_graph_option,
    drop_capturable_off_cuda,
    resolve_cuda_graph,
)
from recbole_mgformer.device_evaluation import DeviceEvaluationMixin
from recbole_mgformer.distributed import DistributedTrainerMixin, is_distributed
from recbole_mgformer.vocabulary import check_dataset, check_training_split, dataset_vocabulary


def plain_value(value):
    """``value`` as None/bool/int/float/str and lists/dicts of them; anything else as its str.

    Numbers become builtins: numpy's float64 is a float subclass, but it pickles as a numpy global that
    ``weights_only=True`` refuses."""
    if value is None:
        return None
    if isinstance(value, str):
        return str(value)  # numpy's str_ too
    if isinstance(value, (bool, numpy.bool_)):
        return bool(value)
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    if isinstance(value, (list, tuple)):
        return [plain_value(v) for v in value]
    if isinstance(value, dict):
        return {str(k): plain_value(v) for k, v in value.items()}
    return str(value)


def load_checkpoint(path, device="cpu"):
    """Load a checkpoint of this project safely; a file that needs pickled objects is refused."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no checkpoint at {path}; check the file name and checkpoint_dir")
    damaged = checkpoint_damage(path)
    if damaged:
        raise ValueError(
            f"{path} is damaged: {damaged}. Delete it and resume from another checkpoint "
            "(the .latest.pth beside a best checkpoint, or the reverse) or retrain"
        )
    try:
        return torch.load(path, map_location=device, weights_only=True)
    except Exception as error:  # torch raises UnpicklingError or RuntimeError, depending on the content
        raise ValueError(
            f"{path} is not a checkpoint that loads with weights_only=True ({error}). "
            "Checkpoints written by recbole_mgformer hold only tensors and plain values; "
            "a checkpoint written by RecBole's own trainer pickles its Config and must be retrained."
        ) from error


def checkpoint_damage(path):
    """Why ``path`` cannot be a whole checkpoint (torch.save writes a zip archive), or None if it may be one.
    A 0-byte or truncated file comes from a copy or a disk that failed; this project writes atomically."""
    size = os.path.getsize(path)
    if size == 0:
        return "the file is empty (0 bytes)"
    if not zipfile.is_zipfile(path):
        return f"its {size} bytes are not a complete torch.save archive (truncated, or not a checkpoint)"
    try:
        with zipfile.ZipFile(path) as archive:
            broken = archive.testzip()
    except (zipfile.BadZipFile, OSError) as error:
        return f"its archive cannot be read ({error})"
    return f"its entry {broken} fails its checksum" if broken else None


def run_file_name(directory, model):
    """``<model>-<local time>-<process id>-<4 random digits>.pth``: RecBole's ``<model>-<local time>.pth`` gave two
    runs of one model started in the same second one file, and the second run's weights replaced the first's. The
    name still ends in a digit, as RecBole's did (``<model>-*[0-9].pth`` finds it and not its ``.latest.pth``)."""
    return os.path.join(directory, f"{model}-{get_local_time()}-{os.getpid()}-{secrets.randbelow(10**4):04d}.pth")


def claim_file(path):
    """Create ``path`` empty, atomically, so no other run takes the name; when it exists already (another run's
    file), a name beside it with a random suffix instead. Returns the claimed path."""
    stem, suffix = os.path.splitext(path)
    candidate = path
    while True:
        try:
            with open(candidate, "x"):
                return candidate
        except FileExistsError:
            candidate = f"{stem}-{secrets.randbelow(10**6):06d}{suffix}"


def check_model_state(model, checkpoint, source="the checkpoint"):
    """Refuse another model's weights: a recorded ``model_class`` other than ``model``'s, or ``state_dict`` names or
    shapes that differ. Keys alone do not tell models apart: BPR's weights have LightGCN's names and shapes."""
    recorded, name = checkpoint.get("model_class"), type(model).__name__
    if recorded is not None and recorded != name:
        raise ValueError(
            f"{source} holds the weights of a {recorded} model, not of {name} (the model its config or "
            f"this run names); load it as {recorded}, or use a checkpoint of {name}"
        )
    expected = {key: tuple(value.shape) for key, value in model.state_dict().items()}
    found = {key: tuple(value.shape) for key, value in checkpoint["state_dict"].items()}
    problems = []
    missing, unexpected = sorted(set(expected) - set(found)), sorted(set(found) - set(expected))
    if missing:
        problems.append(f"missing {', '.join(missing[:3])}{', ...' if len(missing) > 3 else ''}")
    if unexpected:
        problems.append(f"unexpected {', '.join(unexpected[:3])}{', ...' if len(unexpected) > 3 else ''}")
    reshaped = [
        f"{key} {found[key]} there, {expected[key]} here"
        for key in sorted(set(found) & set(expected))
        if found[key] != expected[key]
    ]
    if reshaped:
        problems.append(f"other shapes: {'; '.join(reshaped[:3])}{'; ...' if len(reshaped) > 3 else ''}")
    if problems:
        raise ValueError(
            f"{source} does not hold {name}'s parameters ({'; '.join(problems)}): it was written by "
            f"{recorded or 'another model'} or with other sizes or data; load it with the model and "
            "settings that trained it"
        )


def save_atomically(state, path):
    """``torch.save`` through a temporary file, so a reader never sees half a checkpoint: not after a crash,
    and not while the first process of each machine writes its copy into a checkpoint_dir they share."""
    temporary = f"{path}.{socket.gethostname()}-{os.getpid()}.tmp"
    try:
        torch.save(state, temporary)
        os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.remove(temporary)


def checkpoint_other_parameter(model):
    """What a checkpoint keeps of ``model.other_parameter()``: all but numpy arrays and scipy matrices.

    A traditional model (EASE, ItemKNN, SLIMElastic, ...) holds such matrices, which its constructor computes from
    the config and the training set alone; they do not load under ``weights_only=True`` (RecBole pickles them), and
    EASE's item-item matrix grows with the square of the item count (gigabytes on Gowalla). They are left out: the
    model built to receive the checkpoint (the trainer's own, or
    :func:`recbole_mgformer.checkpoints.load_data_and_model`'s) has computed them already. Any other model must keep
    its state as tensors and plain values, or its checkpoint would load without it: an error."""
    other = model.other_parameter()
    left_out = sorted(
        key for key, value in other.items() if isinstance(value, numpy.ndarray) or scipy.sparse.issparse(value)
    )
    if left_out and getattr(model, "type", None) != ModelType.TRADITIONAL:
        raise TypeError(
            f"{type(model).__name__}.other_parameter() holds {', '.join(left_out)}, numpy or scipy "
            "arrays: a checkpoint must load with weights_only=True, so keep them as tensors"
        )
    return {key: value for key, value in other.items() if key not in left_out}


# Settings that may differ between a run and its resumption: where and how it runs, not what it trains.
RUNTIME_KEYS = frozenset(
    {
        "device",
        "gpu_id",
        "use_gpu",
        "checkpoint_dir",
        "state",
        "show_progress",
        "epochs",
        "data_path",
        "log_wandb",
        "wandb_project",
        "worker",
        "nproc",
        "world_size",
        "offset",
        "ip",
        "port",
        "local_rank",
        "single_spec",
        "log_dir",
        "saved",
        "compile",
        "config_files",
        "extra_config_keys",
        "benchmark_table",
        "benchmark_page",
        "dataset_source",
        "cuda_graph",
    }
)


def changed_settings(recorded, current):
    """``{key: (recorded value, current value)}`` for the training settings that differ between a checkpoint's
    recorded config and this run's, runtime keys aside; a key missing on one side counts only if the other has it."""
    keys = (set(recorded) | set(current)) - RUNTIME_KEYS
    return {
        key: (recorded.get(key), current.get(key))
        for key in keys
        if key in recorded and key in current and recorded[key] != current[key]
    }


class SafeCheckpointMixin:
    """Overrides RecBole's checkpoint writing and loading; the rest of the trainer is unchanged."""

    resumed_run_state = None  # the ``run_state`` of the checkpoint training resumed from, if it had one
    resumed_random_state = None  # and its ``random_state``
    vocabulary = None  # recbole_mgformer.vocabulary.dataset_vocabulary of the data ``fit`` trains on
    resumed_checkpoint = None  # (path, vocabulary) of the checkpoint training resumed from, checked by ``fit``
    unclaimed_file = None  # the name __init__ chose, claimed by the first write to it

    def __init__(self, config, model):
        super().__init__(config, model)
        if getattr(self, "saved_model_file", None):  # trainers without epochs (decision trees) save no .pth
            directory = os.path.dirname(self.saved_model_file)
            self.saved_model_file = self.unclaimed_file = run_file_name(directory, config["model"])

    def _save_checkpoint(self, epoch, verbose=True, **kwargs):
        # The first process of each machine writes (RecBole's rule), so machines need not share a disk.
        if not self.config["single_spec"] and self.config["local_rank"] != 0:
            return
        saved_model_file = kwargs.pop("saved_model_file", self.saved_model_file)
        run_state = kwargs.pop("run_state", None)  # plain values a caller keeps with the weights, in one write
        random_state = kwargs.pop("random_state", None)  # recbole_mgformer.random_state's tensors and values
        # A data-parallel run's ranks agreed on the name, and its machines may share the folder: no claim there.
        # RecBole's own Trainer runs this method too (recbole_mgformer.compat), without this class's attributes.
        if (
            getattr(self, "unclaimed_file", None)
            and self.config["single_spec"]
            and os.path.normpath(saved_model_file) == os.path.normpath(self.unclaimed_file)
        ):
            saved_model_file = self.saved_model_file = claim_file(saved_model_file)
            self.unclaimed_file = None
        state = {
            "config": plain_value(self.config.final_config_dict),
            "model_class": type(self.model).__name__,
            "epoch": epoch,
            "cur_step": self.cur_step,
            "best_valid_score": float(self.best_valid_score),
            "state_dict": self.model.state_dict(),
            "other_parameter": checkpoint_other_parameter(self.model),
            "optimizer": self.optimizer.state_dict(),
        }
        if run_state is not None:
            state["run_state"] = plain_value(run_state)
        if random_state is not None:
            state["random_state"] = random_state
        if getattr(self, "vocabulary", None) is not None:
            state["vocabulary"] = self.vocabulary
        save_atomically(state, saved_model_file)
        if verbose:
            self.logger.info(f"Saving current: {saved_model_file}")

    def _load_model_state(self, checkpoint, source="the checkpoint"):
        check_model_state(self.model, checkpoint, source)
        self.model.load_state_dict(checkpoint["state_dict"])
        self.model.load_other_parameter(checkpoint.get("other_parameter"))

    def resume_checkpoint(self, resume_file):
        """Continue training from a checkpoint: model, optimizer, epoch and early-stopping state."""
        resume_file = str(resume_file)
        checkpoint = load_checkpoint(resume_file, self.device)
        if str(checkpoint["config"].get("model", "")).lower() != str(self.config["model"]).lower():
            raise ValueError(
                f"{resume_file} was written by model {checkpoint['config'].get('model')!r}, "
                f"not {self.config['model']!r}; resume with the same model"
            )
        changed = changed_settings(checkpoint["config"], plain_value(self.config.final_config_dict))
        if changed:
            shown = "; ".join(f"{key}: {old!r} there, {new!r} here" for key, (old, new) in sorted(changed.items())[:5])
            raise ValueError(
                f"{resume_file} was trained with other settings ({shown}); continuing it would mix two runs. "
                f"Delete it to start afresh, or resume with the settings it was written with"
            )
        self.saved_model_file = resume_file
        self.start_epoch = checkpoint["epoch"] + 1
        self.cur_step = checkpoint["cur_step"]
        self.best_valid_score = checkpoint["best_valid_score"]
        self._load_model_state(checkpoint, resume_file)
        self.optimizer.load_state_dict(checkpoint["optimizer"])
        drop_capturable_off_cuda(self.optimizer)  # a graphed GPU run's optimizer, resumed on a CPU
        self.resumed_run_state = checkpoint.get("run_state")
        self.resumed_random_state = checkpoint.get("random_state")
        self.resumed_checkpoint = (resume_file, checkpoint.get("vocabulary"))
        self.logger.info(f"Checkpoint loaded. Resume training from epoch {self.start_epoch}")

    def fit(self, train_data, valid_data=None, verbose=True, saved=True, show_progress=False, callback_fn=None):
        train_dataset = getattr(train_data, "_dataset", None)
        self.vocabulary = dataset_vocabulary(train_dataset)  # kept in every checkpoint
        resumed_file, resumed_vocabulary = self.resumed_checkpoint or (None, None)
        if resumed_vocabulary and self.vocabulary:  # continuing on other data would mix two numberings
            check_dataset({"vocabulary": resumed_vocabulary}, train_dataset, resumed_file)
            check_training_split({"vocabulary": resumed_vocabulary}, train_dataset, resumed_file)
        best_valid_score, best_valid_result = super().fit(
            train_data, valid_data, verbose, saved, show_progress, callback_fn
        )
        if best_valid_result is None and valid_data and saved:
            # Resumed and never improved on the checkpoint: its result is the best one, so measure it again.
            best_valid_result = self.evaluate(valid_data, load_best_model=True, show_progress=show_progress)
            self.best_valid_result = best_valid_result
        return best_valid_score, best_valid_result

    def evaluate(self, eval_data, load_best_model=True, model_file=None, show_progress=False):
        if eval_data and load_best_model:
            checkpoint_file = model_file or self.saved_model_file
            self._load_model_state(load_checkpoint(checkpoint_file, self.device), checkpoint_file)
            self.logger.info(f"Loading model structure and parameters from {checkpoint_file}")
        return super().evaluate(eval_data, load_best_model=False, show_progress=show_progress)


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

    With ``cuda_graph`` on (``auto``: on a GPU, for a model whose step is capturable; recbole_mgformer/cuda_graph.py)
    each full batch replays one CUDA graph of the whole step. A model's ``before_step()`` runs before every step,
    graphed or eager, and its ``step_hook`` is True while it does.

    Serves trainers whose epoch is RecBole's ``Trainer._train_epoch``, in single-process runs; any other trainer
    (its own epoch, DDP's gradient hooks) runs its own loop unchanged."""

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
        below = type(self).__mro__[type(self).__mro__.index(DeviceLoopMixin) + 1 :]
        own_epoch = next((vars(klass)["_train_epoch"] for klass in below if "_train_epoch" in vars(klass)), None)
        # RecBole's own loop only, as imported: a subclass's epoch or a patched one (tests, profilers) runs as it is
        return own_epoch is RECBOLE_TRAIN_EPOCH

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
        before_step = getattr(self.model, "before_step", None)
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


@functools.lru_cache(maxsize=None)
def safe_trainer_class(base):
    """``base`` (a RecBole trainer class) with :class:`DistributedTrainerMixin` (DDP on any device),
    :class:`SafeCheckpointMixin`, :class:`DeviceLoopMixin` and :class:`DeviceEvaluationMixin` in front."""
    return type(
        base.__name__,
        (DistributedTrainerMixin, SafeCheckpointMixin, DeviceLoopMixin, DeviceEvaluationMixin, base),
        {"__module__": __name__},
    )


class CSATrainer(Trainer):
    """RecBole's trainer with the CSA paper's step decay: the learning rate is multiplied by
    ``lr_decay_factor`` every ``lr_decay_step`` epochs (``lr_decay_step: 0`` keeps it constant).

    The rate is a function of the epoch alone, so a resumed run decays exactly as an uninterrupted one.
    """

    def __init__(self, config, model):
        super().__init__(config, model)
        self.lr_decay_step = int(config["lr_decay_step"] or 0)
        self.lr_decay_factor = float(config["lr_decay_factor"] if config["lr_decay_factor"] is not None else 1.0)
        if self.lr_decay_step < 0 or not 0 < self.lr_decay_factor <= 1:
            raise ValueError(
                f"CSA: lr_decay_step must be >= 0 and lr_decay_factor in (0, 1], got "
                f"{config['lr_decay_step']!r} and {config['lr_decay_factor']!r}"
            )

    def learning_rate_at(self, epoch):
        if not self.lr_decay_step:
            return self.learning_rate
        return self.learning_rate * self.lr_decay_factor ** (epoch // self.lr_decay_step)

    def _train_epoch(self, train_data, epoch_idx, loss_func=None, show_progress=False):
        for group in self.optimizer.param_groups:
            group["lr"] = self.learning_rate_at(epoch_idx)
        return super()._train_epoch(train_data, epoch_idx, loss_func, show_progress)
