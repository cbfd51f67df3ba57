"""CSA against RecBole's context-aware models on ml-100k with side features, the CSA paper's protocol:
labels rating >= 4, (train + valid) : test = rho : 1 - rho at random, train : valid = 7 : 3, AUC and LogLoss
on labelled pairs, the epoch with the best valid AUC tested (properties/context/). Writes results/context.md.

    python benchmarks/context.py                                     # every model and rho, seed 2020
    python benchmarks/context.py --seeds 2020,2021,2022              # the recorded table: three seeds
    python benchmarks/context.py --models "CSA[first_order=True],AutoInt" --rhos 0.8    # a variant: its own row
    python benchmarks/context.py --models CSA,LR --rhos 0.8 --seeds 2020 --epochs 1 \
        --runs /tmp/context-runs --table /tmp/context.md             # a smoke run, kept out of results/

Each model runs with its defaults (``properties/model/CSA.yaml``, RecBole's own for the others) under the
protocol files; the seed also draws the split. Each run leaves a JSON record in results/runs/context/;
finished runs are skipped on a rerun.
"""

import argparse
import shlex
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.recorded_run import run_and_record  # noqa: E402
from recbole_mgformer.benchmark import parse_entry, slug, split_models, variant_name  # noqa: E402
from recbole_mgformer.defaults import properties_dir  # noqa: E402
from recbole_mgformer.quick_start import run_recommender  # noqa: E402
from recbole_mgformer.records import display_path, mean_std, notes_lines, read_records  # noqa: E402

MODELS = ("CSA", "LR", "FM", "DeepFM", "AutoInt")
RHOS = ("0.2", "0.4", "0.6", "0.8")
NOTES = ROOT / "results" / "notes" / "context.md"  # hand-written reading of the tables, appended to them
DATASET = "ml-100k"
METRICS = (("auc", "AUC", max), ("logloss", "LogLoss", min))  # (key, shown name, which is best)


def protocol_files(rho):
    context = properties_dir() / "context"
    return [str(context / f"{DATASET}.yaml"), str(context / f"rho-{rho}.yaml")]


def run_one(entry, rho, seed, overrides, runs_dir, workdir, command):
    """Train and test one (model or ``NAME[key=value; ...]`` variant, rho, seed), unless its record exists."""
    model, variant_overrides = parse_entry(entry)
    variant = variant_name(model, variant_overrides)
    overrides = {**overrides, **variant_overrides}
    config = {"seed": seed, "show_progress": False, "checkpoint_dir": str(workdir / "saved"), **overrides}
    run_and_record(
        runs_dir / f"{slug(variant)}-rho{rho}-seed{seed}.json", f"{variant} rho {rho} seed {seed}",
        lambda: run_recommender(model, DATASET, config_file_list=protocol_files(rho), config_dict=config),
        {"model": variant, "dataset": DATASET, "rho": float(rho), "seed": seed, "overrides": overrides,
         "command": command}, "auc")


def metric_table(records, key, best):
    """Rows: models; columns: rho; cells: test mean ± std over seeds, the best mean of a column in bold."""
    groups = {}
    for record in records:
        groups.setdefault((record["model"], record["rho"]), []).append(record["test"][key])
    rhos = sorted({rho for _, rho in groups})
    models = [m for m in MODELS if any(m == g[0] for g in groups)]
    models += sorted({m for m, _ in groups} - set(models))
    winners = {rho: best((statistics.mean(v), m) for (m, r), v in groups.items() if r == rho)[1] for rho in rhos}
    rows = ["| model | " + " | ".join(f"rho = {rho:g}" for rho in rhos) + " |", "|---" * (len(rhos) + 1) + "|"]
    for model in models:
        cells = []
        for rho in rhos:
            values = groups.get((model, rho))
            cell = mean_std(values) if values else "–"
            cells.append(f"**{cell}**" if values and winners[rho] == model else cell)
        rows.append(f"| {model} | " + " | ".join(cells) + " |")
    return rows


def render(records, runs_dir, notes=None):
    seeds = sorted({r["seed"] for r in records})
    overrides = sorted({str(shown) for r in records  # those a variant's name does not already show
                        if (shown := {k: v for k, v in r["overrides"].items() if f"{k}=" not in r["model"]})})
    lines = ["# Context-aware models on ml-100k (CSA's protocol)", "",
             "Protocol (`properties/context/ml-100k.yaml` + `properties/context/rho-<rho>.yaml`): the real ml-100k "
             "user features (user_id, age, gender, occupation, zip_code) and item features (item_id, release_year, "
             "genres); label 1 for rating >= 4; all interactions split at random, (train + valid) : test = rho : "
             "1 - rho with train : valid = 7 : 3; at most 20 epochs, the epoch with the best valid AUC is tested on "
             "every labelled test pair. CSA runs with `properties/model/CSA.yaml`, the others with RecBole's "
             "defaults. Cells: test mean ± std over seeds " + ", ".join(map(str, seeds)) + " (the seed also draws "
             "the split); best mean per column in bold.", ""]
    if overrides:
        lines += ["Overrides: " + "; ".join(overrides), ""]
    for key, name, best in METRICS:
        lines += [f"## Test {name}", "", *metric_table(records, key, best), ""]
    minutes = {}
    for record in records:
        minutes.setdefault(record["model"], []).append(record["seconds"] / 60)
    lines += ["Minutes per run: " + ", ".join(f"{m} {statistics.mean(v):.1f}" for m, v in minutes.items()) + ".", ""]
    commands = sorted({r["command"] for r in records})
    provenance = sorted({(r["commit"], r["machine"], r["versions"]["torch"], r["versions"]["recbole"]) for r in records})
    lines += ["Produced by " + ", ".join(f"`{c}`" for c in commands) + f" (records in `{display_path(runs_dir, ROOT)}/`).", "",
              "Runs: " + "; ".join(f"commit {c}, {m}, torch {t}, recbole {rb}" for c, m, t, rb in provenance) + ".", ""]
    return "\n".join(lines + notes_lines(notes))


def _names(names, allowed, what, parser):
    unknown = [n for n in names if n not in allowed]
    if unknown:
        parser.error(f"unknown {what} {unknown}; choose from {list(allowed)}")
    return names


def _model_entries(text, parser):
    """Models and ``NAME[key=value; ...]`` variants of them."""
    entries = split_models(text)
    try:
        _names([parse_entry(entry)[0] for entry in entries], MODELS, "models", parser)
    except ValueError as error:
        parser.error(str(error))
    return entries


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated models or NAME[key=value; ...] variants")
    parser.add_argument("--rhos", default=",".join(RHOS), help="comma-separated sampling rates rho")
    parser.add_argument("--seeds", default="2020", help="comma-separated seeds")
    parser.add_argument("--epochs", type=int, default=None, help="override the protocol's 20 epochs (smoke runs)")
    parser.add_argument("--runs", default=str(ROOT / "results" / "runs" / "context"), help="folder of JSON records")
    parser.add_argument("--table", default=str(ROOT / "results" / "context.md"), help="markdown table to write")
    args = parser.parse_args(argv)
    models = _model_entries(args.models, parser)
    rhos = _names([r for r in args.rhos.split(",") if r], RHOS, "rhos", parser)
    overrides = {} if args.epochs is None else {"epochs": args.epochs}
    command = shlex.join(["python", "benchmarks/context.py", *argv])
    runs_dir, table = Path(args.runs), Path(args.table)
    with tempfile.TemporaryDirectory() as workdir:
        for seed in [int(s) for s in args.seeds.split(",")]:
            for rho in rhos:
                for model in models:
                    run_one(model, rho, seed, overrides, runs_dir, Path(workdir), command)
    table.parent.mkdir(parents=True, exist_ok=True)
    notes = NOTES if table == ROOT / "results" / "context.md" else None
    table.write_text(render(read_records(runs_dir), runs_dir, notes))
    print(f"wrote {table}")


if __name__ == "__main__":
    main()
