"""Paired test of one benchmark row against others, over users' test NDCG@20 pooled over seeds.

The leaderboard sets each MGFormer row of an equal-budget section against every other model of that section;
this names any pair (two baselines, an ablation and a baseline, rows of different sections):
    python benchmarks/paired.py amazon-beauty mgformer xsimgcl directau
compares the first row with each of the others (rows by their record stem, ``<stem>-seed<k>.json``).
"""
import argparse
import re
from pathlib import Path

from recbole_mgformer.benchmark.stats import paired_verdict, read_per_user, verdict_text

RUNS = Path(__file__).resolve().parents[1] / "results" / "runs"


def per_user_by_seed(runs_dir, stem):
    """``{seed: {user: value}}`` from ``<stem>-seed<k>.json`` records that stored per-user values."""
    by_seed = {}
    for path in sorted(Path(runs_dir).glob(f"{stem}-seed*.json")):
        match = re.fullmatch(rf"{re.escape(stem)}-seed(\d+)\.json", path.name)
        values = read_per_user(path) if match else None
        if values is not None:
            by_seed[int(match.group(1))] = values
    if not by_seed:
        raise SystemExit(f"no records with per-user values for {stem!r} in {runs_dir}: name a row by its record stem, "
                         f"e.g. 'mgformer' for mgformer-seed0.json")
    return by_seed


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset")
    parser.add_argument("row", help="record stem of the row to test, e.g. mgformer")
    parser.add_argument("others", nargs="+", help="record stems to compare it with")
    parser.add_argument("--runs", default=str(RUNS), help="folder holding <dataset>/<stem>-seed<k>.json")
    args = parser.parse_args(argv)
    runs_dir = Path(args.runs) / args.dataset
    row = per_user_by_seed(runs_dir, args.row)
    lines = []
    for other in args.others:
        verdict = paired_verdict(row, per_user_by_seed(runs_dir, other))
        lines.append(verdict_text(args.row, other, verdict) if verdict else f"{args.row} and {other} share no seed")
    print("\n".join(lines))
    return lines


if __name__ == "__main__":
    main()
