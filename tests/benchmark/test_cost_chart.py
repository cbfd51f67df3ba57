"""The picture of accuracy against the time to fit (benchmark/cost.py: cost_chart): every label inside the axes and
clear of the others, families by colour, protocols by marker, the legends outside the axes."""

import pytest

from recbole_mgformer.benchmark.cost import FAMILY_COLOURS, cost_chart


def crowded_points():
    """Two protocols; 24 rows with 40-character names, crowded at the edges of the picture."""
    names = [f"Model {i:02d} with a rather long name ok.."[:40] for i in range(24)]
    tuned = [(names[i], 10 ** (i % 6), 0.30 + 0.001 * i) for i in range(12)]
    fixed = [(names[i], 10 ** (i % 6) * 1.1, 0.31 + 0.0005 * i) for i in range(12, 24)]
    families = {name: list(FAMILY_COLOURS)[i % len(FAMILY_COLOURS)] for i, name in enumerate(names)}
    return [("equal-budget search, 8 trials", tuned), ("fixed settings (papers'), not searched", fixed)], families


def test_labels_stay_inside_the_axes_apart_and_the_legends_outside(tmp_path, monkeypatch):
    import matplotlib.pyplot as plt

    seen = {}
    original = plt.Figure.savefig

    def keep(figure, path, **kwargs):
        renderer = figure.canvas.get_renderer()
        axis = figure.axes[0]
        inside = axis.get_window_extent(renderer)
        boxes = [text.get_window_extent(renderer) for text in axis.texts]
        seen["outside"] = [
            text.get_text()
            for text, box in zip(axis.texts, boxes)
            if box.x0 < inside.x0 - 1 or box.x1 > inside.x1 + 1 or box.y0 < inside.y0 - 1 or box.y1 > inside.y1 + 1
        ]
        seen["overlapping"] = sum(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1 :])
        seen["labels"] = len(axis.texts)
        seen["legends"] = [legend.get_window_extent(renderer).overlaps(inside) for legend in figure.legends]
        seen["markers"] = {collection.get_paths()[0].vertices.shape for collection in axis.collections}
        return original(figure, path, **kwargs)

    monkeypatch.setattr(plt.Figure, "savefig", keep)
    points, families = crowded_points()
    path = cost_chart("crowded", points, tmp_path / "cost.png", families)
    assert path.read_bytes()[:4] == b"\x89PNG"
    assert seen["labels"] == 24 and seen["outside"] == [] and seen["overlapping"] == 0
    assert seen["legends"] == [False, False]  # families and protocols, neither over the axes
    assert len(seen["markers"]) == 2  # one marker per protocol


@pytest.mark.parametrize("families", [None, {}])
def test_rows_of_no_family_are_drawn_in_grey(tmp_path, families):
    points, _ = crowded_points()
    assert cost_chart("plain", points[:1], tmp_path / "plain.png", families).is_file()
