"""Trial rows and their order (``recbole_mgformer.tune.report``)."""

from types import SimpleNamespace

from recbole_mgformer.tune.report import render_markdown, sort_rows, space_text, trial_rows


def fake_result(trial, metrics=None, error=None, config=None):
    metrics = {"trial_id": trial, **(metrics or {})}
    return SimpleNamespace(metrics=metrics, error=error, config=config, _local_path=None)


def test_rows_sort_by_the_metric_with_failed_and_unfinished_trials_last():
    results = [
        fake_result("a", {"best_valid_score": 0.2, "epoch": 4, "done": True, "finished": True}, config={"d": 32}),
        fake_result(
            "b", error=RuntimeError("ray::train()\n  File x\nValueError: Training loss is nan"), config={"d": 64}
        ),
        fake_result(
            "c",
            {"best_valid_score": 0.3, "best_ndcg@20": 0.3, "epoch": 2, "done": True, "finished": False},
            config={"d": 128},
        ),
        fake_result("d", {"best_valid_score": 0.1, "epoch": 1, "done": False}, config={"d": 16}),
    ]
    rows = sort_rows(trial_rows(results, ["d"]))
    assert [(r["trial"], r["status"]) for r in rows] == [
        ("c", "stopped early"),
        ("a", "completed"),
        ("d", "unfinished"),
        ("b", "failed"),
    ]
    assert rows[-1]["error"] == "ValueError: Training loss is nan" and rows[-1]["params"] == {"d": 64}
    assert rows[0]["valid"] == {"ndcg@20": 0.3}
    assert [r["trial"] for r in sort_rows(trial_rows(results, ["d"]), bigger=False)][:2] == ["a", "c"]


def test_a_drawn_none_shows_as_yamls_tilde_and_a_missing_value_as_blank():
    space = {"structural_size": {"choice": [None, 8, 16]}, "learning_rate": {"loguniform": [0.0001, 0.01]}}
    assert space_text(space) == "`structural_size` choice [~, 8, 16], `learning_rate` loguniform [0.0001, 0.01]"
    request = {
        "model": "MGFormer",
        "dataset": "ml-100k",
        "metric": "ndcg@20",
        "mode": "max",
        "search": "random",
        "samples": 2,
        "scheduler": "fifo",
        "space": space,
        "space_source": "the space",
        "overrides": {},
        "config_files": [],
        "experiment": "saved/tune/x",
    }
    rows = [
        {
            "trial": "t1",
            "status": "completed",
            "score": 0.27,
            "epochs": 3,
            "valid": {},
            "params": {"structural_size": None, "learning_rate": 0.001},
        },
        {
            "trial": "t2",
            "status": "failed",
            "error": "ValueError",
            "score": None,
            "epochs": 0,
            "valid": {},
            "params": {},
        },
    ]
    summary = {
        "request": request,
        "rows": rows,
        "best": None,
        "retrained": None,
        "provenance": {"machine": "cpu", "commit": "abc", "date": "today", "versions": {}},
    }
    page = render_markdown(summary)
    assert "| 1 | t1 | completed | 0.2700 | 3 | ~ | 0.001 |" in page
    assert "| t2 | failed: ValueError |  | 0 |  |  |" in page
