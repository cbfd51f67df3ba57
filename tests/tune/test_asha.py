"""``recbole_mgformer.tune.asha``: a resumed search's ASHA rungs start with what the finished trials reported."""

from types import SimpleNamespace

from ray.tune.schedulers import TrialScheduler

from recbole_mgformer.tune.asha import ResumableASHA, rungs
from recbole_mgformer.tune.trials import PROGRESS


def scheduler(history=None, mode="max"):
    asha = ResumableASHA(time_attr=PROGRESS, max_t=16, grace_period=1, reduction_factor=4, history=history)
    asha.set_search_properties("best_valid_score", mode)  # as Ray does from the TuneConfig
    return asha  # rungs at 1, 4 and 16 evaluations


def trial(trial_id):
    return SimpleNamespace(trial_id=trial_id)


def test_the_finished_trials_results_fill_the_rungs_before_the_first_trial():
    asha = scheduler({0: [[1, 0.1], [2, 0.2], [3, 0.3], [4, 0.4], [5, 0.5]], 3: [[1, 0.3]]})
    assert rungs(asha) == {1: {}, 4: {}, 16: {}}  # the metric is known once Ray has set it up
    asha.on_trial_add(None, trial("new"))
    assert rungs(asha) == {1: {"recorded-0": 0.1, "recorded-3": 0.3}, 4: {"recorded-0": 0.4}, 16: {}}
    asha.on_trial_add(None, trial("newer"))  # replayed once
    assert len(rungs(asha)[1]) == 2


def test_a_trial_below_the_recorded_rung_is_stopped_as_in_the_search_before_the_stop():
    history = {0: [[1, 0.5], [2, 0.6], [3, 0.7], [4, 0.8]]}
    for replayed, expected in ((history, TrialScheduler.STOP), (None, TrialScheduler.CONTINUE)):
        asha = scheduler(replayed)
        weak = trial("weak")
        asha.on_trial_add(None, weak)
        for evaluations in (1, 2, 3):
            asha.on_trial_result(None, weak, {PROGRESS: evaluations, "best_valid_score": 0.9})
        # without the replay the weak trial would be first at the 4th evaluation's rung and go on
        assert asha.on_trial_result(None, weak, {PROGRESS: 4, "best_valid_score": 0.1}) == expected


def test_a_minimised_metric_is_replayed_with_its_sign():
    asha = scheduler({0: [[1, 2.0]]}, mode="min")
    asha.on_trial_add(None, trial("t"))
    assert rungs(asha)[1] == {"recorded-0": -2.0}
