"""What accuracy costs: each row's wall time to fit, and a picture per dataset of test NDCG@20 against it.

The time to fit a run is the model's construction (``build_seconds``: where a closed-form model fits and MGFormer
takes its SVD; recorded since this column exists, counted as 0 in older records) plus its training up to and
including the best epoch (mean training seconds per epoch times ``best_epoch + 1``): what training the kept
model took, without the validation passes and the epochs early stopping waits after the best. Records without
epoch timings (the retired scripts') have none. Times are wall times on the machines the "Runs:" line names,
often with two runs sharing two cores: orders of magnitude, not a speed benchmark."""

import statistics
from pathlib import Path


def time_to_fit(record):
    """Seconds to fit one run (see the module's doc), or None where the record lacks the epoch timings."""
    per_epoch, best = record.get("train_seconds_per_epoch"), record.get("best_epoch")
    if per_epoch is None or best is None:
        return None
    return (record.get("build_seconds") or 0.0) + per_epoch * (best + 1)


def mean_time_to_fit(records):
    """The mean over a row's records that have a time to fit, or None."""
    times = [t for t in map(time_to_fit, records) if t is not None]
    return statistics.mean(times) if times else None


def format_seconds(seconds):
    return "" if seconds is None else (f"{seconds:.1f}" if seconds < 100 else f"{seconds:,.0f}")


def chart_name(dataset, page):
    """``cost.png`` for the page's own dataset, ``cost-<dataset>.png`` for another one on it (``gowalla-full``)."""
    return "cost.png" if dataset == page else f"cost-{dataset}.png"


def label_of(row):
    """A row's short name, marked where a record of it trained on a GPU (the others trained on CPUs)."""
    on_gpu = any(str(r.get("device", "")).startswith("cuda") for r in row["records"])
    return row["variant"] + (" [GPU]" if on_gpu else "")


def cost_points(sections):
    """``[(section label, [(row label, seconds, test NDCG@20 mean), ...]), ...]`` of the rows with a time to fit;
    ``sections`` ``[(label, rows)]`` with rows as the general table builds them."""
    points = []
    for label, rows in sections:
        chosen = [(label_of(row), mean_time_to_fit(row["records"]), row["stats"]["ndcg@20"][0]) for row in rows]
        chosen = [point for point in chosen if point[1] is not None]
        if chosen:
            points.append((label, chosen))
    return points


FAMILY_COLOURS = {
    "MGFormer family": "tab:red",
    "graph CF / MF": "tab:blue",
    "training-free filters": "tab:green",
    "item-item": "tab:purple",
    None: "0.45",
}
PROTOCOL_MARKERS = ("o", "s", "^", "D")
LABEL_SIZE = 6.5


def _free_box(candidates, placed, inside):
    """The first candidate box (in order of preference) inside ``inside`` that overlaps none of ``placed``, else
    the one inside that overlaps the fewest."""
    best = None
    for box in candidates:
        if not (inside.x0 <= box.x0 and box.x1 <= inside.x1 and inside.y0 <= box.y0 and box.y1 <= inside.y1):
            continue
        overlaps = sum(box.overlaps(other) for other in placed)
        if overlaps == 0:
            return box
        if best is None or overlaps < best[0]:
            best = (overlaps, box)
    return None if best is None else best[1]


def _place_labels(axis, figure, labelled):
    """Annotate each ``(text, x, y)`` beside its point, right or left, moved up or down just as far as it takes
    to stay inside the axes and cover no label placed before and no point, with a leader line where it moved:
    every row stays readable where points crowd, and no name runs off the picture."""
    from matplotlib.transforms import Bbox

    figure.canvas.draw()  # settles the autoscaled limits, so the points' pixels below are where they are drawn
    renderer = figure.canvas.get_renderer()
    scale = 72 / figure.dpi  # display pixels -> points
    inside = axis.get_window_extent(renderer)
    points = axis.transData.transform([(x, y) for _, x, y in labelled])
    placed = [Bbox.from_bounds(px - 6, py - 6, 12, 12) for px, py in points]  # no label covers a point
    for (text, x, y), (px, py) in sorted(zip(labelled, points), key=lambda pair: -pair[1][1]):
        probe = axis.annotate(text, (x, y), fontsize=LABEL_SIZE)
        extent = probe.get_window_extent(renderer)
        width, height = extent.width, extent.height
        probe.remove()
        candidates = []
        for shift in range(0, 600, 2):
            for drop in (-shift, shift) if shift else (0,):
                for left in (px + 8, px - 8 - width):  # right of the point, then left
                    candidates.append(Bbox.from_bounds(left, py - height / 2 + drop - 1, width, height + 2))
        box = _free_box(candidates, placed, inside) or candidates[0]
        side_right = box.x0 > px
        moved = abs(box.y0 + 1 + height / 2 - py) > 4
        axis.annotate(
            text,
            (x, y),
            xytext=((box.x0 - px if side_right else box.x1 - px) * scale, (box.y0 + 1 + height / 2 - py) * scale),
            textcoords="offset points",
            fontsize=LABEL_SIZE,
            va="center",
            ha="left" if side_right else "right",
            arrowprops=({"arrowstyle": "-", "lw": 0.5, "color": "0.5", "shrinkA": 0, "shrinkB": 3} if moved else None),
        )
        placed.append(box)


def _legends(figure, axis, protocols, families):
    """Families by colour and protocols by marker, in two legends under the axes, clear of every point."""
    from matplotlib.lines import Line2D

    family_handles = [
        Line2D([], [], marker="o", linestyle="", color=FAMILY_COLOURS[f], label=f or "other")
        for f in FAMILY_COLOURS
        if f in families
    ]
    protocol_handles = [
        Line2D([], [], marker=PROTOCOL_MARKERS[i % len(PROTOCOL_MARKERS)], linestyle="", color="0.3", label=p)
        for i, p in enumerate(protocols)
    ]
    first = figure.legend(
        handles=family_handles, loc="lower left", bbox_to_anchor=(0.01, 0.0), fontsize=7, ncol=2, frameon=False
    )
    figure.legend(
        handles=protocol_handles, loc="lower right", bbox_to_anchor=(0.99, 0.0), fontsize=7, ncol=1, frameon=False
    )
    figure.add_artist(first)


def cost_chart(dataset, points, path, families=None):
    """Test NDCG@20 against seconds to fit (log axis), every row a labelled point: colour by family (``families``:
    ``{row label: family}``, :data:`~recbole_mgformer.benchmark.names.FAMILIES`), marker by protocol (section),
    legends under the axes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    families = families or {}
    figure, axis = plt.subplots(figsize=(10, 8))
    for index, (_, chosen) in enumerate(points):
        axis.scatter(
            [p[1] for p in chosen],
            [p[2] for p in chosen],
            marker=PROTOCOL_MARKERS[index % len(PROTOCOL_MARKERS)],
            c=[FAMILY_COLOURS.get(families.get(p[0]), FAMILY_COLOURS[None]) for p in chosen],
            s=36,
            edgecolors="white",
            linewidths=0.5,
            zorder=3,
        )
    axis.set_xscale("log")
    axis.set_xlabel("wall time to fit, seconds (construction + training to the best epoch; log scale)")
    axis.set_ylabel("test NDCG@20 (mean over seeds)")
    axis.set_title(f"{dataset}: accuracy against the time to fit")
    axis.grid(True, which="both", alpha=0.3)
    axis.margins(x=0.3, y=0.1)  # room for the labels of the outermost points
    figure.subplots_adjust(left=0.08, right=0.98, top=0.95, bottom=0.15)
    shown = {families.get(p[0]) for _, chosen in points for p in chosen}
    _legends(figure, axis, [label for label, _ in points], shown)
    _place_labels(axis, figure, [point for _, chosen in points for point in chosen])
    figure.savefig(path, dpi=120, metadata={"Software": None})
    plt.close(figure)
    return Path(path)
