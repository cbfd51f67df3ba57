"""Trial rows, their order, the page and the best configuration's YAML (``recbole_mgformer.tune.report``)."""

import pytest
import yaml

from recbole_mgformer.tune.report import best_config_yaml, render_markdown, sort_rows, space_text


def row(trial, status, score, **more):
    return {"trial": trial, "status": status, "score": score, "epochs": 1, "valid": {}, "params": {}, **more}


def test_rows_sort_by_the_metric_with_failed_and_unfinished_trials_last():
    rows = [
        row("a", "completed", 0.2),
        row("b", "failed", None, error="ValueError: Training loss is nan"),
        row("c", "stopped early", 0.3),
        row("d", "unfinished", 0.1),
    ]
    ordered = sort_rows(rows)
    assert [(r["trial"], r["status"]) for r in ordered] == [
        ("c", "stopped early"),
        ("a", "completed"),
        ("d", "unfinished"),
        ("b", "failed"),
    ]
    assert [r["trial"] for r in sort_rows(rows, bigger=False)][:2] == ["a", "c"]


def request(**more):
    return {
        "model": "MGFormer",
        "dataset": "ml-100k",
        "metric": "ndcg@20",
        "mode": "max",
        "search": "random",
        "samples": 2,
        "scheduler": "asha",
        "grace_period": 1,
        "max_t": 2,
        "space": {"learning_rate": {"choice": [0.01, 0.001]}},
        "space_source": "the space",
        "overrides": {"epochs": 30, "stopping_step": 5},
        "config_files": [],
        "data_path": "/machine/dataset",
        "data_path_given": "dataset",
        "epochs": 30,
        "experiment": "saved/tune/x",
        **more,
    }


@pytest.mark.parametrize("params", [{"learning_rate": 0.01}, {"learning_rate": 0.01, "mlp": [64, 64]}])
def test_the_best_yaml_holds_the_searched_values_and_says_the_search_capped_the_epochs(params):
    text = best_config_yaml(request(), row("t1", "completed", 0.27, params=params), "tuning/x.yaml")
    assert yaml.safe_load(text) == params  # never the search's epochs: 30, stopping_step or data_path
    lines = text.splitlines()
    assert lines[1] == (
        "# Searched settings only; the search trained at most 30 epochs a trial (ASHA stopped poor trials early): "
        "set epochs yourself."
    )
    assert lines[2] == "# The search also ran with settings stopping_step=5, data_path=dataset: add those you need."
    assert lines[3] == "# python run.py --model=MGFormer --dataset=ml-100k --config_files=tuning/x.yaml --epochs=<N>"
    searched = best_config_yaml(
        request(scheduler="fifo"), row("t1", "completed", 0.2, params={"epochs": 10}), "tuning/x.yaml"
    )
    assert yaml.safe_load(searched) == {"epochs": 10} and "# Searched settings only, epochs among them." in searched


def test_a_drawn_none_shows_as_yamls_tilde_and_a_missing_value_as_blank():
    space = {"structural_size": {"choice": [None, 8, 16]}, "learning_rate": {"loguniform": [0.0001, 0.01]}}
    assert space_text(space) == "`structural_size` choice [~, 8, 16], `learning_rate` loguniform [0.0001, 0.01]"
    rows = [
        row("t1", "completed", 0.27, epochs=3, params={"structural_size": None, "learning_rate": 0.001}),
        row("t2", "failed", None, epochs=0, error="ValueError"),
    ]
    summary = {
        "request": request(space=space, scheduler="fifo", overrides={}),
        "rows": rows,
        "best": None,
        "retrained": None,
        "provenance": {"machine": "cpu", "commit": "abc", "date": "today", "versions": {}},
    }
    page = render_markdown(summary)
    assert "| 1 | t1 | completed | 0.2700 | 3 | ~ | 0.001 |" in page
    assert "| t2 | failed: ValueError |  | 0 |  |  |" in page


@pytest.mark.parametrize(("grace_period", "max_t", "stops"), [(1, 1, False), (3, 3, False), (1, 2, True), (2, 3, True)])
def test_asha_is_said_to_stop_trials_only_when_a_rung_lies_below_a_trials_end(grace_period, max_t, stops):
    # --epochs=1 (or a model fit once) shrinks the grace period to the one evaluation: every trial runs to its end
    asked = request(grace_period=grace_period, max_t=max_t)
    text = best_config_yaml(asked, row("t1", "completed", 0.2, params={"learning_rate": 0.01}), "tuning/x.yaml")
    assert ("(ASHA stopped poor trials early)" in text) is stops
    summary = {
        "request": asked,
        "rows": [row("t1", "completed", 0.2, params={"learning_rate": 0.01})],
        "best": None,
        "retrained": None,
        "provenance": {"machine": "cpu", "commit": "abc", "date": "today", "versions": {}},
    }
    page = render_markdown(summary)
    assert (f"ASHA (grace period {grace_period}, max {max_t} evaluations)" in page) is stops
    assert ("ASHA with nothing to stop" in page) is not stops
