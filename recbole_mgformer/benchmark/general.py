"""The general (top-k) leaderboard, like the MGFormer paper's Table 2: test Recall@20 / NDCG@20, mean and 95%
confidence interval over seeds, best in bold, published numbers beside (``properties/published/``) with our gap to
them, the time to fit (:mod:`recbole_mgformer.benchmark.cost`) and a picture of accuracy against it, the best
model's gain over the best other one, and a paired test of each MGFormer row against the best other model. Rows
from the benchmark's equal-budget searches (records with ``tuning``) get a section per budget, apart from older
runs."""

import statistics
from pathlib import Path

from recbole_mgformer.benchmark.cost import (
    chart_name,
    cost_chart,
    cost_points,
    format_seconds,
    label_of,
    mean_time_to_fit,
)
from recbole_mgformer.benchmark.datasets import page_of, untuned_heading
from recbole_mgformer.benchmark.general_verdicts import is_deterministic_row, verdict_lines
from recbole_mgformer.benchmark.names import family_of
from recbole_mgformer.benchmark.published import published_numbers
from recbole_mgformer.benchmark.sections import defaults_first_note, section_label, sections
from recbole_mgformer.benchmark.stats import mean_ci
from recbole_mgformer.records import by_variant

HEADLINE = ("recall@20", "ndcg@20")  # what a finished run prints
METRICS = ("recall@20", "ndcg@20")


def _cell(mean, half, bold):
    text = f"{mean:.4f}" + (f" ± {half:.4f}" if half is not None else "")
    return f"**{text}**" if bold else text


def _mean_of(group, key, spec, scale=1):
    """The mean of a field over a row's records, formatted; empty where no record has it (older scripts' records)."""
    values = [r[key] * scale for r in group if r.get(key) is not None]
    return format(statistics.mean(values), spec) if values else ""


DETERMINISTIC_NOTE = (
    'Seeds "1 (deterministic)": a closed-form model (EASE, ItemKNN, ...) on a split the seed does '
    "not draw, which every seed would repeat; in a paired test its seed stands for each seed of the "
    "other row. Where the seed draws the split (`order: RO`), such a model runs every seed."
)


def seeds_cell(row):
    """How many seeds a row has; ``1 (deterministic)`` for a model whose one seed is all there is to run."""
    count = str(len(row["records"]))
    return f"{count} (deterministic)" if is_deterministic_row(row["records"]) else count


def _columns(published, best):
    """(header, cell of a row) of every column; a column no row fills is left out of the table. ``published``: a
    :class:`~recbole_mgformer.benchmark.published.Published`."""

    def metric(m):
        return lambda row: _cell(*row["stats"][m], bold=row["stats"][m][0] == best[m])

    def published_cell(index):
        return lambda row: (
            ""
            if published.numbers(row["full_variant"]) is None
            else f"{published.numbers(row['full_variant'])[index]:.4f}"
        )

    def gap_cell(row):
        gap = published.gap(row["full_variant"], {m: row["stats"][m][0] for m in METRICS})
        return "" if gap is None else " / ".join(f"{100 * gap[m]:+.1f}%" for m in METRICS)

    return [
        ("model", lambda row: row["variant"]),
        ("seeds", seeds_cell),
        ("test Recall@20", metric("recall@20")),
        ("test NDCG@20", metric("ndcg@20")),
        ("valid NDCG@20", lambda row: f"{row['valid']:.4f}"),
        (f"{published.label} Recall@20", published_cell(0)),
        (f"{published.label} NDCG@20", published_cell(1)),
        (f"vs {published.label}", gap_cell),
        ("best epoch", lambda row: _mean_of(row["records"], "best_epoch", ".0f")),
        ("epochs", lambda row: _mean_of(row["records"], "epochs", ".0f")),
        ("s / epoch", lambda row: _mean_of(row["records"], "train_seconds_per_epoch", ".1f")),
        ("minutes", lambda row: _mean_of(row["records"], "seconds", ".1f", scale=1 / 60)),
        ("fit s", lambda row: format_seconds(mean_time_to_fit(row["records"]))),
        ("parameters", lambda row: parameters_cell(row["records"][0])),
        ("settings", settings_cell),
    ]


def settings_cell(row):
    """A link to the row's record (its first seed's), whose name and config hold the full settings; the link's
    title shows the record's own name where the row is shown by a short one. Blank where the page does not link
    its records (a table rendered on its own)."""
    link = row["records"][0].get("_record_link")
    if link is None:
        return ""
    title = f' "{row["full_variant"]}"' if row["full_variant"] != row["variant"] else ""
    return f"[record]({link}{title})"


def parameters_cell(record):
    """A trained model's trainable parameters; a closed-form model's stored values (``stored_values``); blank for a
    closed-form record written before they were counted (its one dummy parameter is no count)."""
    if "stored_values" in record:
        return f"{record['stored_values']:,}"
    return f"{record['parameters']:,}" if record.get("parameters", 0) > 1 else ""


def rows_of(records):
    rows = []
    for variant, group in by_variant(records).items():
        stats = {m: mean_ci([r["test"][m] for r in group]) for m in METRICS}
        rows.append(
            {
                "variant": variant,
                "full_variant": group[0].get("full_variant", variant),
                "model": group[0]["model"],
                "records": group,
                "stats": stats,
                "valid": statistics.mean(r["valid"]["ndcg@20"] for r in group),
            }
        )
    rows.sort(key=lambda row: -row["stats"]["ndcg@20"][0])
    return rows


def render_table(rows, published, tuned=False):
    """The table and the lines under it of one section's rows; ``tuned``: the rows of an equal-budget search, where
    d was searched, so a verdict takes the best other model of any size."""
    best = {m: max(row["stats"][m][0] for row in rows) for m in METRICS}
    columns = [(header, cell) for header, cell in _columns(published, best) if any(cell(row) for row in rows)]
    lines = ["| " + " | ".join(header for header, _ in columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(row) for _, cell in columns) + " |" for row in rows]
    lines.append("")
    for metric in METRICS:
        top = max(rows, key=lambda row: row["stats"][metric][0])
        others = [row for row in rows if row["model"] != top["model"]]
        if others:
            runner_up = max(others, key=lambda row: row["stats"][metric][0])
            gain = 100 * (top["stats"][metric][0] / runner_up["stats"][metric][0] - 1)
            lines.append(
                f"Best test {metric}: {top['variant']}, {gain:+.2f}% over the best other model "
                f"({runner_up['variant']})."
            )
    if any(is_deterministic_row(row["records"]) for row in rows):
        lines.append(DETERMINISTIC_NOTE)
    verdicts = verdict_lines(rows, same_size=not tuned)
    return lines + ([""] + verdicts if verdicts else [])


def cost_sections(records, dataset=None):
    """``[(protocol label, rows)]`` of one dataset's records, for its cost picture."""
    return [(section_label(budget, dataset), rows_of(group)) for budget, group in sections(records)]


def published_lines(published, variants):
    """The note and sources of the published numbers under a dataset's tables, and the published models that have
    no row yet (none of their keys, which share a published ``name``, has a row); none without published numbers.
    ``variants``: ``{record name: shown name}`` of the rows (the published numbers are keyed by record names)."""
    if not published.models:
        return []
    if not isinstance(variants, dict):
        variants = {v: v for v in variants}
    shown = [v for v in published.models if v in variants]
    lines = [published.note] if published.note else []
    if shown:
        lines.append(
            f'Sources ({published.label}; "vs {published.label}": ours / {published.label} - 1, Recall@20 '
            "/ NDCG@20): " + "; ".join(published.source_text(v, variants[v]) for v in shown) + "."
        )
    # a published number shown beside a row under another key (a run at the paper's settings, its name showing them)
    # is not missing, and one with no row is listed once, under its first key
    listed = {published.models[v]["name"] for v in shown}
    missing = []
    for variant, numbers in published.models.items():
        if variant not in variants and numbers["name"] not in listed:
            missing.append(variant)
            listed.add(numbers["name"])
    if missing:
        lines.append(
            f"{published.label.capitalize()}, no row of ours yet: "
            + "; ".join(
                f"{published.source_text(v)}, {published.numbers(v)[0]:.4f} / {published.numbers(v)[1]:.4f}"
                for v in missing
            )
            + "."
        )
    return [line for text in lines for line in ("", text)]


def scored_lines(records):
    """The note under a table with rows scored from a trained entry's checkpoint (benchmark.scoring): what they
    were scored from (by the entry's short name, ``scored_from["shown"]``, where the records are named: the name
    its row has, or would have where it has no row on the page, as a grid's control), and how their protocol
    differs from training them."""
    scored = sorted(
        {
            (r["variant"], r["scored_from"].get("shown", r["scored_from"]["variant"]))
            for r in records
            if r.get("scored_from")
        }
    )
    if not scored:
        return []
    shown = "; ".join(f"{variant} from {trained}" for variant, trained in scored)
    return [
        "",
        f"Scored from a trained entry's best-epoch checkpoint, not trained again: {shown}. Their epochs and "
        '"fit s" are the trained entry\'s (plus their own construction); the best epoch was selected on the '
        "trained entry's validation score, without the scoring options.",
    ]


def capped_lines(records):
    """The note under a table naming the rows whose epoch cap, not early stopping, ended a run
    (``best_epoch_at_cap``, :func:`~recbole_mgformer.benchmark.run_record.hit_cap`): their validation might still
    have improved, so each is a capped row, not the model's best. A model fit once (its record counts its
    ``stored_values``: BSPM, EASE, ...) has no epochs to cap."""
    capped = {}
    for record in records:
        if record.get("epoch_cap") and "stored_values" not in record:
            seeds = capped.setdefault((record["variant"], record["epoch_cap"]), [0, 0])
            seeds[0] += bool(record.get("best_epoch_at_cap"))
            seeds[1] += 1
    named = [f"{variant} (cap {cap}; {hit} of {n} seeds)" for (variant, cap), (hit, n) in sorted(capped.items()) if hit]
    if not named:
        return []
    return [
        "",
        "Ended by their epoch cap, not by early stopping (their validation might still have improved; the notes "
        "say why each is capped): " + "; ".join(named) + ".",
    ]


def render_dataset(dataset, records):
    """One markdown table like the paper's Table 2 for one dataset's records (a table per section)."""
    lines = [f"## {dataset}", ""]
    parts = sections(records)
    published = published_numbers(dataset)
    shown = {r.get("full_variant", r["variant"]): r["variant"] for r in records}
    for budget, group in parts:
        if budget is not None:
            lines += [f"### Tuned with the same budget: {budget}", ""]
        elif len(parts) > 1:
            lines += [f"### {untuned_heading(dataset)}", ""]
        lines += render_table(rows_of(group), published, tuned=budget is not None)
        while lines[-1] == "":  # one blank line before the notes under a table
            lines.pop()
        searches = sorted({(r["variant"], r["tuning"]["search"]) for r in group if r.get("tuning")})
        if searches:
            lines += ["", "Searches: " + "; ".join(f"{variant} `{page}`" for variant, page in searches) + "."]
        tuned = sorted(
            {(r["model"], r["tuned_config"]) for r in group if r.get("tuned_config") and not r.get("tuning")}
        )
        if tuned:
            lines += [
                "",
                "Tuned for this dataset, over each model's defaults: "
                + "; ".join(f"{model} (and its variants) `{path}`" for model, path in tuned)
                + ".",
            ]
        lines += scored_lines(group)
        lines += capped_lines(group)
        lines.append("")
    while lines[-1] == "":
        lines.pop()
    lines += published_lines(published, shown)
    if cost_points(cost_sections(records)):
        chart = chart_name(dataset, page_of(dataset))
        lines += [
            "",
            f'Cost: test NDCG@20 against the time to fit ("fit s"), every row a point: [{chart}]({chart}).',
            "",
            f"![{dataset}: test NDCG@20 against the time to fit]({chart})",
        ]
    machines = sorted({(r["machine"], r["commit"]) for r in records})
    lines += [
        "",
        "Runs: " + "; ".join(f"{m} at {c}" for m, c in machines) + f"; seeds {sorted({r['seed'] for r in records})}.",
        "",
    ]
    return "\n".join(lines)


def render_costs(by_dataset, folder):
    """``<folder>/cost.png`` (``cost-<dataset>.png`` for a dataset not the page's own) per dataset whose rows have a
    time to fit; returns the paths written."""
    written = []
    for dataset in sorted(by_dataset):
        parts = cost_sections(by_dataset[dataset], dataset)
        points = cost_points(parts)
        if points:
            families = {label_of(row): family_of(row["model"]) for _, rows in parts for row in rows}
            path = Path(folder) / chart_name(dataset, page_of(dataset))
            written.append(cost_chart(dataset, points, path, families))
    return written


def render_page(by_dataset, runs_shown):
    """The leaderboard page of one or more datasets' records."""
    lines = [
        "# Leaderboard",
        "",
        f"Rendered by `python -m recbole_mgformer.benchmark` from `{runs_shown}/<dataset>/*.json`. "
        "Test metrics are mean ± the 95% confidence interval over seeds (Student t; the value alone for one "
        "seed), at the epoch with the best validation NDCG@20 (early stopping); best in bold. A verdict compares "
        "an MGFormer row with the best other model (of its embedding size, except in an equal-budget search, "
        "which tunes it) by a paired Wilcoxon signed-rank test over users' test NDCG@20 (p < 0.05: ahead or "
        'behind; else level), and an "Against each model:" line sets it against every other model of the '
        "section by the same test (mean difference, p): each MGFormer row in an equal-budget search, the best "
        'MGFormer row at fixed settings; an "Attention:" line compares an MGFormer '
        'row with the same entry without attention, an "Ablation:" line a Table 3 ablation with the MGFormer '
        'it changes, a "Filter:" line a row with a filter residual with the same entry without it. '
        "Protocols: `properties/dataset/<dataset>.yaml`. Paper or published columns: "
        "`properties/published/<dataset>.yaml`, with their sources and how they were selected under each table; "
        '"vs" is ours / theirs - 1. "fit s": seconds to fit, the model\'s construction (where recorded) and '
        "its training up to and including the best epoch, without validation or the epochs after the best, "
        'on the machines of the "Runs:" line (often two runs sharing two cores: orders of magnitude, not a '
        "speed benchmark). \"parameters\": a trained model's trainable parameters, a closed-form model's stored "
        "values (dense entries and sparse nonzeros it keeps to score, the interaction matrix included; blank in "
        "its records written before they were counted).",
        "",
        'Rows are shown by short names (`names.yaml` beside the records); each row\'s "settings" link opens its '
        'record, with the full settings. "MGFormer tokens": MGFormer without its attention layer (`attention: '
        "False`); \"+ ChebyCF (0.5)\": a training-free filter's scores added to the model's with weight 0.5; "
        '"(test-picked)": that weight was chosen on the test items the row is scored on (the `-full` protocols '
        "have no other held-out set), so the row's lead is no clean result.",
        "",
    ]
    mixed = defaults_first_note([r for records in by_dataset.values() for r in records])
    lines += [mixed, ""] if mixed else []
    return "\n".join(lines + [render_dataset(dataset, by_dataset[dataset]) for dataset in sorted(by_dataset)])
