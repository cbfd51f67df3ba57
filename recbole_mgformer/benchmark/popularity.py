"""Metrics by item popularity, the MGFormer paper's Fig. 2: measured at a run's best epoch, tabulated and charted
for a results page."""

import statistics
from pathlib import Path

from recbole_mgformer.evaluation import (
    GROUP_RULE,
    GROUPS,
    metrics_by_group,
    popularity_groups,
    training_counts,
)

__all__ = ["GROUP_RULE", "popularity_metrics", "render_popularity"]


def popularity_metrics(trainer, train_data, test_data):
    """Test Recall@20 / NDCG@20 by item popularity group (Fig. 2), for the weights the trainer holds."""
    return metrics_by_group(trainer, test_data, popularity_groups(training_counts(train_data)), k=20)


def popularity_table(dataset, records):
    """Rows of (variant, group) with test Recall@20 / NDCG@20 averaged over seeds; None without records."""
    records = [r for r in records if "test_popularity" in r]
    if not records:
        return None, {}
    means = {}
    for record in records:
        for group in GROUPS:
            values = record["test_popularity"][group]
            means.setdefault(record["variant"], {}).setdefault(group, []).append(
                (values["recall@20"], values["ndcg@20"], values["users"]))
    lines = [f"## {dataset}", "", f"Groups: {GROUP_RULE}; a user counts in a group when one of their test items is in it.",
             "", "| model | seeds | " + " | ".join(f"{g} Recall@20 | {g} NDCG@20" for g in GROUPS) + " |",
             "|" + "---|" * (2 + 2 * len(GROUPS))]
    summary = {}
    for variant, groups in sorted(means.items(), key=lambda item: item[0]):
        cells = []
        for group in GROUPS:
            recall = statistics.mean(v[0] for v in groups[group] if v[0] is not None)
            ndcg = statistics.mean(v[1] for v in groups[group] if v[1] is not None)
            summary.setdefault(variant, {})[group] = (recall, ndcg)
            cells += [f"{recall:.4f}", f"{ndcg:.4f}"]
        lines.append(f"| {variant} | {len(groups[GROUPS[0]])} | " + " | ".join(cells) + " |")
    users = {g: records[0]["test_popularity"][g]["users"] for g in GROUPS}
    lines += ["", "Test users per group: " + ", ".join(f"{g} {n}" for g, n in users.items()) + ".", ""]
    return "\n".join(lines), summary


def popularity_chart(dataset, summary, path):
    """Grouped bars like the paper's Fig. 2: one bar per model in each popularity group."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    variants = sorted(summary)
    figure, axes = plt.subplots(1, 2, figsize=(11, 4))
    width = 0.8 / len(variants)
    for axis, (metric_index, metric) in zip(axes, enumerate(("Recall@20", "NDCG@20"))):
        for index, variant in enumerate(variants):
            values = [summary[variant][group][metric_index] for group in GROUPS]
            axis.bar([g + index * width for g in range(len(GROUPS))], values, width, label=variant)
        axis.set_xticks([g + width * (len(variants) - 1) / 2 for g in range(len(GROUPS))], GROUPS)
        axis.set_title(f"{dataset}: test {metric} by item popularity")
    axes[1].legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def render_popularity(by_dataset, folder):
    """``<folder>/popularity.md`` and a ``popularity-<dataset>.png`` per dataset, from the records that have group
    metrics; returns the page's path, or None (and writes nothing) when no record has them."""
    sections = ["# Metrics by item popularity", "",
                "Rendered by `python -m recbole_mgformer.benchmark` (the paper's Fig. 2), at each run's best epoch.", ""]
    for dataset in sorted(by_dataset):
        # the chart compares models at their defaults; the table also lists variants
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
