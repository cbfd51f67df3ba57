"""``recbole_mgformer.tune.asha``: a resumed search's ASHA rungs are rebuilt from what the trials reported."""

import json
from types import SimpleNamespace

from ray.tune.schedulers import TrialScheduler

from recbole_mgformer.tune.asha import ResumableASHA, reported_results
from recbole_mgformer.tune.trials import PROGRESS


def scheduler():
    return ResumableASHA(
        time_attr=PROGRESS, metric="best_valid_score", mode="max", max_t=16, grace_period=1, reduction_factor=4
    )  # rungs at 1, 4 and 16 evaluations


def trial(tmp_path, trial_id, scores):
    """A trial as Ray adds it back on resume, its folder holding the results it reported before."""
    folder = tmp_path / trial_id
    folder.mkdir()
    lines = [json.dumps({PROGRESS: i + 1, "best_valid_score": s}) for i, s in enumerate(scores)]
    (folder / "result.json").write_text("".join(line + "\n" for line in lines))
    return SimpleNamespace(trial_id=trial_id, path=str(folder))


def rungs(asha):
    (bracket,) = asha._brackets
    return {milestone: recorded for milestone, recorded in bracket._rungs}


def test_reported_results_replay_into_the_rungs(tmp_path):
    asha = scheduler()
    asha.on_trial_add(None, trial(tmp_path, "a", [0.1, 0.2, 0.3, 0.4, 0.5]))
    asha.on_trial_add(None, trial(tmp_path, "b", [0.3]))
    assert rungs(asha) == {1: {"a": 0.1, "b": 0.3}, 4: {"a": 0.4}, 16: {}}


def test_a_resumed_trial_below_the_rung_is_stopped_as_it_would_have_been(tmp_path):
    asha = scheduler()
    asha.on_trial_add(None, trial(tmp_path, "strong", [0.5, 0.6, 0.7, 0.8]))
    weak = trial(tmp_path, "weak", [0.1, 0.1, 0.1])
    asha.on_trial_add(None, weak)
    # without the replay the weak trial would be first at the 4th evaluation's rung and go on
    result = {PROGRESS: 4, "best_valid_score": 0.1}
    assert asha.on_trial_result(None, weak, result) == TrialScheduler.STOP


class UnnamedTrial:
    """A new trial on today's Ray, which raises until it names the trial's folder."""

    trial_id = "unnamed"

    @property
    def path(self):
        raise RuntimeError("Should not access `trial_driver_staging_path` without setting `trial_dir_name`")


def test_a_new_trial_has_nothing_to_replay(tmp_path):
    asha = scheduler()
    asha.on_trial_add(None, SimpleNamespace(trial_id="new", path=None))
    asha.on_trial_add(None, SimpleNamespace(trial_id="empty", path=str(tmp_path)))
    asha.on_trial_add(None, UnnamedTrial())
    assert rungs(asha) == {1: {}, 4: {}, 16: {}}


def test_a_result_line_cut_by_a_kill_ends_the_replay(tmp_path):
    (tmp_path / "result.json").write_text('{"training_iteration": 1, "best_valid_score": 0.2}\n{"training_it')
    assert reported_results(tmp_path) == [{"training_iteration": 1, "best_valid_score": 0.2}]
