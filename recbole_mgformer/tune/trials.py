"""One Ray Tune trial: train like ``run_recommender`` and report the validation metric after every evaluation,
keeping the last epoch in the experiment's folder, so that a resumed search continues a trial where it stopped."""

import logging
import os
from pathlib import Path

from recbole.utils import init_seed

from recbole_mgformer.compat import init_logger
from recbole_mgformer.quick_start import build_config, prepare

METRIC = "best_valid_score"  # the trial's best validation score so far, what RecBole's early stopping keeps
PROGRESS = "evaluations"  # ASHA's clock: evaluations so far, counted across a resume (Ray's iteration restarts)
STATES_DIR = "trial-states"  # <experiment>/trial-states/<trial id>.pth: a trial's last evaluated epoch


def _ray_gpu_ids():
    """RecBole's ``gpu_id`` for the GPUs Ray gave this worker ('' for none: RecBole then trains on the CPU).

    RecBole sets CUDA_VISIBLE_DEVICES to ``gpu_id``; its default '0' would put every trial on the first GPU."""
    import ray

    return ",".join(str(i) for i in ray.get_gpu_ids())


def _config_dict(request, params, workdir):
    return {
        **request["overrides"],
        "data_path": request["data_path"],
        **params,
        "show_progress": False,
        "checkpoint_dir": str(workdir),
        "gpu_id": _ray_gpu_ids(),
    }


def train_trial(params, request):
    """One trial: ``build_config`` + ``prepare`` + ``fit`` as in ``run_recommender``, reporting to Ray Tune
    after every evaluation. RecBole's ./log and ./log_tensorboard land in the trial's folder.

    After each evaluation but a trial's last, its epoch (weights, optimizer, early-stopping state) goes to
    ``<experiment>/trial-states/<trial id>.pth``; Ray starts an unfinished trial again when a search resumes, and
    it continues from that file at the next epoch, so trials longer than a session still finish. The file is the
    project's, not a Ray checkpoint: Ray's experiment snapshot can lag its checkpoints and name one it has already
    deleted. The random state is not kept: a resumed trial follows another draw of batches."""
    from ray.air import session

    trial_dir = session.get_trial_dir()
    os.chdir(trial_dir)
    params = {key: _item(value) for key, value in params.items()}
    config, _ = build_config(
        request["model"], request["dataset"], request["config_files"], _config_dict(request, params, trial_dir)
    )
    init_seed(config["seed"], config["reproducibility"])
    logging.getLogger().handlers.clear()  # an actor reused for another trial logs to that trial's folder
    init_logger(config)
    _, trainer, (train_data, valid_data, _) = prepare(config)
    state_file = Path(request["experiment"]) / STATES_DIR / f"{session.get_trial_id()}.pth"
    resume_trial(trainer, state_file)

    def report(epoch_idx, valid_score):
        # the trial ends by itself after this evaluation: early stopping, or no evaluation left
        finished = trainer.cur_step > trainer.stopping_step or epoch_idx + trainer.eval_step >= trainer.epochs
        if finished:
            state_file.unlink(missing_ok=True)
        else:
            state_file.parent.mkdir(parents=True, exist_ok=True)
            trainer._save_checkpoint(
                epoch_idx,
                verbose=False,
                saved_model_file=str(state_file),
                run_state={"best_valid_result": dict(trainer.best_valid_result or {})},
            )
        best = {f"best_{name}": float(value) for name, value in (trainer.best_valid_result or {}).items()}
        session.report(
            {
                METRIC: float(trainer.best_valid_score),
                "valid_score": float(valid_score),
                "epoch": epoch_idx + 1,
                PROGRESS: (epoch_idx + 1) // trainer.eval_step,
                "finished": finished,
                **best,
            }
        )

    trainer.fit(train_data, valid_data, saved=False, show_progress=False, callback_fn=report)


def resume_trial(trainer, state_file):
    """Continue ``trainer`` from a trial's last evaluated epoch, if ``state_file`` holds one."""
    if not state_file.is_file():
        return
    trainer.resume_checkpoint(state_file)
    state = trainer.resumed_run_state or {}
    trainer.best_valid_result = state.get("best_valid_result") or None


def error_line(error):
    """The last non-empty line of a trial's error (its exception), without Ray's traceback around it."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[-1] if lines else type(error).__name__


class WholeValue:
    """A list in a first trial's point (``points_to_evaluate``) that Ray's random search passes on as one value:
    it walks into a list there item by item, as into a nested spec, and fails on the first index."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def __eq__(self, other):  # Ray checks the point against the space's categories with ``in``
        return self.value == (other.value if isinstance(other, WholeValue) else other)

    __hash__ = None

    def __repr__(self):
        return repr(self.value)


def _item(value):
    if isinstance(value, WholeValue):
        return value.value
    return value.item() if hasattr(value, "item") else value  # numpy scalars from the samplers
