"""ASHA that survives a resumed search.

Ray Tune restores an interrupted experiment's trials but not its scheduler: ASHA would start with empty rungs,
let every resumed trial past the milestones it had reached, and compare later trials with fewer. Replaying what
each trial reported (its ``result.json``) when Ray adds it back rebuilds the rungs as they were."""

import json
from pathlib import Path

from ray.tune.schedulers import ASHAScheduler


class ResumableASHA(ASHAScheduler):
    """``ASHAScheduler`` whose rungs hold, after a resume, the results the trials reported before it."""

    def on_trial_add(self, trial_runner, trial):
        super().on_trial_add(trial_runner, trial)
        bracket = self._trial_info[trial.trial_id]
        for result in reported_results(trial_folder(trial)):
            if self._time_attr in result and self._metric in result:
                bracket.on_result(trial, result[self._time_attr], self._metric_op * result[self._metric])


def trial_folder(trial):
    """Where Ray keeps a trial's ``result.json`` (``Trial.path`` on Ray 2.6 and on today's), or None for a trial
    that has none yet (newer Ray raises until it names the folder)."""
    try:
        return trial.path
    except RuntimeError:
        return None


def reported_results(trial_dir):
    """The results a trial reported, in order, from ``<trial_dir>/result.json`` (none for a new trial, or for one
    kept in remote storage, which a resumed search does not replay)."""
    path = Path(trial_dir) / "result.json" if trial_dir else None
    if path is None or not path.is_file():
        return []
    results = []
    for line in path.read_text().splitlines():
        try:
            results.append(json.loads(line))
        except json.JSONDecodeError:  # the last line, cut short by a kill
            break
    return results
