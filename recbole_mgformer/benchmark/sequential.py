"""The sequential table: leave-one-out, full ranking, Recall, MRR and NDCG at 5 and 10 over seeds, one section per
dataset (EAGPS against SASRec and GRU4Rec, which the runner trains as this project's subclasses of RecBole's models:
same losses and distributions, faster steps; ``model/sequential_recommender/``)."""

import statistics

from recbole_mgformer.benchmark.datasets import untuned_heading
from recbole_mgformer.benchmark.entries import ablation_variants
from recbole_mgformer.benchmark.general_verdicts import short_verdict
from recbole_mgformer.benchmark.sections import defaults_first_note, sections
from recbole_mgformer.benchmark.stats import format_ci, mean_ci, paired_verdict, per_user_by_seed, verdict_text
from recbole_mgformer.records import by_variant, mean_std, provenance

HEADLINE = ("recall@10", "ndcg@10")
METRICS = ("recall@5", "recall@10", "mrr@5", "mrr@10", "ndcg@5", "ndcg@10")
ORDER = ("EAGPS", "SASRec", "GRU4Rec")  # the paper's model first, then its baselines
SHOWN = {"recall": "Recall", "mrr": "MRR", "ndcg": "NDCG"}
PAIRED_METRIC = "ndcg@10"  # each test user's, stored beside a run's record (runs.PER_USER_METRICS)
TUNED_NOTE = (
    "In a section tuned with the same budget, every model had the same random search (trials, ASHA grace, "
    "epoch cap, search seed) over `properties/hyper/<model>.yaml`, then each seed trained the best "
    "configuration with early stopping on valid NDCG@10; cells are mean ± the 95% confidence interval "
    'over seeds (Student t). "at cap": seeds whose best epoch came so late that the epoch cap, not early '
    "stopping, ended them (a cap too low for that row). A verdict sets EAGPS against the best other model "
    "by a paired Wilcoxon signed-rank test over (seed, user) test NDCG@10 (p < 0.05: ahead or behind; else "
    'level); "Against each model:" against every other model by the same test. "Ablation:" sets a variant of '
    'the paper\'s Table 5 against the tuned EAGPS; "Protocol:" a row trained under `train_protocol: sequence` '
    "(whole windows, a loss at every position; `docs/models.md`) at its model's tuned settings against the same "
    "model under RecBole's prefix protocol; "
    '"Precision:" a row trained at `precision: bf16` against the same row at fp32. Such rows take no part in '
    "the comparison of models."
)


def _ordered(groups):
    rank = {model: i for i, model in enumerate(ORDER)}
    return sorted(groups, key=lambda n: (rank.get(groups[n][0]["model"], len(rank)), n))


def _header(metrics_cell):
    return (
        ["variant", "seeds", "valid NDCG@10"]
        + [f"test {SHOWN[m.split('@')[0]]}@{m.split('@')[1]}" for m in METRICS]
        + metrics_cell
    )


def _plain_table(records):
    """Rows of runs not from an equal-budget search: mean ± standard deviation over seeds."""
    header = _header(["minutes"])
    rows = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    groups = by_variant(records)
    for name in _ordered(groups):
        group = groups[name]
        cells = [mean_std([r["valid"]["ndcg@10"] for r in group])]
        cells += [mean_std([r["test"][metric] for r in group]) for metric in METRICS]
        minutes = statistics.mean(r["seconds"] for r in group) / 60
        rows.append(f"| {name} | {len(group)} | " + " | ".join(cells) + f" | {minutes:.1f} |")
    return rows


def _tuned_table(records):
    """Rows of an equal-budget search's runs: mean ± 95% interval, best epoch, cap and how many seeds hit it, and
    the verdict lines."""
    header = _header(["best epoch", "epoch cap", "at cap", "minutes"])
    rows = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    groups = by_variant(records)
    for name in _ordered(groups):
        group = groups[name]
        cells = [format_ci(*mean_ci([r["valid"]["ndcg@10"] for r in group]))]
        cells += [format_ci(*mean_ci([r["test"][metric] for r in group])) for metric in METRICS]
        caps = sorted({r["epoch_cap"] for r in group if r.get("epoch_cap") is not None})
        cells += [
            f"{statistics.mean(r['best_epoch'] for r in group):.0f}",
            "/".join(map(str, caps)),
            f"{sum(bool(r.get('best_epoch_at_cap')) for r in group)} of {len(group)}",
            f"{statistics.mean(r['seconds'] for r in group) / 60:.1f}",
        ]
        rows.append(f"| {name} | {len(group)} | " + " | ".join(cells) + " |")
    verdicts = verdict_lines(groups)
    return rows + ([""] + verdicts if verdicts else [])


# Rows that depart from another row by one setting and are judged against it, not against the other models:
# override -> (its value in the departing row, the line's label)
DEPARTURES = {"train_protocol": ("sequence", "Protocol"), "precision": ("bf16", "Precision")}


def departure_base(group, groups, key):
    """The row a row departing by ``key`` (:data:`DEPARTURES`) departs from: the same model and other overrides
    without that setting (its name in ``groups``), or None (not such a row, or no such row)."""
    overrides = dict(group[0].get("overrides") or {})
    if str(overrides.pop(key, None)) != DEPARTURES[key][0]:
        return None
    return next(
        (
            name
            for name, other in groups.items()
            if other[0]["model"] == group[0]["model"] and (other[0].get("overrides") or {}) == overrides
        ),
        None,
    )


def is_departure(group):
    overrides = group[0].get("overrides") or {}
    return any(str(overrides.get(key)) == value for key, (value, _) in DEPARTURES.items())


def verdict_lines(groups):
    """Each row of the paper's model (``ORDER[0]``) against the best other model by mean test NDCG@10, then
    against every other model, by the paired test over (seed, user) test NDCG@10; each ablation against the tuned
    model; each ``train_protocol: sequence`` row against its row under RecBole's protocol and each ``precision:
    bf16`` row against its fp32 row (:data:`DEPARTURES`). Ablations and departures are judged only against the row
    they depart from: they take no part in the comparison of models."""
    mean = {name: statistics.mean(r["test"][PAIRED_METRIC] for r in group) for name, group in groups.items()}
    values = {name: per_user_by_seed(group) for name, group in groups.items()}
    # rows are matched by their records' own names (``full_variant``), as the table may show a short one
    # (results/names.yaml)
    full = {name: group[0].get("full_variant", name) for name, group in groups.items()}
    ablations = set(ablation_variants(ORDER[0])) - {ORDER[0]}
    compared = {name for name, group in groups.items() if not is_departure(group) and full[name] not in ablations}
    others = sorted((n for n in compared if groups[n][0]["model"] != ORDER[0]), key=lambda n: -mean[n])
    lines = []
    for name in _ordered(groups):
        if name not in compared or groups[name][0]["model"] != ORDER[0] or not others:
            continue
        verdicts = {other: paired_verdict(values[name], values[other]) for other in others}
        if verdicts[others[0]] is not None:
            lines.append("Verdict: " + verdict_text(name, others[0], verdicts[others[0]], metric=PAIRED_METRIC))
        parts = [short_verdict(other, v) for other, v in verdicts.items() if v is not None]
        if len(others) > 1 and parts:
            lines.append(f"Against each model: {name} is " + "; ".join(parts) + ".")
    # the paper's model as tuned, which its ablations depart from
    base = next((name for name in groups if full[name] == ORDER[0]), None)
    for name in _ordered(groups):
        if base is not None and name != base and full[name] in ablations:
            verdict = paired_verdict(values[name], values[base])
            if verdict is not None:
                lines.append("Ablation: " + verdict_text(name, base, verdict, metric=PAIRED_METRIC))
    for key, (_, label) in DEPARTURES.items():
        for name in _ordered(groups):
            base_row = departure_base(groups[name], groups, key)
            verdict = None if base_row is None else paired_verdict(values[name], values[base_row])
            if verdict is not None:
                lines.append(f"{label}: " + verdict_text(name, base_row, verdict, metric=PAIRED_METRIC))
    return lines


def render_dataset(dataset, records):
    lines = [f"## {dataset}", "", f"Protocol: `properties/dataset/{dataset}.yaml`.", ""]
    parts = sections(records)
    if all(budget is None for budget, _ in parts):
        return lines + _plain_table(records) + [""]
    for budget, group in parts:
        if budget is None:
            lines += [f"### {untuned_heading(dataset)}", "", *_plain_table(group), ""]
        else:
            lines += [
                f"### Tuned with the same budget: {budget}",
                "",
                *_tuned_table(group),
                "",
                searches_line(group),
                "",
            ]
    return lines


def searches_line(records):
    """``Searches: EAGPS `results/tuning/...md`; ...``: the page of each model's search (its ablations and other
    departures were trained from the same search, so it is listed once)."""
    searches = sorted({(r["model"], r["tuning"]["search"]) for r in records if r.get("tuning")})
    return "Searches: " + "; ".join(f"{model} `{page}`" for model, page in searches) + "."


def render_page(by_dataset, runs_shown):
    records = [r for dataset in sorted(by_dataset) for r in by_dataset[dataset]]
    lines = [
        "# Sequential recommendation: EAGPS, SASRec, GRU4Rec",
        "",
        "Leave-one-out on each user's time-ordered history (last item: test, the one before: validation), "
        "every item ranked, the epoch with the best valid NDCG@10 tested. Each model runs with its defaults "
        "(`properties/model/EAGPS.yaml`; RecBole 1.2.1's own for SASRec and GRU4Rec); a variant's name lists "
        "the overrides it ran with (the commands below give every run's settings). Values are means ± standard "
        "deviation over seeds.",
        "",
        f"Records: `{runs_shown}/<dataset>/`.",
        "",
    ]
    if any(r.get("tuning") for r in records):
        lines += [TUNED_NOTE, ""]
    mixed = defaults_first_note(records)
    lines += [mixed, ""] if mixed else []
    for dataset in sorted(by_dataset):
        lines += render_dataset(dataset, by_dataset[dataset])
    commands = sorted({r["command"] for r in records if r.get("command")})
    lines += [
        "Commands: " + "; ".join(f"`{c}`" for c in commands) + ".",
        "",
        f"Runs: {provenance(records)}; seeds {sorted({r['seed'] for r in records})}.",
        "",
    ]
    return "\n".join(lines)
