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


def _label(row):
    """A row's name, marked where a record of it trained on a GPU (the others trained on CPUs)."""
    on_gpu = any(str(r.get("device", "")).startswith("cuda") for r in row["records"])
    return row["variant"] + (" [GPU]" if on_gpu else "")


def cost_points(sections):
    """``[(section label, [(row label, seconds, test NDCG@20 mean), ...]), ...]`` of the rows with a time to fit;
    ``sections`` ``[(label, rows)]`` with rows as the general table builds them."""
    points = []
    for label, rows in sections:
        chosen = [(_label(row), mean_time_to_fit(row["records"]), row["stats"]["ndcg@20"][0]) for row in rows]
        chosen = [point for point in chosen if point[1] is not None]
        if chosen:
            points.append((label, chosen))
    return points


def _place_labels(axis, figure, labelled):
    """Annotate each ``(text, x, y)`` beside its point, right or left, moved down just as far as it takes to
    cover no label placed before and no point, with a leader line where it moved: every row stays readable where
    points crowd."""
    from matplotlib.transforms import Bbox

    renderer = figure.canvas.get_renderer()
    scale = 72 / figure.dpi  # display pixels -> points
    points = axis.transData.transform([(x, y) for _, x, y in labelled])
    placed = [Bbox.from_bounds(px - 4, py - 4, 8, 8) for px, py in points]  # no label covers a point
    for (text, x, y), (px, py) in sorted(zip(labelled, points), key=lambda pair: -pair[1][1]):
        probe = axis.annotate(text, (x, y), fontsize=7)
        width, height = probe.get_window_extent(renderer).width, probe.get_window_extent(renderer).height
        probe.remove()
        best = None
        for side in (1, -1):  # right of the point, then left
            left = px + 6 if side > 0 else px - 6 - width
            for drop in range(0, 400, 2):
                box = Bbox.from_bounds(left, py - height / 2 - drop, width, height)
                if not any(box.overlaps(other) for other in placed):
                    break
            if best is None or drop < best[0]:
                best = (drop, side, box)
        drop, side, box = best
        axis.annotate(
            text,
            (x, y),
            xytext=((box.x0 - px if side > 0 else box.x1 - px) * scale, (box.y0 + height / 2 - py) * scale),
            textcoords="offset points",
            fontsize=7,
            va="center",
            ha="left" if side > 0 else "right",
            arrowprops=(
                {"arrowstyle": "-", "lw": 0.6, "color": "0.35", "shrinkA": 0, "shrinkB": 3} if drop > 4 else None
            ),
        )
        placed.append(box)


def cost_chart(dataset, points, path):
    """Test NDCG@20 against seconds to fit (log axis), every row a labelled point, a marker per section."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(11, 6.5))
    markers = ("o", "s", "^", "D")
    for index, (label, chosen) in enumerate(points):
        axis.scatter(
            [p[1] for p in chosen], [p[2] for p in chosen], marker=markers[index % len(markers)], label=label, zorder=3
        )
    axis.set_xscale("log")
    axis.set_xlabel("wall time to fit, seconds (construction + training to the best epoch; log scale)")
    axis.set_ylabel("test NDCG@20 (mean over seeds)")
    axis.set_title(f"{dataset}: accuracy against the time to fit")
    axis.grid(True, which="both", alpha=0.3)
    axis.margins(x=0.25, y=0.1)  # room for the labels of the outermost points
    if len(points) > 1:
        axis.legend(fontsize=7, loc="lower right")
    figure.tight_layout()
    _place_labels(axis, figure, [point for _, chosen in points for point in chosen])
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return Path(path)
