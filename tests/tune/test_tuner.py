"""``recbole_mgformer.tune.tuner``: hyperopt resumed from the records knows the finished trials."""

import pytest

from recbole_mgformer.tune.draws import Plan
from recbole_mgformer.tune.space import parse_space, ray_space

pytest.importorskip("hyperopt", reason="hyperopt is not installed (pip install hyperopt==0.2.5)")

SPACE = {"uniformity_weight": {"loguniform": [0.1, 1.0]}, "embedding_size": {"choice": [8, 16]}}


def searcher(records, first_pending=None):
    from recbole_mgformer.tune.tuner import hyperopt_search

    plan = Plan(records, total=4, to_run=4 - len(records), first_pending=first_pending)
    search = hyperopt_search({"space": SPACE, "search_seed": 0}, plan)
    search.set_search_properties("best_valid_score", "max", ray_space(parse_space(SPACE), "hyperopt"))
    return search


def record(params, score, status="completed"):
    return {"params": params, "score": score, "status": status}


def test_the_finished_trials_are_tpes_completed_ones_and_failed_ones_are_left_out():
    import hyperopt

    search = searcher(
        {
            0: record({"uniformity_weight": 0.5, "embedding_size": 16}, 0.3),
            1: record({"uniformity_weight": 0.2, "embedding_size": 8}, None, "failed"),
            2: record({"uniformity_weight": 0.9, "embedding_size": 8}, 0.1),
        }
    )
    docs = search._hpopt_trials.trials
    assert [doc["state"] for doc in docs] == [hyperopt.JOB_STATE_DONE] * 2
    assert search._hpopt_trials.losses() == [-0.3, -0.1]  # maximised: hyperopt minimises the negated score
    assert docs[0]["misc"]["vals"] == {"uniformity_weight": [0.5], "embedding_size": [1]}  # a choice by its index
    suggested = search.suggest("next")
    assert 0.1 <= suggested["uniformity_weight"] <= 1.0 and suggested["embedding_size"] in (8, 16)


def test_the_models_defaults_still_run_first_when_their_trial_had_not_finished():
    first = {"uniformity_weight": 0.25, "embedding_size": 8}
    search = searcher({0: record({"uniformity_weight": 0.5, "embedding_size": 16}, 0.3)}, first_pending=first)
    assert search.suggest("first") == first
    assert search.suggest("second") != first
