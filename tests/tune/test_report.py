"""Trial rows and their order (``recbole_mgformer.tune.report``)."""

from types import SimpleNamespace

from recbole_mgformer.tune.report import sort_rows, trial_rows


def fake_result(trial, metrics=None, error=None, config=None):
    metrics = {"trial_id": trial, **(metrics or {})}
    return SimpleNamespace(metrics=metrics, error=error, config=config, _local_path=None)


def test_rows_sort_by_the_metric_with_failed_and_unfinished_trials_last():
    results = [
        fake_result("a", {"best_valid_score": 0.2, "epoch": 4, "done": True, "finished": True}, config={"d": 32}),
        fake_result("b", error=RuntimeError("ray::train()\n  File x\nValueError: Training loss is nan"),
                    config={"d": 64}),
        fake_result("c", {"best_valid_score": 0.3, "best_ndcg@20": 0.3, "epoch": 2, "done": True, "finished": False},
                    config={"d": 128}),
        fake_result("d", {"best_valid_score": 0.1, "epoch": 1, "done": False}, config={"d": 16}),
    ]
    rows = sort_rows(trial_rows(results, ["d"]))
    assert [(r["trial"], r["status"]) for r in rows] == [
        ("c", "stopped early"), ("a", "completed"), ("d", "unfinished"), ("b", "failed")]
    assert rows[-1]["error"] == "ValueError: Training loss is nan" and rows[-1]["params"] == {"d": 64}
    assert rows[0]["valid"] == {"ndcg@20": 0.3}
    assert [r["trial"] for r in sort_rows(trial_rows(results, ["d"]), bigger=False)][:2] == ["a", "c"]
