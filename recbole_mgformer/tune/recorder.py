"""The Ray Tune callback that writes each trial's record the moment it finishes (in the driver, where the
records folder is), and the rows of the trials that did not."""

import math
from pathlib import Path

from ray.tune import Callback

from recbole_mgformer.tune.records import records_folder, search_digest, write_trial_record
from recbole_mgformer.tune.trials import (
    INDEX,
    METRIC,
    PROGRESS,
    UNFINISHED,
    error_line,
    forget_unfinished,
    trial_params,
)


class TrialRecorder(Callback):
    """Writes ``<records>/trials/<index>.json`` for each trial that ends: completed, stopped by ASHA, or
    failed. A trial Ray stops because the search stops (Ctrl-C, a kill) gets none, and runs again on resume.

    ``plan``: the run's :class:`~recbole_mgformer.tune.draws.Plan`; a random or grid search's trial is its draw's
    index, a hyperopt trial the next free index when it ends."""

    def __init__(self, request, plan):
        self.request, self.plan = request, plan
        self.digest = search_digest(request)
        self.written = {}  # index -> record, this run's
        self.seen = {}  # trial id -> trial, every trial that started
        self.results = {}  # trial id -> [[evaluations, score], ...]
        self.failing = []  # failed trials whose error Ray has not written yet
        self.next_index = max(plan.records, default=-1) + 1

    def on_trial_start(self, iteration, trials, trial, **info):
        self.seen[trial.trial_id] = trial

    def on_trial_result(self, iteration, trials, trial, result, **info):
        self.seen[trial.trial_id] = trial
        if PROGRESS in result and _finite(result.get(METRIC)):
            self.results.setdefault(trial.trial_id, []).append([int(result[PROGRESS]), float(result[METRIC])])

    def on_trial_complete(self, iteration, trials, trial, **info):
        result = trial.last_result or {}
        if result.get("done"):  # it ended by itself or ASHA stopped it; not one the search's end stopped
            self._write(trial, trials, "completed" if result.get("finished") else "stopped early")

    def on_trial_error(self, iteration, trials, trial, **info):
        self.failing.append((trial, trials))  # Ray writes its error.txt right after this call

    def on_step_end(self, iteration, trials, **info):
        self._write_failed(wait=True)

    def on_experiment_end(self, trials, **info):
        self._write_failed(wait=False)
        try:  # the running trials' checkpoints are gone once each is recorded; a stopped search's stay
            (Path(self.request["experiment"]) / UNFINISHED).rmdir()
        except OSError:
            pass

    def _write_failed(self, wait):
        still = []
        for trial, trials in self.failing:
            text = _error_text(trial)
            if text is None and wait:
                still.append((trial, trials))
                continue
            self._write(trial, trials, "failed", text or f"failed; see Ray's error.txt in {_trial_folder(trial)}")
        self.failing = still

    def _write(self, trial, trials, status, error=None):
        result = trial.last_result or {}
        params = trial_params(trial.config, self.plan.drawn)
        if self.plan.drawn is not None:
            index = trial.config[INDEX]
            defaults = bool(self.request.get("defaults_first")) and index == 0
        else:
            index, self.next_index = self.next_index, self.next_index + 1
            defaults = self.plan.first_pending is not None and bool(trials) and trial is trials[0]
        score = result.get(METRIC)
        record = {
            "index": index,
            "trial": trial.trial_id,
            "search": self.digest,
            "status": status,
            "score": float(score) if _finite(score) else None,
            "epochs": int(result.get("epoch", 0)),
            "valid": {
                key[len("best_") :]: float(value)
                for key, value in result.items()
                if key.startswith("best_") and key != METRIC and _finite(value)
            },
            "params": params,
            "error": error,
            "results": self.results.get(trial.trial_id, []),
            "defaults": defaults,
        }
        if status != "failed" and record["score"] is None:
            record["status"], record["error"] = "failed", f"no finite {METRIC} reported"
        write_trial_record(records_folder(self.request), record)
        self.written[index] = record
        if self.plan.drawn is not None:
            forget_unfinished(self.request, index)  # recorded: it never runs again

    def unfinished_rows(self):
        """Rows of the trials that started in this run and have no record: the search stopped them."""
        recorded = {record["trial"] for record in self.written.values()}
        rows = []
        for trial_id, trial in self.seen.items():
            if trial_id in recorded:
                continue
            result = trial.last_result or {}
            score = result.get(METRIC)
            rows.append(
                {
                    "trial": trial_id,
                    "status": "unfinished",
                    "score": float(score) if _finite(score) else None,
                    "epochs": int(result.get("epoch", 0)),
                    "valid": {},
                    "params": trial_params(trial.config, self.plan.drawn),
                    "error": None,
                }
            )
        return rows


def _finite(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _trial_folder(trial):
    try:
        return trial.local_path
    except (AttributeError, RuntimeError):
        return "the search's ray-<n> folder"


def _error_text(trial):
    """The last line of the error Ray wrote for ``trial`` (its ``error.txt``, plain text), or None before it has."""
    try:
        path = trial.error_file
    except (AttributeError, RuntimeError):
        return None
    if not path or not Path(path).is_file():
        return None
    text = Path(path).read_text(errors="replace")
    return error_line(text) if text.strip() else None
