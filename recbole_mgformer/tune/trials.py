"""One Ray Tune trial: train like ``run_recommender`` and report the validation metric after every evaluation.

A random or grid search's trial keeps a checkpoint after every epoch under ``<experiment>/unfinished/``
(:func:`unfinished_checkpoint`, :func:`recbole_mgformer.training.resume.fit_resumably`): when the search resumes on
the same storage, a trial that was running goes on from its last epoch, with its random streams where they were, and
first reports its earlier evaluations again, so ASHA and its record see the whole trial. Without that folder (a new
machine) or in a hyperopt search (whose trials are known by their values only once they end), it runs again from
its first epoch: its random streams restart with it, so it trains as it would have."""

import hashlib
import json
import logging
import os
from pathlib import Path

from recbole.utils import init_seed

from recbole_mgformer.integration.compat import init_logger
from recbole_mgformer.quick_start import build_config, prepare
from recbole_mgformer.training.resume import fit_resumably, forget_resume_state

METRIC = "best_valid_score"  # the trial's best validation score so far, what RecBole's early stopping keeps
PROGRESS = "evaluations"  # ASHA's clock: evaluations so far
INDEX = "trial_index"  # a random or grid search's one Ray parameter: the trial's place in the search's draws
UNFINISHED = "unfinished"  # <experiment>/unfinished/: the checkpoints of the trials running


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


def unfinished_checkpoint(request, index, params):
    """Where a random or grid search's trial ``index`` of values ``params`` keeps its checkpoint while it runs:
    ``<experiment>/unfinished/trial-<index>-<digest of params>.pth``, its last epoch in the ``.latest.pth`` beside.
    The values are in the name, so another search's trial of that index never resumes from it."""
    digest = hashlib.sha256(json.dumps(params, sort_keys=True, default=str).encode()).hexdigest()[:12]
    return Path(request["experiment"]) / UNFINISHED / f"trial-{index:04d}-{digest}.pth"


def forget_unfinished(request, index):
    """Remove trial ``index``'s checkpoints once its record is written (it ended, or ASHA stopped it)."""
    for path in (Path(request["experiment"]) / UNFINISHED).glob(f"trial-{index:04d}-*.pth"):
        path.unlink(missing_ok=True)


def train_trial(config, request, drawn=None):
    """One trial: ``build_config`` + ``prepare`` + ``fit`` as in ``run_recommender``, reporting to Ray Tune
    after every evaluation; a random or grid search's trial resumes from its checkpoint (module docstring).
    RecBole's ./log and ./log_tensorboard land in the trial's folder."""
    from ray.air import session

    trial_dir = session.get_trial_dir()
    os.chdir(trial_dir)
    index = config[INDEX] if drawn is not None else None
    params = trial_params(config, drawn)
    config, _ = build_config(
        request["model"], request["dataset"], request["config_files"], _config_dict(request, params, trial_dir)
    )
    init_seed(config["seed"], config["reproducibility"])
    logging.getLogger().handlers.clear()  # an actor reused for another trial logs to that trial's folder
    init_logger(config)
    _, trainer, (train_data, valid_data, _) = prepare(config)
    _fit_trial(trainer, train_data, valid_data, request, index, params)  # the trainer closes its TensorBoard writer


def _fit_trial(trainer, train_data, valid_data, request, index, params):
    """:func:`train_trial`'s training, its reports and, for a search that draws its own trials, its checkpoint."""
    from ray.air import session

    def ends_at(epoch_idx):
        # the trial ends by itself after this evaluation: early stopping, or no evaluation left
        return trainer.cur_step > trainer.stopping_step or epoch_idx + trainer.eval_step >= trainer.epochs

    reports = []  # every result reported so far, kept in the checkpoint so that a resumed trial replays them

    def add_report(epoch_idx, valid_score):
        best = {f"best_{name}": float(value) for name, value in (trainer.best_valid_result or {}).items()}
        reports.append(
            {
                METRIC: float(trainer.best_valid_score),
                "valid_score": float(valid_score),
                "epoch": epoch_idx + 1,
                PROGRESS: (epoch_idx + 1) // trainer.eval_step,
                "finished": ends_at(epoch_idx),
                **best,
            }
        )
        return {"reports": reports, "best_valid_result": dict(trainer.best_valid_result or {})}

    def report(epoch_idx, valid_score):
        if index is None:
            add_report(epoch_idx, valid_score)
        session.report(reports[-1])

    if index is None:
        trainer.fit(train_data, valid_data, saved=False, show_progress=False, callback_fn=report)
        return

    def replay(_timer):
        """Report the results reported before the stop again, as they were; True when the last of them ended the
        trial."""
        state = trainer.resumed_run_state or {}
        trainer.best_valid_result = state.get("best_valid_result") or None
        reports.extend(state.get("reports") or [])
        for result in reports:
            session.report(result)
        return bool(reports) and reports[-1]["finished"]

    checkpoint = unfinished_checkpoint(request, index, params)
    checkpoint.parent.mkdir(parents=True, exist_ok=True)
    fit_resumably(
        trainer,
        train_data,
        valid_data,
        checkpoint,
        f"trial {index}",
        callback_fn=report,
        on_resume=replay,
        run_state_fn=add_report,
    )
    forget_resume_state(checkpoint)
    checkpoint.unlink(missing_ok=True)


def error_line(error):
    """The last non-empty line of a trial's error (its exception), without Ray's traceback around it."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[-1] if lines else type(error).__name__


def _item(value):
    return value.item() if hasattr(value, "item") else value  # numpy scalars from the samplers
