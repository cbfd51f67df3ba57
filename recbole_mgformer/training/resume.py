"""Training that survives being killed: a last-epoch checkpoint after every epoch, with the epoch timings
and validation history so far, from which a rerun continues where the run stopped.

``fit_resumably`` wraps any trainer of :mod:`recbole_mgformer.training.trainer`; ``RunTimer`` keeps the history.
"""

import json
import math
import statistics
import time
from pathlib import Path

from recbole.utils import early_stopping

from recbole_mgformer.training.checkpoint_files import checkpoint_damage, load_checkpoint, save_atomically
from recbole_mgformer.training.random_state import capture_random_state, restore_random_state

LATEST_SUFFIX = ".latest.pth"  # beside <run>.pth, the best epoch
FINISHED_KEY = "finished"  # in <run>.pth once the run was tested: {"epochs": ..., "best_epoch": ...}


class FinishedRunError(ValueError):
    """A resume of a run that already ended: it would train again from the best epoch and replace the result."""


class RunTimer:
    """Times a trainer's epochs and keeps its validation scores, by wrapping the two methods ``fit`` calls.

    ``history`` continues the lists of an interrupted run; ``first_epoch`` alone (a resume without them)
    counts the epochs before it and takes the checkpoint's score as the best so far.
    """

    def __init__(self, trainer, history=None, first_epoch=0):
        history = history or {}
        self.resumed_from = first_epoch or None  # the epoch a resumed run started from
        self.first_epoch = 0 if history else first_epoch
        self.train_seconds = list(history.get("train_seconds", []))
        self.valid_seconds = list(history.get("valid_seconds", []))
        self.valid_scores = [tuple(pair) for pair in history.get("valid_scores", [])]
        if self.first_epoch:
            self.valid_scores.append((self.first_epoch - 1, trainer.best_valid_score))
        train_epoch, valid_epoch = trainer._train_epoch, trainer._valid_epoch

        def timed_train_epoch(*args, **kwargs):
            started = time.perf_counter()
            result = train_epoch(*args, **kwargs)
            self.train_seconds.append(time.perf_counter() - started)
            return result

        def timed_valid_epoch(*args, **kwargs):
            started = time.perf_counter()
            score, result = valid_epoch(*args, **kwargs)
            self.valid_seconds.append(time.perf_counter() - started)
            self.valid_scores.append((self.epochs() - 1, score))
            return score, result

        trainer._train_epoch, trainer._valid_epoch = timed_train_epoch, timed_valid_epoch

    def history(self):
        return {
            "train_seconds": self.train_seconds,
            "valid_seconds": self.valid_seconds,
            "valid_scores": self.valid_scores,
        }

    def epochs(self):
        """Epochs trained in all, counting those before a resume."""
        return self.first_epoch + len(self.train_seconds)

    def best_epoch(self, bigger=True):
        """The epoch whose model RecBole kept: its ``early_stopping`` replaces the best on a tie, so the
        last of equally scored epochs (RecBole rounds the scores to 4 places, so ties are common)."""
        best_score, best = -math.inf if bigger else math.inf, None
        for epoch, score in self.valid_scores:
            best_score, _, _, updated = early_stopping(score, best_score, 0, math.inf, bigger)
            if updated:
                best = epoch
        return best

    def summary(self, bigger=True):
        """The record's fields about the epochs: best and count, validation and timing histories, resume, mean
        timings."""
        return {
            "best_epoch": self.best_epoch(bigger),
            "epochs": self.epochs(),
            "valid_history": [list(pair) for pair in self.valid_scores],  # (epoch, score) of every evaluation
            "resumed_from_epoch": self.resumed_from,
            "train_seconds_per_epoch": round(statistics.mean(self.train_seconds), 3) if self.train_seconds else None,
            # (epoch, seconds) of every timed epoch: a mean hides the few slow epochs of a stall
            "train_history": [[self.first_epoch + i, round(s, 2)] for i, s in enumerate(self.train_seconds)],
            "valid_seconds_per_evaluation": (
                round(statistics.mean(self.valid_seconds), 3) if self.valid_seconds else None
            ),
        }


def _resume_files(checkpoint):
    """<run>.latest.pth, the last epoch with the timings so far; <run>.latest.json, where runs started before
    the timings moved into the checkpoint kept them (read on resume, never written)."""
    return checkpoint.with_suffix(LATEST_SUFFIX), checkpoint.with_suffix(".latest.json")


def _legacy_history(path, start_epoch):
    """Timings from an old <run>.latest.json, if they cover exactly the epochs before ``start_epoch``: the
    file was written after the checkpoint, so a run killed between the two writes left it an epoch short."""
    if not path.exists():
        return None
    history = json.loads(path.read_text())
    return history if len(history.get("train_seconds", [])) == start_epoch else None


def fit_resumably(
    trainer,
    train_data,
    valid_data,
    checkpoint,
    label,
    show_progress=False,
    callback_fn=None,
    on_resume=None,
    run_state_fn=None,
):
    """``trainer.fit`` that an interrupted run continues where it stopped; returns (best valid result, RunTimer).

    ``checkpoint`` holds the best epoch (what the test loads); after every epoch the last epoch goes beside
    it with the timings so far and the random streams' states, in one atomic write (``_resume_files``), and a rerun
    resumes from it, training on exactly as the uninterrupted run would, or from ``checkpoint`` alone when it is
    missing. ``forget_resume_state`` removes it once the run's record is written.

    ``run_state_fn(epoch, score)``, called after each evaluation, returns plain data to keep in the checkpoint
    (``trainer.resumed_run_state`` after a resume); ``callback_fn(epoch, score)`` runs next, once the checkpoint is
    written. ``on_resume(timer)`` runs after a resume, before training goes on; when it returns True the run had
    ended (its last evaluation stopped it) and nothing more is trained.
    """
    latest, legacy_history = _resume_files(checkpoint)
    history = None
    if latest.exists():
        trainer.resume_checkpoint(latest)
        history = (trainer.resumed_run_state or {}).get("history") or _legacy_history(
            legacy_history, trainer.start_epoch
        )
    elif checkpoint.exists():
        trainer.resume_checkpoint(checkpoint)
    # One process: the random streams continue as the uninterrupted run's would. Under DDP each rank has its own
    # streams and only the first writes, so ranks reseed instead (one rank's streams on all would repeat draws).
    single_process = trainer.config["single_spec"]
    if trainer.start_epoch:
        if single_process and trainer.resumed_random_state is not None:
            restore_random_state(trainer.resumed_random_state, trainer.model, train_data)
        print(f"resuming {label} at epoch {trainer.start_epoch}", flush=True)
    trainer.saved_model_file = str(checkpoint)
    timer = RunTimer(trainer, history, first_epoch=trainer.start_epoch)

    def save_latest(epoch, score):
        random_state = capture_random_state(trainer.model, train_data) if single_process else None
        trainer._save_checkpoint(
            epoch,
            verbose=False,
            saved_model_file=str(latest),
            run_state={"history": timer.history(), **(run_state_fn(epoch, score) if run_state_fn else {})},
            random_state=random_state,
        )
        if callback_fn is not None:
            callback_fn(epoch, score)

    if trainer.start_epoch and on_resume is not None and on_resume(timer):
        return trainer.best_valid_result, timer
    _, best_valid_result = trainer.fit(
        train_data, valid_data, saved=True, show_progress=show_progress, callback_fn=save_latest
    )
    return best_valid_result, timer


def forget_resume_state(checkpoint):
    for path in _resume_files(checkpoint):
        path.unlink(missing_ok=True)


def best_and_latest(resume_file):
    """``(<run>.pth, <run>.latest.pth)`` of a checkpoint named as either file."""
    path = Path(resume_file)
    if path.name.endswith(LATEST_SUFFIX):
        path = path.with_name(path.name[: -len(LATEST_SUFFIX)] + ".pth")
    return path, path.with_suffix(LATEST_SUFFIX)


def mark_finished(checkpoint, epochs, best_epoch):
    """Record in the best checkpoint that its run ended (trained ``epochs`` epochs and tested), in one atomic write,
    so that a resume of it is refused (:func:`check_resumable`) instead of training on from its best epoch."""
    state = load_checkpoint(checkpoint)
    state[FINISHED_KEY] = {"epochs": int(epochs), "best_epoch": None if best_epoch is None else int(best_epoch)}
    save_atomically(state, checkpoint)


def finished_run(best, latest):
    """``{"epochs", "best_epoch"}`` of the run that wrote ``best`` if it ended (``epochs`` None when not recorded),
    else None. A run marks its end (:func:`mark_finished`); a run that validates keeps its last epoch beside the best
    one until it ends, so a best checkpoint alone, written before the mark existed, ended too."""
    if not best.is_file() or (latest.is_file() and checkpoint_damage(best)):
        return None  # a killed run resumes from its last epoch, as before
    state = load_checkpoint(best)
    if FINISHED_KEY in state:
        return state[FINISHED_KEY]
    if latest.is_file():
        return None
    eval_step = (state.get("config") or {}).get("eval_step", 1)
    if isinstance(eval_step, int) and eval_step <= 0:  # never validates: no last-epoch file to miss
        return None
    return {"epochs": None, "best_epoch": state.get("epoch")}


def check_resumable(resume_file):
    """Refuse to resume a checkpoint that is missing, or whose run already ended (:func:`finished_run`): resuming it
    would train again from its best epoch with fresh random streams and replace the run's result."""
    if Path(resume_file).is_dir():
        newest = max(Path(resume_file).glob("*.pth"), key=lambda path: path.stat().st_mtime, default=None)
        raise FileNotFoundError(
            f"--resume_file {resume_file} is a folder; name the checkpoint file of the run to continue"
            + (f", e.g. its newest: {newest}" if newest else " (it holds no .pth file)")
        )
    best, latest = best_and_latest(resume_file)
    if not (best.is_file() or latest.is_file()):
        raise FileNotFoundError(f"no checkpoint at {resume_file}; check the file name and checkpoint_dir")
    finished = finished_run(best, latest)
    if finished is None:
        return
    if finished.get("epochs") is not None:
        ended = f"it finished at epoch {finished['epochs'] - 1} and was tested"
    else:
        ended = f"it has no {latest.name} beside it, which a run keeps until it ends"
    raise FinishedRunError(
        f"{best} is the checkpoint of a finished run ({ended}); it holds the run's best epoch "
        f"({finished.get('best_epoch')}) and is its result, kept as it is. Use it with "
        f"`python -m recbole_mgformer.recommend --checkpoint {best} --users <user tokens>`; to train longer, "
        "start a new run (e.g. with a larger --epochs) instead of --resume_file"
    )
