"""RecBole's trainers with checkpoints that load with ``torch.load(weights_only=True)``, and the CSA trainer.

RecBole's trainers pickle the whole ``Config`` into each checkpoint; torch >= 2.6 refuses to load
that by default, and allowing it would let a checkpoint run arbitrary code. Here a checkpoint holds
only state dicts and plain values, and every load goes through :func:`load_checkpoint`
(:mod:`recbole_mgformer.training.checkpoint_files`); the training epoch is
:mod:`recbole_mgformer.training.device_loop`'s.
"""

import os
import secrets

import recbole.trainer as recbole_trainers
from recbole.utils import get_local_time

from recbole_mgformer.training.checkpoint_files import (
    check_model_state,
    checkpoint_other_parameter,
    load_checkpoint,
    plain_value,
    save_atomically,
)
from recbole_mgformer.training.cuda_graph import drop_capturable_off_cuda
from recbole_mgformer.training.device_evaluation import DeviceEvaluationMixin
from recbole_mgformer.training.device_loop import DeviceLoopMixin
from recbole_mgformer.training.distributed import DistributedTrainerMixin
from recbole_mgformer.training.vocabulary import check_dataset, check_training_split, dataset_vocabulary


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
        "benchmark_untuned_heading",
        "dataset_source",
        "cuda_graph",
        "filter_residual_cache",
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
    vocabulary = None  # recbole_mgformer.training.vocabulary.dataset_vocabulary of the data ``fit`` trains on
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
        random_state = kwargs.pop("random_state", None)  # recbole_mgformer.training.random_state's tensors and values
        # A data-parallel run's ranks agreed on the name, and its machines may share the folder: no claim there.
        # RecBole's own Trainer runs this method too (recbole_mgformer.integration.compat), without this class's
        # attributes.
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
        trained_out = self.start_epoch >= self.epochs  # resumed with no epoch left to train
        if trained_out:
            self.logger.info(
                f"epochs: {self.start_epoch} trained before the resume, epochs={self.epochs}: nothing left to train; "
                "the best checkpoint is kept and tested"
            )
        # RecBole saves the model in memory (the last epoch's) over the best checkpoint when no epoch is left
        best_valid_score, best_valid_result = super().fit(
            train_data, valid_data, verbose, saved and not trained_out, show_progress, callback_fn
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


class TensorboardWhileFittingMixin:
    """RecBole's trainer opens its TensorBoard writer when it is built (an event file under the relative
    ``./log_tensorboard`` and a flushing thread) and never closes it: a trainer built only to score or to test left
    the thread running, and once the process had changed folder, or the folder was deleted (a test's), the thread's
    next write raised FileNotFoundError. Here the writer is open only while ``fit`` runs, in the folder it was
    first given, whichever folder the process is in by then."""

    def __init__(self, config, model):
        super().__init__(config, model)
        writer = getattr(self, "tensorboard", None)
        if writer is not None:
            writer.log_dir = os.path.abspath(writer.log_dir)  # torch reopens a closed writer at log_dir
            writer.close()

    def fit(self, *args, **kwargs):
        try:
            return super().fit(*args, **kwargs)
        finally:
            writer = getattr(self, "tensorboard", None)
            if writer is not None:
                writer.close()


class RunnerTrainerMixin(
    TensorboardWhileFittingMixin, DistributedTrainerMixin, SafeCheckpointMixin, DeviceLoopMixin, DeviceEvaluationMixin
):
    """What every trainer of the runner puts in front of RecBole's: its TensorBoard writer open only while fitting
    (:class:`TensorboardWhileFittingMixin`), data-parallel runs on any device (:class:`DistributedTrainerMixin`),
    weights-only checkpoints (:class:`SafeCheckpointMixin`), the epoch without a host sync per step
    (:class:`DeviceLoopMixin`) and evaluation on the device (:class:`DeviceEvaluationMixin`)."""


# One class per trainer RecBole's get_trainer chooses. ``recbole_epoch``: the class trains with RecBole's own
# ``Trainer._train_epoch``, which DeviceLoopMixin replaces; the others (KG, KGAT, MKR, RecVAE, NCL, CSA) keep their own.


class Trainer(RunnerTrainerMixin, recbole_trainers.Trainer):
    """RecBole's Trainer: MGFormer, LightGCN, SimGCL, DirectAU, BPR, SASRec and most models train with it."""

    recbole_epoch = True


class TraditionalTrainer(RunnerTrainerMixin, recbole_trainers.TraditionalTrainer):
    """RecBole's one-epoch trainer of the models fit once (Pop, ItemKNN, EASE, SLIMElastic)."""

    recbole_epoch = True


class PretrainTrainer(RunnerTrainerMixin, recbole_trainers.PretrainTrainer):
    recbole_epoch = True


class S3RecTrainer(RunnerTrainerMixin, recbole_trainers.S3RecTrainer):
    recbole_epoch = True


class RaCTTrainer(RunnerTrainerMixin, recbole_trainers.RaCTTrainer):
    recbole_epoch = True


class KGTrainer(RunnerTrainerMixin, recbole_trainers.KGTrainer):
    pass


class KGATTrainer(RunnerTrainerMixin, recbole_trainers.KGATTrainer):
    pass


class MKRTrainer(RunnerTrainerMixin, recbole_trainers.MKRTrainer):
    pass


class RecVAETrainer(RunnerTrainerMixin, recbole_trainers.RecVAETrainer):
    pass


class NCLTrainer(RunnerTrainerMixin, recbole_trainers.NCLTrainer):
    pass


class XGBoostTrainer(RunnerTrainerMixin, recbole_trainers.XGBoostTrainer):
    pass


class LightGBMTrainer(RunnerTrainerMixin, recbole_trainers.LightGBMTrainer):
    pass


class CSATrainer(RunnerTrainerMixin, recbole_trainers.Trainer):
    """RecBole's trainer with the CSA paper's step decay: the learning rate is multiplied by
    ``lr_decay_factor`` every ``lr_decay_step`` epochs (``lr_decay_step: 0`` keeps it constant). Its epoch is
    RecBole's own loop (``recbole_epoch`` False), as it always was.

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


# RecBole's trainer class -> this project's, for every trainer RecBole's ``get_trainer`` returns
TRAINERS = {
    recbole_trainers.Trainer: Trainer,
    recbole_trainers.TraditionalTrainer: TraditionalTrainer,
    recbole_trainers.PretrainTrainer: PretrainTrainer,
    recbole_trainers.S3RecTrainer: S3RecTrainer,
    recbole_trainers.RaCTTrainer: RaCTTrainer,
    recbole_trainers.KGTrainer: KGTrainer,
    recbole_trainers.KGATTrainer: KGATTrainer,
    recbole_trainers.MKRTrainer: MKRTrainer,
    recbole_trainers.RecVAETrainer: RecVAETrainer,
    recbole_trainers.NCLTrainer: NCLTrainer,
    recbole_trainers.XGBoostTrainer: XGBoostTrainer,
    recbole_trainers.LightGBMTrainer: LightGBMTrainer,
}
# This project's models with a trainer of their own, by model name (RecBole looks up ``<Model>Trainer``)
MODEL_TRAINERS = {"CSA": CSATrainer}


def project_trainer(recbole_class):
    """This project's version of ``recbole_class``, one of RecBole's trainers (or a project trainer already)."""
    if recbole_class in TRAINERS.values() or recbole_class in MODEL_TRAINERS.values():
        return recbole_class
    try:
        return TRAINERS[recbole_class]
    except KeyError:
        raise ValueError(
            f"RecBole chose the trainer {recbole_class.__name__}, which the runner has no version of; "
            f"add it to recbole_mgformer.training.trainer.TRAINERS"
        ) from None
