"""One Ray Tune trial: train like ``run_recommender`` and report the validation metric after every evaluation,
with the last epoch as the trial's Ray checkpoint, so that a resumed search continues a trial where it stopped."""

import logging
import os
from pathlib import Path

from recbole.utils import init_seed

from recbole_mgformer.compat import init_logger
from recbole_mgformer.quick_start import build_config, prepare

METRIC = "best_valid_score"  # the trial's best validation score so far, what RecBole's early stopping keeps
RESUME_FILE = "latest.pth"  # inside a trial's Ray checkpoint: its last evaluated epoch, as ``fit_resumably`` writes


def _ray_gpu_ids():
    """RecBole's ``gpu_id`` for the GPUs Ray gave this worker ('' for none: RecBole then trains on the CPU).

    RecBole sets CUDA_VISIBLE_DEVICES to ``gpu_id``; its default '0' would put every trial on the first GPU."""
    import ray

    return ",".join(str(i) for i in ray.get_gpu_ids())


def _config_dict(request, params, workdir):
    return {**request["overrides"], "data_path": request["data_path"], **params,
            "show_progress": False, "checkpoint_dir": str(workdir), "gpu_id": _ray_gpu_ids()}


def train_trial(params, request):
    """One trial: ``build_config`` + ``prepare`` + ``fit`` as in ``run_recommender``, reporting to Ray Tune
    after every evaluation. RecBole's ./log and ./log_tensorboard land in the trial's folder.

    Each report but a trial's last carries its last epoch (weights, optimizer, early-stopping state) as the
    trial's Ray checkpoint; a trial restored from one continues at the next epoch, so a search of trials longer
    than a session still finishes. The random state is not kept: a resumed trial follows another draw of batches."""
    from ray.air import session

    try:
        from ray.train import Checkpoint  # Ray >= 2.7
    except ImportError:
        from ray.air import Checkpoint  # Ray 2.6, RecBole 1.2.1's pin

    trial_dir = session.get_trial_dir()
    os.chdir(trial_dir)
    params = {key: _item(value) for key, value in params.items()}
    config, _ = build_config(request["model"], request["dataset"], request["config_files"],
                             _config_dict(request, params, trial_dir))
    init_seed(config["seed"], config["reproducibility"])
    logging.getLogger().handlers.clear()  # an actor reused for another trial logs to that trial's folder
    init_logger(config)
    _, trainer, (train_data, valid_data, _) = prepare(config)
    resume_trial(trainer, session.get_checkpoint())
    state_dir = Path(trial_dir) / "resume"

    def report(epoch_idx, valid_score):
        # the trial ends by itself after this evaluation: early stopping, or no evaluation left
        finished = trainer.cur_step > trainer.stopping_step or epoch_idx + trainer.eval_step >= trainer.epochs
        best = {f"best_{name}": float(value) for name, value in (trainer.best_valid_result or {}).items()}
        metrics = {METRIC: float(trainer.best_valid_score), "valid_score": float(valid_score),
                   "epoch": epoch_idx + 1, "finished": finished, **best}
        if finished:
            session.report(metrics)
            return
        state_dir.mkdir(exist_ok=True)
        trainer._save_checkpoint(epoch_idx, verbose=False, saved_model_file=str(state_dir / RESUME_FILE),
                                 run_state={"best_valid_result": dict(trainer.best_valid_result or {})})
        session.report(metrics, checkpoint=Checkpoint.from_directory(str(state_dir)))

    trainer.fit(train_data, valid_data, saved=False, show_progress=False, callback_fn=report)


def resume_trial(trainer, checkpoint):
    """Continue ``trainer`` from a trial's Ray ``checkpoint`` (None: start afresh) at the epoch after it."""
    if checkpoint is None:
        return
    with checkpoint.as_directory() as folder:
        trainer.resume_checkpoint(Path(folder) / RESUME_FILE)
    state = trainer.resumed_run_state or {}
    trainer.best_valid_result = state.get("best_valid_result") or None


def error_line(error):
    """The last non-empty line of a trial's error (its exception), without Ray's traceback around it."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[-1] if lines else type(error).__name__


def _item(value):
    return value.item() if hasattr(value, "item") else value  # numpy scalars from the samplers
