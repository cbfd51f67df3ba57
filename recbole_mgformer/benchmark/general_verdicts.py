"""The verdicts under a general table: each MGFormer row against the best other model (and, in an equal-budget
search, every other model) and against the same entry without attention, a Table 3 ablation against the MGFormer it
changes, and a row with a filter residual against the same entry without it, each by a paired Wilcoxon signed-rank
test over users' test NDCG@20 (:mod:`recbole_mgformer.benchmark.stats`).
"""

from recbole_mgformer.benchmark.entries import ABLATION_OPTIONS
from recbole_mgformer.benchmark.names import chosen_on_scored_items
from recbole_mgformer.benchmark.stats import format_p, paired_verdict, per_user_by_seed, relation_text, verdict_text
from recbole_mgformer.model.mgformer.option_names import ATTENTION_OPTIONS, FILTER_RESIDUAL_OPTIONS


def is_deterministic_row(records):
    """A row whose runs every seed would repeat (records say ``deterministic``:
    :func:`recbole_mgformer.benchmark.datasets.same_for_every_seed`, a closed-form model on a fixed split): its
    one seed is the whole row."""
    return bool(records) and all(r.get("deterministic") for r in records)


def _per_user_by_seed(row):
    """``{seed: {user: NDCG@20}}`` of a row's records that stored per-user values, read once per row (each row is
    paired with several others)."""
    if "per_user" not in row:
        row["per_user"] = per_user_by_seed(row["records"])
    return row["per_user"]


def _paired_values(row, other):
    """Both rows' ``{seed: {user: NDCG@20}}`` for a paired test: a deterministic row's one seed stands for every
    seed of the other (any seed would have given the same values), so a 3-seed row is paired over its 3 seeds."""
    a, b = _per_user_by_seed(row), _per_user_by_seed(other)
    if len(b) == 1 and is_deterministic_row(other["records"]):
        b = dict.fromkeys(a or b, next(iter(b.values())))
    elif len(a) == 1 and is_deterministic_row(row["records"]):
        a = dict.fromkeys(b or a, next(iter(a.values())))
    return a, b


def paired_row_verdict(row, other):
    """``row`` against ``other`` by the paired test over users' test NDCG@20 (``stats.paired_verdict``), or None
    without per-user values to pair."""
    return paired_verdict(*_paired_values(row, other))


def _overrides(row):
    return row["records"][0].get("overrides")


def _schedule(row):
    return row["records"][0].get("probe_schedule")


def _mgformer_row(overrides, rows, like):
    """The MGFormer row of exactly these overrides and the schedule of the row ``like`` (a probe's control is a
    probe), or None."""
    return next(
        (
            row
            for row in rows
            if row["model"] == "MGFormer" and _overrides(row) == overrides and _schedule(row) == _schedule(like)
        ),
        None,
    )


def attention_control(row, rows):
    """The row of the same MGFormer entry without attention (and without MGFormer's ``ATTENTION_OPTIONS``, which
    change nothing then), or None: absent, or the row itself has no attention, or its records do not say their
    overrides (older scripts)."""
    overrides = _overrides(row)
    if row["model"] != "MGFormer" or overrides is None or overrides.get("attention") is False:
        return None
    wanted = {**{k: v for k, v in overrides.items() if k not in ATTENTION_OPTIONS}, "attention": False}
    return _mgformer_row(wanted, rows, row)


def _row_without(options, row, rows):
    """The MGFormer row of the same entry as ``row`` less its ``options``, or None (``row`` sets none of them)."""
    overrides = _overrides(row)
    if row["model"] != "MGFormer" or not overrides or not options & set(overrides):
        return None
    return _mgformer_row({k: v for k, v in overrides.items() if k not in options}, rows, row)


def ablation_base(row, rows):
    """The MGFormer row that a Table 3 ablation row departs from: the same entry without its ablated options
    (``entries.ABLATION_OPTIONS``), or None."""
    return _row_without(ABLATION_OPTIONS, row, rows)


def filter_control(row, rows):
    """The MGFormer row of the same entry without its filter residual (``FILTER_RESIDUAL_OPTIONS``), the tokens
    the filter's scores were added to, or None."""
    return _row_without(FILTER_RESIDUAL_OPTIONS, row, rows)


def _embedding_size(row):
    return row["records"][0].get("config", {}).get("embedding_size")


def best_other_model(row, others, same_size=True):
    """The best of ``others`` (by mean test NDCG@20) at the row's embedding size, as the paper compares models, or
    the best of all where the records do not say their size, no other row has it, or ``same_size`` is False (an
    equal-budget search tunes d like any other setting); None without others."""
    size = _embedding_size(row) if same_size else None
    of_size = [other for other in others if size is not None and _embedding_size(other) == size]
    pool = of_size or others
    return max(pool, key=lambda other: other["stats"]["ndcg@20"][0]) if pool else None


def short_verdict(other, verdict):
    """``**ahead** of XSimGCL (+0.0016, p = 0.0002)``: a verdict in a list whose test the line has named."""
    return f"{relation_text(other, verdict)} ({verdict['difference']:+.4f}, {format_p(verdict['p'])})"


def every_model_line(row, others):
    """One line: an MGFormer row against each other model of the section, best first, by the paired test; None
    with fewer than two others (the verdict line says it all) or no per-user values to pair."""
    if len(others) < 2:
        return None
    parts = []
    for other in others:
        verdict = paired_row_verdict(row, other)
        if verdict is not None:
            parts.append(short_verdict(other["variant"], verdict))
    return f"Against each model: {row['variant']} is " + "; ".join(parts) + "." if parts else None


TEST_PICKED_NOTE = (
    " Its filter weight was chosen on these same test items (the split has no other held-out set), so this is "
    "no clean result."
)


def test_picked_note(row):
    """The words a verdict on a hybrid row takes where its filter weight was chosen on the items it is scored on
    (:func:`~recbole_mgformer.benchmark.names.chosen_on_scored_items`); empty otherwise."""
    return TEST_PICKED_NOTE if any(chosen_on_scored_items(r) for r in row["records"]) else ""


def lead_row(rows):
    """The MGFormer row with the best mean test NDCG@20 among ``rows``, or None."""
    mgformer = [row for row in rows if row["model"] == "MGFormer"]
    return max(mgformer, key=lambda row: row["stats"]["ndcg@20"][0]) if mgformer else None


def verdict_lines(rows, same_size=True):
    """Each MGFormer row against the best other model (of its size with ``same_size``: :func:`best_other_model`),
    then each row with attention against its control without it, then each Table 3 ablation against the MGFormer it
    ablates, then each row with a filter residual against its entry without the filter, where the section has them,
    by the paired test over users. In an equal-budget search (``same_size`` False) each MGFormer row that is not an
    ablation is also set against every other model; at fixed settings the section's leading MGFormer row
    (:func:`lead_row`) is, whatever the others' sizes. So each section's table answers "is the MGFormer family ahead
    of every other row?" by itself."""
    others = [row for row in rows if row["model"] != "MGFormer"]
    lead = lead_row(rows)
    lines, every_lines, attention_lines, ablation_lines, filter_lines = [], [], [], [], []
    for row in rows:
        if row["model"] != "MGFormer":
            continue
        best_other = best_other_model(row, others, same_size)
        if best_other is not None:
            verdict = paired_row_verdict(row, best_other)
            if verdict is not None:
                lines.append(
                    "Verdict: " + verdict_text(row["variant"], best_other["variant"], verdict) + test_picked_note(row)
                )
        if row is lead if same_size else ablation_base(row, rows) is None:
            line = every_model_line(row, others)
            if line is not None:
                every_lines.append(line + test_picked_note(row))
        control = attention_control(row, rows)
        if control is not None:
            verdict = paired_row_verdict(row, control)
            if verdict is not None:
                attention_lines.append("Attention: " + verdict_text(row["variant"], control["variant"], verdict))
        base = ablation_base(row, rows)
        if base is not None:
            verdict = paired_row_verdict(row, base)
            if verdict is not None:
                ablation_lines.append("Ablation: " + verdict_text(row["variant"], base["variant"], verdict))
        unfiltered = filter_control(row, rows)
        if unfiltered is not None:
            verdict = paired_row_verdict(row, unfiltered)
            if verdict is not None:
                filter_lines.append(
                    "Filter: " + verdict_text(row["variant"], unfiltered["variant"], verdict) + test_picked_note(row)
                )
    return lines + every_lines + attention_lines + ablation_lines + filter_lines
