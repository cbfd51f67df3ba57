"""The general (top-k) leaderboard, like the MGFormer paper's Table 2: test Recall@20 / NDCG@20 over seeds, best
in bold, the paper's numbers beside, the best model's gain over the best other one."""

import statistics

from recbole_mgformer.records import by_variant

HEADLINE = ("recall@20", "ndcg@20")  # what a finished run prints
METRICS = ("recall@20", "ndcg@20")
# The MGFormer paper's Table 2 (Recall@20, NDCG@20) and, for its ablations, Table 3, by variant name,
# under the protocol of properties/dataset/<name>.yaml.
PAPER = {
    "amazon-beauty": {
        "BPR": (0.1153, 0.0534), "LightGCN": (0.1201, 0.0581), "SGL": (0.1228, 0.0644),
        "SimGCL": (0.1367, 0.0682), "DirectAU": (0.1465, 0.0710), "MGFormer": (0.1531, 0.0748),
        "MGFormer structural_encoding=none": (0.1413, 0.0712), "MGFormer degree_mask=none": (0.1501, 0.0739),
        "MGFormer degree_mask=adjacency": (0.1318, 0.0674), "MGFormer feature_map=elu": (0.1507, 0.0740),
        "MGFormer feature_map=focused": (0.1514, 0.0742),
    },
}


def _mean_std(values):
    if len(values) == 1:
        return values[0], None
    return statistics.mean(values), statistics.stdev(values)


def _cell(mean, std, bold):
    text = f"{mean:.4f}" + (f" ± {std:.4f}" if std is not None else "")
    return f"**{text}**" if bold else text


def _mean_of(group, key, spec, scale=1):
    """The mean of a field over a row's records, formatted; empty where no record has it (older scripts' records)."""
    values = [r[key] * scale for r in group if r.get(key) is not None]
    return format(statistics.mean(values), spec) if values else ""


def _columns(paper, best):
    """(header, cell of a row) of every column; a column no row fills is left out of the table."""
    def metric(m):
        return lambda row: _cell(*row["stats"][m], bold=row["stats"][m][0] == best[m])

    def paper_cell(index):
        return lambda row: f"{paper[row['variant']][index]:.4f}" if row["variant"] in paper else ""

    return [
        ("model", lambda row: row["variant"]), ("seeds", lambda row: str(len(row["records"]))),
        ("test Recall@20", metric("recall@20")), ("test NDCG@20", metric("ndcg@20")),
        ("valid NDCG@20", lambda row: f"{row['valid']:.4f}"),
        ("paper Recall@20", paper_cell(0)), ("paper NDCG@20", paper_cell(1)),
        ("best epoch", lambda row: _mean_of(row["records"], "best_epoch", ".0f")),
        ("epochs", lambda row: _mean_of(row["records"], "epochs", ".0f")),
        ("s / epoch", lambda row: _mean_of(row["records"], "train_seconds_per_epoch", ".1f")),
        ("minutes", lambda row: _mean_of(row["records"], "seconds", ".1f", scale=1 / 60)),
        ("parameters", lambda row: f"{row['records'][0]['parameters']:,}" if "parameters" in row["records"][0] else ""),
    ]


def render_dataset(dataset, records):
    """One markdown table like the paper's Table 2 for one dataset's records."""
    rows = []
    for variant, group in by_variant(records).items():
        stats = {m: _mean_std([r["test"][m] for r in group]) for m in METRICS}
        rows.append({"variant": variant, "model": group[0]["model"], "records": group, "stats": stats,
                     "valid": _mean_std([r["valid"]["ndcg@20"] for r in group])[0]})
    rows.sort(key=lambda row: -row["stats"]["ndcg@20"][0])
    best = {m: max(row["stats"][m][0] for row in rows) for m in METRICS}
    columns = [(header, cell) for header, cell in _columns(PAPER.get(dataset, {}), best)
               if any(cell(row) for row in rows)]
    lines = [f"## {dataset}", "", "| " + " | ".join(header for header, _ in columns) + " |",
             "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(row) for _, cell in columns) + " |" for row in rows]
    lines.append("")
    for metric in METRICS:
        top = max(rows, key=lambda row: row["stats"][metric][0])
        others = [row for row in rows if row["model"] != top["model"]]
        if others:
            runner_up = max(others, key=lambda row: row["stats"][metric][0])
            gain = 100 * (top["stats"][metric][0] / runner_up["stats"][metric][0] - 1)
            lines.append(f"Best test {metric}: {top['variant']}, {gain:+.2f}% over the best other model "
                         f"({runner_up['variant']}).")
    tuned = sorted({(r["model"], r["tuned_config"]) for r in records if r.get("tuned_config")})
    if tuned:
        lines += ["", "Tuned for this dataset, over each model's defaults: "
                  + "; ".join(f"{model} (and its variants) `{path}`" for model, path in tuned) + "."]
    machines = sorted({(r["machine"], r["commit"]) for r in records})
    lines += ["", "Runs: " + "; ".join(f"{m} at {c}" for m, c in machines)
              + f"; seeds {sorted({r['seed'] for r in records})}.", ""]
    return "\n".join(lines)


def render_page(by_dataset, runs_shown):
    """The leaderboard page of one or more datasets' records."""
    lines = ["# Leaderboard", "",
             f"Rendered by `python -m recbole_mgformer.benchmark` from `{runs_shown}/<dataset>/*.json`. Test metrics are "
             "mean ± std over seeds, at the epoch with the best validation NDCG@20 (early stopping); best in bold. "
             "Protocols: `properties/dataset/<dataset>.yaml`. Paper columns: the MGFormer paper's Table 2, "
             "and its Table 3 for MGFormer's ablations.", ""]
    return "\n".join(lines + [render_dataset(dataset, by_dataset[dataset]) for dataset in sorted(by_dataset)])
