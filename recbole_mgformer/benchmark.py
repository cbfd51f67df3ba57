"""Leaderboards: train models on datasets over seeds, one JSON record per run, then render the tables.

    python -m recbole_mgformer.benchmark --models MGFormer,DirectAU,SimGCL,XSimGCL,SGL,LightGCN,BPR \\
        --datasets amazon-beauty --seeds 0,1,2
    python -m recbole_mgformer.benchmark --models "MGFormer-ablations" --datasets amazon-beauty --seeds 0
    python -m recbole_mgformer.benchmark --render-only

A model entry is a name, a name with overrides in brackets (``MGFormer[degree_mask=none; feature_map=elu]``),
or ``MGFormer-ablations`` for the paper's Table 3 ablations and ``attention: False``. Each run writes
``results/runs/<dataset>/<variant>-seed<seed>.json``; a run whose record exists is skipped, so a long
benchmark resumes across sessions and machines. ``results/leaderboard.md`` is rendered from all records.
"""

import argparse
import json
import logging
import re
import statistics
import sys
import time
from pathlib import Path

from recbole.utils import init_logger, init_seed

from recbole_mgformer.cli import parse_overrides
from recbole_mgformer.data.sources import ensure_dataset
from recbole_mgformer.defaults import benchmark_config_file
from recbole_mgformer.evaluation import (
    GROUP_RULE,
    GROUPS,
    metrics_by_group,
    popularity_groups,
    training_counts,
)
from recbole_mgformer.quick_start import build_config, prepare
from recbole_mgformer.records import (
    display_path,
    git_commit,
    machine,
    notes_lines,
    package_versions,
    read_records,
    write_record,
)
from recbole_mgformer.resume import fit_resumably, forget_resume_state
from recbole_mgformer.trainer import plain_value

ROOT = Path(__file__).resolve().parents[1]
METRICS = ("recall@20", "ndcg@20")
ABLATIONS = [
    "MGFormer",
    "MGFormer[structural_encoding=none]",
    "MGFormer[degree_mask=none]",
    "MGFormer[degree_mask=adjacency]",
    "MGFormer[feature_map=elu]",
    "MGFormer[feature_map=focused]",
    "MGFormer[attention=False]",
]
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


def split_models(text):
    """Split on commas outside brackets, and expand ``MGFormer-ablations``."""
    entries, depth, current = [], 0, ""
    for char in text:
        depth += {"[": 1, "]": -1}.get(char, 0)
        if char == "," and depth == 0:
            entries.append(current.strip())
            current = ""
        else:
            current += char
    entries.append(current.strip())
    expanded = []
    for entry in filter(None, entries):
        expanded += ABLATIONS if entry.lower() == "mgformer-ablations" else [entry]
    return list(dict.fromkeys(expanded))


def parse_entry(entry):
    """``'MGFormer[degree_mask=none; n_heads=2]'`` -> ``('MGFormer', {'degree_mask': 'none', 'n_heads': 2})``."""
    match = re.fullmatch(r"\s*([A-Za-z0-9_]+)\s*(?:\[(.*)\])?\s*", entry)
    if not match:
        raise ValueError(f"model entry {entry!r} must be NAME or NAME[key=value; key=value]")
    name, inside = match.groups()
    overrides = {}
    if inside:
        pairs = [p.strip() for p in inside.split(";") if p.strip()]
        bad = [p for p in pairs if "=" not in p]
        if bad:
            raise ValueError(f"model entry {entry!r}: {bad[0]!r} is not key=value")
        overrides = parse_overrides([f"--{p}" for p in pairs])
    return name, overrides


def variant_name(model, overrides):
    if not overrides:
        return model
    return model + " " + " ".join(f"{k}={v}" for k, v in overrides.items())


def slug(text):
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower()


def tuned_config_files(model, dataset, config_files):
    """The benchmark's tuned file for (model, dataset) first, so the user's files and overrides win over it."""
    tuned = benchmark_config_file(model, dataset)
    return ([tuned] if tuned else []) + list(config_files or [])


def setup_run(model, dataset, config_files, config_dict):
    """Config, model, trainer and (train, valid, test) data of one run, seeded, with RecBole's logger set up."""
    config, _ = build_config(model, dataset, config_files, config_dict)
    init_seed(config["seed"], config["reproducibility"])
    logging.getLogger().handlers.clear()  # RecBole's init_logger only configures a bare root logger
    init_logger(config)
    return config, *prepare(config)


def _setup(model, overrides, dataset, seed, data_path, config_files, extra, checkpoint):
    ensure_dataset(dataset, data_path)
    config_files = tuned_config_files(model, dataset, config_files)
    config_dict = {"seed": seed, "data_path": data_path, "checkpoint_dir": str(checkpoint.parent),
                   "show_progress": False, **extra, **overrides}
    return setup_run(model, dataset, config_files, config_dict)


def popularity_metrics(trainer, train_data, test_data):
    """Test Recall@20 / NDCG@20 by item popularity group (Fig. 2), for the weights the trainer holds."""
    return metrics_by_group(trainer, test_data, popularity_groups(training_counts(train_data)), k=20)


def run_one(model, overrides, dataset, seed, runs_dir, data_path, config_files, extra, checkpoint_dir):
    """Train and test one (variant, dataset, seed); returns the record, or None when it already exists.

    The run's checkpoint (its best epoch so far) lives at ``checkpoint_dir/<dataset>/<variant>-seed<seed>.pth``;
    an interrupted run resumes from it. A finished record without popularity-group metrics gets them
    from that checkpoint.
    """
    variant = variant_name(model, overrides)
    record_path = Path(runs_dir) / dataset / f"{slug(variant)}-seed{seed}.json"
    checkpoint = Path(checkpoint_dir) / dataset / f"{slug(variant)}-seed{seed}.pth"
    checkpoint.parent.mkdir(parents=True, exist_ok=True)
    if record_path.exists():
        record = json.loads(record_path.read_text())
        if "test_popularity" in record or not checkpoint.exists():
            return None
        _, _, trainer, (train_data, _, test_data) = _setup(model, overrides, dataset, seed, data_path,
                                                           config_files, extra, checkpoint)
        trainer.evaluate(test_data, load_best_model=True, model_file=str(checkpoint))
        record.update(test_popularity=popularity_metrics(trainer, train_data, test_data), popularity_rule=GROUP_RULE)
        write_record(record_path, record)
        print(f"added popularity-group metrics to {record_path}", flush=True)
        return None

    commit = git_commit(ROOT)  # the code this process imported, however long the run takes
    config, model_instance, trainer, (train_data, valid_data, test_data) = _setup(
        model, overrides, dataset, seed, data_path, config_files, extra, checkpoint)
    started = time.perf_counter()
    best_valid_result, timer = fit_resumably(trainer, train_data, valid_data, checkpoint,
                                             f"{variant} on {dataset}, seed {seed}", config["show_progress"])
    fit_seconds = time.perf_counter() - started
    started = time.perf_counter()
    test_result = trainer.evaluate(test_data, load_best_model=True, show_progress=config["show_progress"])
    test_seconds = time.perf_counter() - started
    record = {
        "dataset": dataset, "model": model, "variant": variant, "overrides": overrides, "seed": seed,
        "tuned_config": display_path(benchmark_config_file(model, dataset), ROOT),
        "valid": dict(best_valid_result), "test": dict(test_result),
        "test_popularity": popularity_metrics(trainer, train_data, test_data), "popularity_rule": GROUP_RULE,
        **timer.summary(config["valid_metric_bigger"]),
        "test_seconds": round(test_seconds, 3), "fit_seconds": round(fit_seconds, 1),
        "parameters": sum(p.numel() for p in model_instance.parameters() if p.requires_grad),
        "device": str(config["device"]), "machine": machine(),
        "commit": commit, "versions": package_versions(),
        "config": plain_value({k: v for k, v in config.final_config_dict.items() if not k.startswith("_")}),
    }
    write_record(record_path, record)
    forget_resume_state(checkpoint)
    return record


def _mean_std(values):
    if len(values) == 1:
        return values[0], None
    return statistics.mean(values), statistics.stdev(values)


def _cell(mean, std, bold):
    text = f"{mean:.4f}" + (f" ± {std:.4f}" if std is not None else "")
    return f"**{text}**" if bold else text


def render_dataset(dataset, records):
    """One markdown table like the paper's Table 2 for one dataset's records."""
    groups = {}
    for record in records:
        groups.setdefault(record["variant"], []).append(record)
    rows = []
    for variant, group in groups.items():
        stats = {m: _mean_std([r["test"][m] for r in group]) for m in METRICS}
        rows.append({"variant": variant, "model": group[0]["model"], "records": group, "stats": stats,
                     "valid": _mean_std([r["valid"]["ndcg@20"] for r in group])[0]})
    rows.sort(key=lambda row: -row["stats"]["ndcg@20"][0])
    paper = PAPER.get(dataset, {})
    best = {m: max(row["stats"][m][0] for row in rows) for m in METRICS}
    header = ("| model | seeds | test Recall@20 | test NDCG@20 | valid NDCG@20 | paper Recall@20 | paper NDCG@20 "
              "| best epoch | epochs | s / epoch | parameters |")
    lines = [f"## {dataset}", "", header, "|" + "---|" * 11]
    for row in rows:
        group = row["records"]
        paper_cells = [f"{v:.4f}" for v in paper[row["variant"]]] if row["variant"] in paper else ["", ""]
        lines.append("| " + " | ".join([
            row["variant"], str(len(group)),
            *(_cell(*row["stats"][m], bold=row["stats"][m][0] == best[m]) for m in METRICS),
            f"{row['valid']:.4f}", *paper_cells,
            f"{statistics.mean(r['best_epoch'] for r in group if r['best_epoch'] is not None):.0f}"
            if any(r["best_epoch"] is not None for r in group) else "",
            f"{statistics.mean(r['epochs'] for r in group):.0f}",
            f"{statistics.mean(r['train_seconds_per_epoch'] for r in group):.1f}",
            f"{group[0]['parameters']:,}",
        ]) + " |")
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


def records_by_dataset(runs_dir):
    """This command's records (older scripts wrote fewer fields), by dataset."""
    by_dataset = {}
    folders = sorted(p for p in Path(runs_dir).iterdir() if p.is_dir()) if Path(runs_dir).is_dir() else []
    for record in (r for folder in folders for r in read_records(folder)):
        if "best_epoch" in record:
            by_dataset.setdefault(record["dataset"], []).append(record)
    return by_dataset


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


def render_popularity(by_dataset, results):
    """``results/popularity.md`` and ``results/popularity-<dataset>.png`` from the records that have group metrics."""
    sections = ["# Metrics by item popularity", "",
                "Rendered by `python -m recbole_mgformer.benchmark` (the paper's Fig. 2), at each run's best epoch.", ""]
    for dataset in sorted(by_dataset):
        # the chart compares models at their defaults; the table also lists variants
        table, summary = popularity_table(dataset, by_dataset[dataset])
        if table is None:
            continue
        chart = Path(results) / f"popularity-{dataset}.png"
        defaults = {v: s for v, s in summary.items() if " " not in v}
        popularity_chart(dataset, defaults or summary, chart)
        sections += [table, f"![{dataset}]({chart.name})", ""]
    (Path(results) / "popularity.md").write_text("\n".join(sections))


def render_leaderboard(runs_dir, notes=None):
    by_dataset = records_by_dataset(runs_dir)
    lines = ["# Leaderboard", "",
             "Rendered by `python -m recbole_mgformer.benchmark` from `results/runs/<dataset>/*.json`. Test metrics are "
             "mean ± std over seeds, at the epoch with the best validation NDCG@20 (early stopping); best in bold. "
             "Protocols: `properties/dataset/<dataset>.yaml`. Paper columns: the MGFormer paper's Table 2, "
             "and its Table 3 for MGFormer's ablations.", ""]
    for dataset in sorted(by_dataset):
        lines.append(render_dataset(dataset, by_dataset[dataset]))
    return "\n".join(lines + notes_lines(notes))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="MGFormer,DirectAU,SimGCL,XSimGCL,SGL,LightGCN,BPR")
    parser.add_argument("--datasets", default="amazon-beauty")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--data_path", default="dataset", help="RecBole's data_path; known datasets are imported here")
    parser.add_argument("--config_files", default="", help="space-separated YAML files applied to every run")
    parser.add_argument("--results", default=str(ROOT / "results"), help="folder of runs/ and leaderboard.md")
    parser.add_argument("--checkpoint_dir", default="saved/benchmark", help="per-run checkpoints, for resuming")
    parser.add_argument("--render-only", action="store_true", help="only re-render the leaderboard")
    args, rest = parser.parse_known_args(argv)
    extra = parse_overrides(rest)  # --key=value applied to every run, e.g. --device=cuda --epochs=5
    results = Path(args.results)
    runs_dir = results / "runs"
    if not args.render_only:
        entries = [parse_entry(e) for e in split_models(args.models)]
        datasets = [d for d in args.datasets.split(",") if d]
        seeds = [int(s) for s in args.seeds.split(",") if s]
        jobs = [(m, o, d, s) for d in datasets for s in seeds for m, o in entries]
        for model, overrides, dataset, seed in jobs:  # an unknown key fails now, not hours into the benchmark
            build_config(model, dataset, tuned_config_files(model, dataset, args.config_files.split()),
                         {**extra, **overrides, "seed": seed})
        for index, (model, overrides, dataset, seed) in enumerate(jobs, start=1):
            label = f"[{index}/{len(jobs)}] {variant_name(model, overrides)} on {dataset}, seed {seed}"
            print(f"{label}: running", flush=True)
            record = run_one(model, overrides, dataset, seed, runs_dir, args.data_path,
                             args.config_files.split(), extra, args.checkpoint_dir)
            if record is None:
                print(f"{label}: record exists, skipped", flush=True)
                continue
            print(f"{label}: test recall@20 {record['test']['recall@20']:.4f} ndcg@20 "
                  f"{record['test']['ndcg@20']:.4f}, best epoch {record['best_epoch']} of {record['epochs']}, "
                  f"{record['train_seconds_per_epoch']:.1f} s/epoch", flush=True)
    leaderboard = results / "leaderboard.md"
    leaderboard.write_text(render_leaderboard(runs_dir, results / "notes" / "leaderboard.md"))
    render_popularity(records_by_dataset(runs_dir), results)
    print(f"wrote {leaderboard} and {results / 'popularity.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
