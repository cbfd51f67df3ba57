"""Metrics by item popularity, the MGFormer paper's Fig. 2: measured at a run's best epoch, tabulated and charted
for a results page."""

from pathlib import Path

from recbole_mgformer.benchmark.datasets import untuned_heading
from recbole_mgformer.benchmark.stats import format_ci, mean_ci
from recbole_mgformer.item_groups import GROUP_RULE, GROUPS

__all__ = ["GROUP_RULE", "popularity_metrics", "render_popularity"]


def popularity_metrics(top_items, train_data):
    """Test Recall@20 / NDCG@20 by item popularity group (Fig. 2), from the test pass's
    :class:`~recbole_mgformer.evaluation.TopItems`."""
    from recbole_mgformer.evaluation import metrics_by_group, popularity_groups, training_counts  # torch: runs only

    return metrics_by_group(top_items, popularity_groups(training_counts(train_data)), k=20)


def _group_stats(records):
    """``{variant: {group: ((recall mean, half), (ndcg mean, half), seeds)}}`` over the records' seeds."""
    values = {}
    for record in records:
        for group in GROUPS:
            metrics = record["test_popularity"][group]
            values.setdefault(record["variant"], {}).setdefault(group, []).append(
                (metrics["recall@20"], metrics["ndcg@20"])
            )
    return {
        variant: {
            group: (
                mean_ci([v[0] for v in pairs if v[0] is not None]),
                mean_ci([v[1] for v in pairs if v[1] is not None]),
                len(pairs),
            )
            for group, pairs in groups.items()
        }
        for variant, groups in values.items()
    }


def popularity_table(dataset, records):
    """Rows of (variant, group) with test Recall@20 / NDCG@20, mean ± 95% interval over seeds, the equal-budget
    searches' runs apart from older ones; (None, {}) without records. The summary is the tuned runs' where any."""
    records = [r for r in records if "test_popularity" in r]
    if not records:
        return None, {}
    lines = [
        f"## {dataset}",
        "",
        f"Groups: {GROUP_RULE}; a user counts in a group when one of their test items is in it.",
        "Cells: mean ± the 95% confidence interval over seeds (the value alone for one seed).",
        "",
    ]
    parts = {}
    for record in records:
        parts.setdefault((record.get("tuning") or {}).get("text"), []).append(record)
    summary = {}
    for budget, group in sorted(parts.items(), key=lambda item: (item[0] is None, item[0] or "")):
        if budget is not None:
            lines += [f"### Tuned with the same budget: {budget}", ""]
        elif len(parts) > 1:
            lines += [f"### {untuned_heading(dataset)}", ""]
        lines += [
            "| model | seeds | " + " | ".join(f"{g} Recall@20 | {g} NDCG@20" for g in GROUPS) + " |",
            "|" + "---|" * (2 + 2 * len(GROUPS)),
        ]
        stats = _group_stats(group)
        for variant, groups in sorted(stats.items()):
            cells = [format_ci(*groups[g][metric]) for g in GROUPS for metric in (0, 1)]
            lines.append(f"| {variant} | {groups[GROUPS[0]][2]} | " + " | ".join(cells) + " |")
        lines.append("")
        if not summary:
            summary = stats
    users = {g: records[0]["test_popularity"][g]["users"] for g in GROUPS}
    lines += ["Test users per group: " + ", ".join(f"{g} {n}" for g, n in users.items()) + ".", ""]
    return "\n".join(lines), summary


def popularity_chart(dataset, summary, path):
    """Grouped bars like the paper's Fig. 2: one bar per model in each popularity group, with its 95% interval
    over seeds where it has several."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    variants = sorted(summary)
    figure, axes = plt.subplots(1, 2, figsize=(11, 4))
    width = 0.8 / len(variants)
    for axis, (metric_index, metric) in zip(axes, enumerate(("Recall@20", "NDCG@20"))):
        for index, variant in enumerate(variants):
            means = [summary[variant][group][metric_index][0] for group in GROUPS]
            means = [float("nan") if mean is None else mean for mean in means]  # a group without test users
            halves = [summary[variant][group][metric_index][1] or 0.0 for group in GROUPS]
            axis.bar(
                [g + index * width for g in range(len(GROUPS))],
                means,
                width,
                label=variant,
                yerr=halves if any(halves) else None,
                capsize=2,
            )
        axis.set_xticks([g + width * (len(variants) - 1) / 2 for g in range(len(GROUPS))], GROUPS)
        axis.set_title(f"{dataset}: test {metric} by item popularity")
    axes[1].legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def render_popularity(by_dataset, folder):
    """``<folder>/popularity.md`` and a ``popularity-<dataset>.png`` per dataset, from the records that have group
    metrics; returns the page's path, or None (and writes nothing) when no record has them."""
    sections = [
        "# Metrics by item popularity",
        "",
        "Rendered by `python -m recbole_mgformer.benchmark` (the paper's Fig. 2), at each run's best epoch.",
        "",
    ]
    for dataset in sorted(by_dataset):
        # the chart shows the equal-budget searches' models where there are any, else the models at their defaults;
        # the table also lists variants
        table, summary = popularity_table(dataset, by_dataset[dataset])
        if table is None:
            continue
        chart = Path(folder) / f"popularity-{dataset}.png"
        defaults = {v: s for v, s in summary.items() if " " not in v}
        popularity_chart(dataset, defaults or summary, chart)
        sections += [table, f"![{dataset}]({chart.name})", ""]
    if len(sections) == 4:
        return None
    path = Path(folder) / "popularity.md"
    path.write_text("\n".join(sections))
    return path
