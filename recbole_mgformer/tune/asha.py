"""ASHA that survives a resumed search.

A resumed search starts Ray afresh, with only its unfinished trials: ASHA would start with empty rungs and let
them past milestones the finished trials had set. Replaying what each finished trial reported (its record's
``results``) before the first trial is added rebuilds the rungs as they were, less what the trials that were
running had reported (they run again from their first epoch)."""

from types import SimpleNamespace

from ray.tune.schedulers import ASHAScheduler


class ResumableASHA(ASHAScheduler):
    """``ASHAScheduler`` whose rungs start with ``history``: ``{name: [[evaluations, score], ...]}`` of the
    trials that finished before this run."""

    def __init__(self, *args, history=None, **kwargs):
        super().__init__(*args, **kwargs)
        self._history = dict(history or {})

    def on_trial_add(self, trial_runner, trial):
        self._replay()
        super().on_trial_add(trial_runner, trial)

    def _replay(self):
        """Put the finished trials' results into the rungs (once, when the metric and mode are known)."""
        history, self._history = self._history, {}
        for name, results in history.items():
            recorded = SimpleNamespace(trial_id=f"recorded-{name}")
            for bracket in self._brackets:  # one: the search builds ASHA with a single bracket
                for evaluations, score in results:
                    bracket.on_result(recorded, evaluations, self._metric_op * score)


def rungs(scheduler):
    """``{milestone: {trial id: score}}`` of each of the scheduler's brackets, merged (for tests and logs)."""
    merged = {}
    for bracket in scheduler._brackets:
        for milestone, recorded in bracket._rungs:
            merged.setdefault(milestone, {}).update(recorded)
    return merged
