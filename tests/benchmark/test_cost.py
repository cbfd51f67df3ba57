"""The cost column and picture (benchmark/cost.py): the time to fit, in the table and against test NDCG@20."""

import pytest

from recbole_mgformer.benchmark.cost import cost_points, time_to_fit
from recbole_mgformer.benchmark.general import cost_sections, render_costs, render_dataset


def record(variant, seed, ndcg, per_epoch=2.0, best=3, build=None, device="cpu"):
    rec = {
        "variant": variant,
        "model": variant,
        "seed": seed,
        "test": {"recall@20": 2 * ndcg, "ndcg@20": ndcg},
        "valid": {"ndcg@20": ndcg},
        "best_epoch": best,
        "epochs": best + 11,
        "train_seconds_per_epoch": per_epoch,
        "machine": "cpu",
        "commit": "abc",
        "device": device,
    }
    if build is not None:
        rec["build_seconds"] = build
    return rec


def test_time_to_fit_is_construction_and_training_up_to_the_best_epoch():
    assert time_to_fit(record("A", 0, 0.1, per_epoch=2.0, best=3)) == pytest.approx(8.0)  # epochs 0..3
    assert time_to_fit(record("A", 0, 0.1, per_epoch=0.5, best=0, build=40.0)) == pytest.approx(40.5)  # closed form
    assert time_to_fit({"seconds": 48.0}) is None  # the retired scripts' records: no epoch timings


def test_the_table_has_a_fit_column_and_links_the_picture(tmp_path):
    records = [
        record("LightGCN", 0, 0.15, per_epoch=10.0, best=49),
        record("LightGCN", 1, 0.16, per_epoch=12.0, best=49),
        record("GFCF", 0, 0.14, per_epoch=0.2, best=0, build=95.8),
        {**record("Old", 0, 0.1), "best_epoch": None},
    ]
    page = render_dataset("tiny", records)
    header = next(line for line in page.splitlines() if line.startswith("| model"))
    assert header.endswith("| s / epoch | fit s |")
    assert "| LightGCN | 2 |" in page and "| 550 |" in page  # (500 + 600) / 2
    assert "| 96.0 |" in page  # 95.8 + 0.2
    assert "[cost.png](cost.png)" in page and "![tiny: test NDCG@20 against the time to fit](cost.png)" in page
    written = render_costs({"tiny": records}, tmp_path)
    assert written == [tmp_path / "cost.png"] and written[0].read_bytes()[:4] == b"\x89PNG"
    # no record with epoch timings: no picture and no link
    legacy = [
        {
            "variant": "BPR",
            "model": "BPR",
            "seed": 1,
            "test": {"recall@20": 0.3, "ndcg@20": 0.2},
            "valid": {"ndcg@20": 0.2},
            "seconds": 48.0,
            "machine": "cpu",
            "commit": "abc",
        }
    ]
    assert "cost.png" not in render_dataset("old", legacy) and render_costs({"old": legacy}, tmp_path / "x") == []


def test_every_row_is_a_labelled_point_on_a_log_axis(tmp_path, monkeypatch):
    records = [
        record("LightGCN", 0, 0.15, per_epoch=10.0, best=49),
        record("GFCF", 0, 0.14, per_epoch=0.2, best=0, build=95.8),
        {**record("MGFormer", 0, 0.16, device="cuda:0"), "tuning": {"text": "8 trials", "search": "s.md"}},
    ]
    points = cost_points(cost_sections(records))
    assert [label for label, _ in points] == ["equal-budget search, 8 trials", "hand-set, not searched"]
    assert points[0][1] == [("MGFormer [GPU]", pytest.approx(8.0), 0.16)]  # trained on a GPU: said on the picture
    import matplotlib.pyplot as plt

    seen = {}
    original = plt.Figure.savefig

    def keep(figure, path, **kwargs):
        axis = figure.axes[0]
        seen["scale"] = axis.get_xscale()
        seen["labels"] = sorted(text.get_text() for text in axis.texts)
        return original(figure, path, **kwargs)

    monkeypatch.setattr(plt.Figure, "savefig", keep)
    render_costs({"tiny": records}, tmp_path)
    assert seen == {"scale": "log", "labels": ["GFCF", "LightGCN", "MGFormer [GPU]"]}


def test_a_second_dataset_on_a_page_gets_a_picture_of_its_own(tmp_path):
    records = [record("GFCF", 0, 0.14, per_epoch=0.2, best=0, build=95.8)]
    written = render_costs({"gowalla": records, "gowalla-full": records}, tmp_path)  # gowalla-full: page gowalla
    assert written == [tmp_path / "cost.png", tmp_path / "cost-gowalla-full.png"]
    assert "[cost-gowalla-full.png](cost-gowalla-full.png)" in render_dataset("gowalla-full", records)
