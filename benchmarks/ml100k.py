"""MGFormer, its ablations and its baselines on ml-100k under one protocol
(RS 8:1:1 per user, full ranking, NDCG@20 picks the epoch): writes results/ml-100k.md.

    python benchmarks/ml100k.py                      # every variant, seed 2020
    python benchmarks/ml100k.py --variants MGFormer,LightGCN --seeds 2020,2021
    python benchmarks/ml100k.py --name "DirectAU gamma=0.5" --model DirectAU --gamma=0.5 \
        --runs results/runs/ml-100k-exploration --table results/ml-100k-exploration.md  # an extra variant, recorded apart

Each run leaves a JSON record in results/runs/ml-100k/; finished runs are skipped on a rerun.
"""

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.recorded_run import run_and_record  # noqa: E402
from recbole_mgformer.benchmark import slug  # noqa: E402
from recbole_mgformer.cli import parse_overrides  # noqa: E402
from recbole_mgformer.quick_start import run_recommender  # noqa: E402
from recbole_mgformer.records import display_path, mean_std, notes_lines, read_records  # noqa: E402

VARIANTS = {
    "MGFormer": ("MGFormer", {}),
    "MGFormer attention=False": ("MGFormer", {"attention": False}),
    "MGFormer structural_encoding=none": ("MGFormer", {"structural_encoding": "none"}),
    "MGFormer degree_mask=none": ("MGFormer", {"degree_mask": "none"}),
    "MGFormer feature_map=elu": ("MGFormer", {"feature_map": "elu"}),
    "LightGCN": ("LightGCN", {}),
    "BPR": ("BPR", {}),
    "SGL": ("SGL", {}),
    "SimGCL": ("SimGCL", {}),
    "XSimGCL": ("XSimGCL", {}),
    "DirectAU": ("DirectAU", {}),
    "DirectAU encoder=MF": ("DirectAU", {"encoder": "MF"}),
}
NOTES = ROOT / "results" / "notes" / "ml-100k.md"  # hand-written reading of the table, appended to it
METRICS = ("recall@20", "ndcg@20")


def run_variant(name, model, overrides, seed, runs_dir, workdir):
    config = {"seed": seed, "show_progress": False, "checkpoint_dir": str(workdir / "saved"), **overrides}
    run_and_record(
        runs_dir / f"{slug(name)}-seed{seed}.json", f"{name} seed {seed}",
        lambda: run_recommender(model, "ml-100k", config_dict=config),
        {"variant": name, "model": model, "dataset": "ml-100k", "overrides": overrides, "seed": seed}, "ndcg@20")


def render(records, order, notes=None, runs_dir=ROOT / "results" / "runs" / "ml-100k", title="ml-100k"):
    rows = ["| variant | seeds | valid Recall@20 | valid NDCG@20 | test Recall@20 | test NDCG@20 | minutes |",
            "|---|---|---|---|---|---|---|"]
    by_variant = {}
    for record in records:
        by_variant.setdefault(record["variant"], []).append(record)
    names = [n for n in order if n in by_variant] + sorted(n for n in by_variant if n not in order)
    for name in names:
        group = by_variant[name]
        cells = [mean_std([r[split][metric] for r in group]) for split in ("valid", "test") for metric in METRICS]
        minutes = statistics.mean(r["seconds"] for r in group) / 60
        rows.append(f"| {name} | {len(group)} | " + " | ".join(cells) + f" | {minutes:.1f} |")
    provenance = sorted({(r["commit"], r["machine"], r["versions"]["torch"], r["versions"]["recbole"]) for r in records})
    lines = [f"# {title}", "",
             "Protocol: all ratings as implicit interactions; each user's interactions split at random 8:1:1 "
             "(train/valid/test); every item ranked for every user, training items excluded; the epoch with the "
             "best valid NDCG@20 is tested. Each model runs with its defaults from `properties/model/` "
             "(RecBole's own for LightGCN and BPR) and the dataset config `properties/dataset/ml-100k.yaml`.", "",
             f"Produced by `python benchmarks/ml100k.py` (records in `{display_path(runs_dir, ROOT)}/`).", "", *rows, "",
             "Runs: " + "; ".join(f"commit {c}, {m}, torch {t}, recbole {rb}" for c, m, t, rb in provenance)
             + f"; seeds {sorted({r['seed'] for r in records})}.", ""]
    return "\n".join(lines + notes_lines(notes))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated names of VARIANTS")
    parser.add_argument("--seeds", default="2020", help="comma-separated seeds")
    parser.add_argument("--name", default=None, help="record an extra variant under this name, "
                        "with the --key=value overrides that follow")
    parser.add_argument("--model", default="MGFormer", help="the model of the --name variant")
    parser.add_argument("--runs", default=str(ROOT / "results" / "runs" / "ml-100k"), help="folder of JSON records")
    parser.add_argument("--table", default=str(ROOT / "results" / "ml-100k.md"), help="markdown table to write")
    args, rest = parser.parse_known_args(argv)
    variants = {name: VARIANTS[name] for name in args.variants.split(",") if name}
    unknown = [name for name in args.variants.split(",") if name and name not in VARIANTS]
    if unknown:
        parser.error(f"unknown variants {unknown}; choose from {list(VARIANTS)}")
    if args.name:
        variants = {args.name: (args.model, parse_overrides(rest))}
    elif rest:
        parser.error(f"overrides {rest} need --name")
    runs_dir, table = Path(args.runs), Path(args.table)
    with tempfile.TemporaryDirectory() as workdir:
        for seed in [int(s) for s in args.seeds.split(",")]:
            for name, (model, overrides) in variants.items():
                run_variant(name, model, overrides, seed, runs_dir, Path(workdir))
    notes = NOTES if table == ROOT / "results" / "ml-100k.md" else None
    table.write_text(render(read_records(runs_dir), list(VARIANTS), notes, runs_dir, table.stem))
    print(f"wrote {table}")


if __name__ == "__main__":
    main()
