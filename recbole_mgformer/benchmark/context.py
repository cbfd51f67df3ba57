"""The context-aware table, the CSA paper's: test AUC and LogLoss over seeds, one column per training share rho
(each rho is a dataset of its own, ``ml-100k-ctx-<rho>``), the best mean of a column in bold."""

import statistics

from recbole_mgformer.benchmark.datasets import training_share
from recbole_mgformer.records import mean_std, provenance

HEADLINE = ("auc", "logloss")
METRICS = (("auc", "AUC", max), ("logloss", "LogLoss", min))  # (key, shown name, which is best)
ORDER = ("CSA", "LR", "FM", "DeepFM", "AutoInt")  # the paper's model first, then its baselines


def metric_table(by_dataset, key, best):
    """Rows: variants; columns: rho; cells: test mean ± std over seeds, the best mean of a column in bold."""
    rho = {dataset: training_share(dataset) for dataset in by_dataset}
    columns = sorted(by_dataset, key=lambda dataset: rho[dataset])
    groups = {}
    for dataset in columns:
        for record in by_dataset[dataset]:
            groups.setdefault((record["variant"], dataset), []).append(record["test"][key])
    variants = [v for v in ORDER if any(v == g[0] for g in groups)]
    variants += sorted({v for v, _ in groups} - set(variants))
    winners = {d: best((statistics.mean(values), v) for (v, dd), values in groups.items() if dd == d)[1]
               for d in columns}
    rows = ["| model | " + " | ".join(f"rho = {rho[d]:g}" for d in columns) + " |", "|---" * (len(columns) + 1) + "|"]
    for variant in variants:
        cells = []
        for dataset in columns:
            values = groups.get((variant, dataset))
            cell = mean_std(values) if values else "–"
            cells.append(f"**{cell}**" if values and winners[dataset] == variant else cell)
        rows.append(f"| {variant} | " + " | ".join(cells) + " |")
    return rows


def _overrides(record):
    """The settings a run had beyond its model's defaults that its variant's name does not already show."""
    settings = {**record.get("settings", {}), **record["overrides"]}
    return {k: v for k, v in settings.items() if f"{k}=" not in record["variant"]}


def render_page(by_dataset, runs_shown):
    records = [r for dataset in sorted(by_dataset) for r in by_dataset[dataset]]
    seeds = sorted({r["seed"] for r in records})
    overrides = sorted({str(shown) for r in records if (shown := _overrides(r))})
    lines = ["# Context-aware models on ml-100k (CSA's protocol)", "",
             "Protocol (`properties/dataset/ml-100k-ctx-<rho>.yaml`): the real ml-100k "
             "user features (user_id, age, gender, occupation, zip_code) and item features (item_id, release_year, "
             "genres); label 1 for rating >= 4; all interactions split at random, (train + valid) : test = rho : "
             "1 - rho with train : valid = 7 : 3; at most 20 epochs, the epoch with the best valid AUC is tested on "
             "every labelled test pair. CSA runs with `properties/model/CSA.yaml`, the others with RecBole's "
             "defaults. Cells: test mean ± std over seeds " + ", ".join(map(str, seeds)) + " (the seed also draws "
             "the split); best mean per column in bold.", ""]
    if overrides:
        lines += ["Overrides: " + "; ".join(overrides), ""]
    for key, name, best in METRICS:
        lines += [f"## Test {name}", "", *metric_table(by_dataset, key, best), ""]
    minutes = {}
    for record in records:
        minutes.setdefault(record["variant"], []).append(record["seconds"] / 60)
    lines += ["Minutes per run: " + ", ".join(f"{m} {statistics.mean(v):.1f}" for m, v in minutes.items()) + ".", ""]
    commands = sorted({r["command"] for r in records if r.get("command")})
    lines += ["Produced by " + ", ".join(f"`{c}`" for c in commands) + f" (records in `{runs_shown}/<dataset>/`).", "",
              f"Runs: {provenance(records)}.", ""]
    return "\n".join(lines)
