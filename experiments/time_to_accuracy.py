"""Time to accuracy, the figure a user feels: wall time of training and validation until the validation NDCG@20
first reaches a target, and until the best epoch, for the leaderboard's rows with the leaderboard's settings.

    python experiments/time_to_accuracy.py                 # amazon-beauty, target 0.060, rows: MGFormer (d 64, d 128,
                                                          # attention off), DirectAU, XSimGCL, LightGCN
    python experiments/time_to_accuracy.py --models "MGFormer,DirectAU" --max_steps 40 --repeats 3

The figure is the product of two measurements that need different conditions, so they are made apart:

- how many epochs (and validations) a row needs: read from the leaderboard's own records,
  ``results/runs/<dataset>/<variant>-seed<k>.json``, every seed there is, each with its validation history.
  Counting epochs does not depend on the machine or on what else runs on it, so these come from the long runs of
  ``python -m recbole_mgformer.benchmark``, which survive a stopped or replaced machine.
- what an epoch and a validation cost: measured here, on quiet cores, each row in a fresh process with the real
  data loader and the settings of its records (``--max_steps`` steps scaled to the epoch, as
  ``experiments/epoch_time.py`` does, and two full-sort validations), interleaved over ``--repeats``.

time = one-off warm-up (first step and first validation beyond the later ones: compilation, caches)
       + epochs x epoch seconds + validations x validation seconds.

Settings that change only speed (``precision``, ``compile``, chunking) are exact and take the current code's
defaults; every hyperparameter that changes what is learned comes from the records. Writes the table to
results/performance/time_to_accuracy-<dataset>.md and the measurements to results/performance/runs/performance/.
"""

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from experiments.isolated import measure_in_subprocess  # noqa: E402

DEFAULT_MODELS = "MGFormer,MGFormer[embedding_size=128],MGFormer[attention=False],DirectAU,XSimGCL,LightGCN"
SIZE_KEYS = ("train_batch_size", "embedding_size")  # what an epoch's cost depends on beyond the model's options


def row_records(runs, variant):
    """The records of one leaderboard row, every seed, from a ``results/runs/<dataset>`` folder."""
    from recbole_mgformer.records import read_records

    return sorted((r for r in read_records(runs) if r.get("variant") == variant), key=lambda r: r["seed"])


def trained_settings(record):
    """The hyperparameters a record trained with, as a config dict: the keys of its tuned file and of its entry's
    overrides, and its batch and embedding sizes, each with the record's own value."""
    import yaml

    keys = set(SIZE_KEYS) | set(record.get("overrides") or {})
    tuned = record.get("tuned_config")
    if tuned and (ROOT / tuned).is_file():
        keys |= set(yaml.safe_load((ROOT / tuned).read_text()) or {})
    return {key: record["config"][key] for key in sorted(keys) if key in record["config"]}


def epochs_needed(record, target):
    """-> {"target": (epochs, validations) until validation first reached ``target``, or None (never, or a record
    without its history), "best": (epochs, validations) until the best epoch}."""
    eval_step = record["config"].get("eval_step") or 1

    def counts(epoch):
        return epoch + 1, (epoch + 1) // eval_step

    history = record.get("valid_history") or []
    reached = next((epoch for epoch, score in history if score >= target), None)
    return {"target": counts(reached) if reached is not None else None, "best": counts(record["best_epoch"])}


def wall_seconds(cost, counts):
    """Seconds of training and validation for (epochs, validations), with the row's one-off warm-up."""
    epochs, validations = counts
    return cost["one_off_seconds"] + epochs * cost["epoch_seconds"] + validations * cost["validation_seconds"]


def summarise_cost(measurements):
    """Medians over repeats of ``experiments.epoch_time.measure`` results (each with two validations)."""
    median = statistics.median
    return {
        "epoch_seconds": median(m["epoch_seconds"] for m in measurements),
        "validation_seconds": median(m["later_evaluation_seconds"][0] for m in measurements),
        "one_off_seconds": max(
            0.0,
            median(
                m["first_step_seconds"]
                - m["step_seconds_median"]
                + m["evaluation_seconds"]
                - m["later_evaluation_seconds"][0]
                for m in measurements
            ),
        ),  # noise can make it negative
        "repeats": len(measurements),
        "measured_steps": measurements[0]["measured_steps"],
        "steps_per_epoch": measurements[0]["steps_per_epoch"],
    }


def _minutes(values, missing="not reached"):
    values = [v for v in values if v is not None]
    if not values:
        return missing
    mean = statistics.mean(values) / 60
    return f"{mean:.1f}" if len(values) == 1 else f"{mean:.1f} ({min(values) / 60:.1f}-{max(values) / 60:.1f})"


def render(rows, dataset, target):
    """The page: one line per row, means over seeds (range in brackets), sorted by time to the best epoch."""
    lines = [
        f"# Time to accuracy on {dataset}",
        "",
        "Produced by `python experiments/time_to_accuracy.py`: minutes of training and validation until validation "
        f"NDCG@20 first reaches {target} and until the best epoch (early stopping on it), for the leaderboard's rows "
        "with the leaderboard's settings. Epoch counts come from the leaderboard's records (every seed, their "
        "validation histories); the seconds an epoch and a validation take were measured in this run, each row in "
        "a fresh process, interleaved over repeats, on quiet cores. Minutes are means over seeds, with their range.",
        "",
        "| model | batch | d | lr | seeds | epochs to target | minutes to target | epochs to best | minutes to best "
        "| best valid NDCG@20 | train s / epoch | validation s | one-off s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in sorted(rows, key=lambda r: statistics.mean(r["seconds_to_best"])):
        settings, cost = row["settings"], row["cost"]
        to_target = ", ".join(
            "?" if c is None and not h else ("-" if c is None else str(c[0]))
            for c, h in zip(row["target_counts"], row["target_known"])
        )
        lines.append(
            f"| {row['variant']} | {settings.get('train_batch_size')} | {settings.get('embedding_size')} | "
            f"{row['learning_rate']} | {', '.join(map(str, row['seeds']))} | {to_target} | "
            f"{_minutes(row['seconds_to_target'], 'not reached' if any(row['target_known']) else 'unknown')} | "
            f"{', '.join(str(c[0]) for c in row['best_counts'])} | "
            f"{_minutes(row['seconds_to_best'])} | {statistics.mean(row['best_valid']):.4f} | "
            f"{cost['epoch_seconds']:.1f} | {cost['validation_seconds']:.1f} | {cost['one_off_seconds']:.0f} |"
        )
    lines += [
        "",
        "Epochs to target: per seed; `-` never reached; `?` unknown: a record that kept no validation history "
        "(older runs) and whose best score is above the target. "
        "Records (commit, machine of the run that trained them): "
        + "; ".join(f"{row['variant']}: " + ", ".join(row["record_sources"]) for row in rows)
        + ".",
    ]
    costs = sorted({row["cost_provenance"] for row in rows})
    lines += ["", "Costs (epoch, validation, warm-up) measured by: " + " / ".join(costs)]
    return lines


def main(argv=None):
    from experiments.recorded_run import timing_provenance, write_table
    from recbole_mgformer.benchmark import parse_entry, split_models, variant_name
    from recbole_mgformer.records import git_commit, package_versions, write_record

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="amazon-beauty")
    parser.add_argument("--models", default=DEFAULT_MODELS)
    parser.add_argument("--target", type=float, default=0.060, help="validation NDCG@20 to reach")
    parser.add_argument("--max_steps", type=int, default=30, help="training steps timed per measurement")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--data_path", default=None, help="RecBole's data_path (default: the config's)")
    parser.add_argument("--runs", default=None, help="the leaderboard's records (default results/runs/<dataset>)")
    parser.add_argument("--results", default=str(ROOT / "results" / "performance"))
    parser.add_argument(
        "--costs",
        default=None,
        help="a JSON record of an earlier run: its rows' measured costs are reused (same settings "
        "only), so new leaderboard records re-render without timing again",
    )
    args = parser.parse_args(argv)
    runs = Path(args.runs or ROOT / "results" / "runs" / args.dataset)
    commit = git_commit(ROOT)

    rows = []
    for model, overrides in (parse_entry(entry) for entry in split_models(args.models)):
        variant = variant_name(model, overrides)
        records = row_records(runs, variant)
        if not records:
            parser.error(
                f"no leaderboard record of {variant!r} in {runs}: train it first with "
                f'`python -m recbole_mgformer.benchmark --models "{model}" --datasets {args.dataset}`'
            )
        settings = trained_settings(records[-1])
        kept = [r for r in records if trained_settings(r) == settings]  # a row retrained with new settings
        rows.append(
            {
                "model": model,
                "variant": variant,
                "settings": settings,
                "records": kept,
                "learning_rate": kept[0]["config"].get("learning_rate"),
            }
        )
    earlier = {}
    if args.costs:
        earlier = {
            (r["variant"], json.dumps(r["settings"], sort_keys=True)): r
            for r in json.loads(Path(args.costs).read_text())["rows"]
        }
    for row in rows:
        reused = earlier.get((row["variant"], json.dumps(row["settings"], sort_keys=True)))
        row["measurements"] = reused["measurements"] if reused else []
        row["cost_provenance"] = reused["cost_provenance"] if reused else None
    for repeat in range(args.repeats):
        for row in (r for r in rows if r["cost_provenance"] is None):  # not reused from --costs
            config = {key: value for key, value in row["settings"].items() if key != "train_batch_size"}
            if args.data_path:
                config["data_path"] = args.data_path
            result = measure_in_subprocess(
                "epoch_time",
                "measure",
                row["model"],
                args.dataset,
                row["settings"]["train_batch_size"],
                args.max_steps,
                config,
                2,
            )
            row["measurements"].append(result)
            print(
                f"repeat {repeat} {row['variant']}: epoch {result['epoch_seconds']:.1f} s, validation "
                f"{result['later_evaluation_seconds'][0]:.1f} s",
                flush=True,
            )
    provenance = timing_provenance(commit, args.repeats, {"target": args.target, "max_steps": args.max_steps})
    for row in rows:
        row["cost_provenance"] = row["cost_provenance"] or provenance
        row["cost"] = cost = summarise_cost(row["measurements"])
        needed = [epochs_needed(r, args.target) for r in row["records"]]
        row["seeds"] = [r["seed"] for r in row["records"]]
        # Without a history the epoch of reaching the target is unknown, unless the best score is below it.
        row["target_known"] = [
            bool(r.get("valid_history")) or r["valid"]["ndcg@20"] < args.target for r in row["records"]
        ]
        row["target_counts"] = [n["target"] for n in needed]
        row["best_counts"] = [n["best"] for n in needed]
        row["seconds_to_target"] = [wall_seconds(cost, c) if c else None for c in row["target_counts"]]
        row["seconds_to_best"] = [wall_seconds(cost, c) for c in row["best_counts"]]
        row["best_valid"] = [r["valid"]["ndcg@20"] for r in row["records"]]
        row["record_sources"] = [f"seed {r['seed']} {r['commit']} {r['machine']}" for r in row["records"]]
    stamp_free = [{key: value for key, value in row.items() if key != "records"} for row in rows]
    write_record(
        Path(args.results) / "runs" / "performance" / f"time-to-accuracy-{args.dataset}.json",
        {
            "rows": stamp_free,
            "provenance": provenance,
            "versions": package_versions(),
            "command": " ".join(["python experiments/time_to_accuracy.py", *(argv or sys.argv[1:])]),
        },
    )
    write_table(
        Path(args.results) / f"time_to_accuracy-{args.dataset}.md", render(rows, args.dataset, args.target), provenance
    )
    return rows


if __name__ == "__main__":
    main()
