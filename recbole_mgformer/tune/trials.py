"""One Ray Tune trial: train like ``run_recommender`` and report the validation metric after every evaluation.

A trial that did not finish when its search stopped runs again from its first epoch when the search resumes: its
random streams restart with it, so it trains as it would have."""

import logging
import os

from recbole.utils import init_seed

from recbole_mgformer.integration.compat import init_logger
from recbole_mgformer.quick_start import build_config, prepare

METRIC = "best_valid_score"  # the trial's best validation score so far, what RecBole's early stopping keeps
PROGRESS = "evaluations"  # ASHA's clock: evaluations so far
INDEX = "trial_index"  # a random or grid search's one Ray parameter: the trial's place in the search's draws


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


def trial_params(config, drawn=None):
    """A trial's searched values: its draw (``drawn[config[INDEX]]``, random and grid search), else the values Ray's
    searcher gave it (hyperopt)."""
    if drawn is not None:
        return dict(drawn[config[INDEX]])
    return {key: _item(value) for key, value in config.items()}


def train_trial(config, request, drawn=None):
    """One trial: ``build_config`` + ``prepare`` + ``fit`` as in ``run_recommender``, reporting to Ray Tune
    after every evaluation. RecBole's ./log and ./log_tensorboard land in the trial's folder."""
    from ray.air import session

    trial_dir = session.get_trial_dir()
    os.chdir(trial_dir)
    params = trial_params(config, drawn)
    config, _ = build_config(
        request["model"], request["dataset"], request["config_files"], _config_dict(request, params, trial_dir)
    )
    init_seed(config["seed"], config["reproducibility"])
    logging.getLogger().handlers.clear()  # an actor reused for another trial logs to that trial's folder
    init_logger(config)
    _, trainer, (train_data, valid_data, _) = prepare(config)

    def report(epoch_idx, valid_score):
        # the trial ends by itself after this evaluation: early stopping, or no evaluation left
        finished = trainer.cur_step > trainer.stopping_step or epoch_idx + trainer.eval_step >= trainer.epochs
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


def error_line(error):
    """The last non-empty line of a trial's error (its exception), without Ray's traceback around it."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[-1] if lines else type(error).__name__


def _item(value):
    return value.item() if hasattr(value, "item") else value  # numpy scalars from the samplers
