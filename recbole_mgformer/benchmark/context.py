"""The context-aware table, the CSA paper's: test AUC and LogLoss over seeds, one column per training share rho
(each rho is a dataset of its own, ``ml-100k-ctx-<rho>``), the best mean of a column in bold."""

import statistics

from recbole_mgformer.benchmark.datasets import OLDER_RUNS_HEADING, training_share
from recbole_mgformer.benchmark.general_verdicts import short_verdict
from recbole_mgformer.benchmark.sections import defaults_first_note, sections
from recbole_mgformer.benchmark.stats import format_ci, mean_ci, paired_bootstrap, per_row_by_seed, verdict_text
from recbole_mgformer.records import mean_std, provenance

HEADLINE = ("auc", "logloss")
METRICS = (("auc", "AUC", max), ("logloss", "LogLoss", min))  # (key, shown name, which is best)
# the paper's model, the baselines of its paper (IMC, NeuMF over features), then RecBole's
ORDER = ("CSA", "IMC", "ContextNeuMF", "LR", "FM", "DeepFM", "AutoInt")


TUNED_NOTE = (
    "In a section tuned with the same budget, every model had the same random search (trials, ASHA grace, "
    "epoch cap, search seed) over `properties/hyper/<model>.yaml`, then each seed trained the best "
    "configuration with early stopping on valid AUC; cells are mean ± the 95% confidence interval over "
    "seeds (Student t). A verdict sets CSA against the best other model of a rho (by mean test AUC) by a "
    "paired bootstrap over the test rows (the same rows resampled for both models, each seed's split its "
    'own; p < 0.05: ahead or behind; else level), of test AUC and of test LogLoss; "Against each model:" '
    "sets it against every other model by the same bootstrap of AUC."
)


def _interval(values):
    return format_ci(*mean_ci(values))


def metric_table(by_dataset, key, best, cell=mean_std):
    """Rows: variants; columns: rho; cells: test mean ± std over seeds (``cell``), the best mean of a column in
    bold."""
    rho = {dataset: training_share(dataset) for dataset in by_dataset}
    columns = sorted(by_dataset, key=lambda dataset: rho[dataset])
    groups = {}
    for dataset in columns:
        for record in by_dataset[dataset]:
            groups.setdefault((record["variant"], dataset), []).append(record["test"][key])
    variants = [v for v in ORDER if any(v == g[0] for g in groups)]
    variants += sorted({v for v, _ in groups} - set(variants))
    winners = {
        d: best((statistics.mean(values), v) for (v, dd), values in groups.items() if dd == d)[1] for d in columns
    }
    rows = ["| model | " + " | ".join(f"rho = {rho[d]:g}" for d in columns) + " |", "|---" * (len(columns) + 1) + "|"]
    for variant in variants:
        cells = []
        for dataset in columns:
            values = groups.get((variant, dataset))
            text = cell(values) if values else "–"
            cells.append(f"**{text}**" if values and winners[dataset] == variant else text)
        rows.append(f"| {variant} | " + " | ".join(cells) + " |")
    return rows


def cap_line(by_dataset):
    """Which rows' best epoch hit the epoch cap (``runs.hit_cap``), or that none did."""
    hits = sorted(
        {
            (r["variant"], f"rho = {training_share(d):g}")
            for d, records in by_dataset.items()
            for r in records
            if r.get("best_epoch_at_cap")
        }
    )
    caps = sorted({r["epoch_cap"] for records in by_dataset.values() for r in records if r.get("epoch_cap")})
    text = "; ".join(f"{v} at {rho}" for v, rho in hits) if hits else "none"
    return f"Epoch cap {'/'.join(map(str, caps))}; runs whose best epoch came too late for early stopping: {text}."


def verdict_lines(by_dataset):
    """Per rho: each CSA row against the best other model by mean test AUC (bootstrap of AUC and of LogLoss),
    then against every other model (bootstrap of AUC)."""
    lines = []
    for dataset in sorted(by_dataset, key=training_share):
        groups = {}
        for record in by_dataset[dataset]:
            groups.setdefault(record["variant"], []).append(record)
        mean = {name: statistics.mean(r["test"]["auc"] for r in group) for name, group in groups.items()}
        rows = {name: per_row_by_seed(group) for name, group in groups.items()}
        others = sorted((n for n in groups if groups[n][0]["model"] != ORDER[0]), key=lambda n: -mean[n])
        for name in sorted(n for n in groups if groups[n][0]["model"] == ORDER[0]):
            if not others:
                continue
            prefix = f"rho = {training_share(dataset):g}: "
            for metric in ("auc", "logloss"):
                verdict = paired_bootstrap(rows[name], rows[others[0]], metric)
                if verdict is not None:
                    lines.append(prefix + "Verdict: " + verdict_text(name, others[0], verdict))
            if len(others) > 1:
                parts = [
                    short_verdict(other, v)
                    for other in others
                    if (v := paired_bootstrap(rows[name], rows[other], "auc")) is not None
                ]
                if parts:
                    lines.append(prefix + f"Against each model (AUC): {name} is " + "; ".join(parts) + ".")
    return lines


def tuned_sections(by_dataset):
    """The lines of each equal-budget search's section (by budget), then the older runs', or None when no record
    comes from a search (the page as before)."""
    budgets = {}
    for dataset, records in by_dataset.items():
        for budget, group in sections(records):
            budgets.setdefault(budget, {})[dataset] = group
    if set(budgets) == {None}:
        return None
    lines = [TUNED_NOTE, ""]
    mixed = defaults_first_note([r for records in by_dataset.values() for r in records])
    lines += [mixed, ""] if mixed else []
    for budget in sorted(budgets, key=lambda b: (b is None, b or "")):
        part = budgets[budget]
        if budget is None:
            lines += [f"## {OLDER_RUNS_HEADING}", ""]  # one page across datasets: no dataset names it
            for key, name, best in METRICS:
                lines += [f"### Test {name}", "", *metric_table(part, key, best), ""]
            continue
        lines += [f"## Tuned with the same budget: {budget}", ""]
        for key, name, best in METRICS:
            lines += [f"### Test {name}", "", *metric_table(part, key, best, cell=_interval), ""]
        lines += [cap_line(part), ""]
        searches = sorted({(r["variant"], r["tuning"]["search"]) for records in part.values() for r in records})
        lines += ["Searches: " + "; ".join(f"{variant} `{page}`" for variant, page in searches) + ".", ""]
        verdicts = verdict_lines(part)
        lines += [line for verdict in verdicts for line in (verdict, "")]
    return lines


def _overrides(record):
    """The settings a run had beyond its model's defaults that its variant's name does not already show."""
    settings = {**record.get("settings", {}), **record["overrides"]}
    return {k: v for k, v in settings.items() if f"{k}=" not in record["variant"]}


def render_page(by_dataset, runs_shown):
    records = [r for dataset in sorted(by_dataset) for r in by_dataset[dataset]]
    seeds = sorted({r["seed"] for r in records})
    overrides = sorted({str(shown) for r in records if (shown := _overrides(r))})
    lines = [
        "# Context-aware models on ml-100k (CSA's protocol)",
        "",
        "Protocol (`properties/dataset/ml-100k-ctx-<rho>.yaml`): the real ml-100k "
        "user features (user_id, age, gender, occupation, zip_code) and item features (item_id, release_year, "
        "genres); label 1 for rating >= 4; all interactions split at random, (train + valid) : test = rho : "
        "1 - rho with train : valid = 7 : 3; the epoch with the best valid AUC is tested on every labelled test "
        "pair (epoch cap: 20 for the older runs; each tuned section states its own). In the older runs CSA ran "
        "with `properties/model/CSA.yaml` and the others with RecBole's defaults. Cells: test mean ± std over "
        + "seeds "
        + ", ".join(map(str, seeds))
        + " (the seed also draws "
        "the split); best mean per column in bold.",
        "",
    ]
    if overrides:
        lines += ["Overrides: " + "; ".join(overrides), ""]
    tuned = tuned_sections(by_dataset)
    if tuned is not None:
        lines += tuned
    else:
        for key, name, best in METRICS:
            lines += [f"## Test {name}", "", *metric_table(by_dataset, key, best), ""]
    minutes = {}
    for record in records:
        minutes.setdefault(record["variant"], []).append(record["seconds"] / 60)
    lines += ["Minutes per run: " + ", ".join(f"{m} {statistics.mean(v):.1f}" for m, v in minutes.items()) + ".", ""]
    commands = sorted({r["command"] for r in records if r.get("command")})
    lines += [
        "Produced by " + ", ".join(f"`{c}`" for c in commands) + f" (records in `{runs_shown}/<dataset>/`).",
        "",
        f"Runs: {provenance(records)}.",
        "",
    ]
    return "\n".join(lines)
