"""Paired test of one benchmark row against others, over users' test NDCG@20 pooled over seeds.

The leaderboard sets each MGFormer row of an equal-budget section against every other model of that section;
this names any pair (two baselines, an ablation and a baseline):
    python benchmarks/paired.py amazon-beauty mgformer xsimgcl directau
compares the first row with each of the others (rows by their record stem, ``<stem>-seed<k>.json``). As on the
leaderboard, a row is the records of one section: those from the equal-budget searches by default, the older runs
of the same stem (still beside them until each tuned seed retires its namesake) with ``--older``.
"""
import argparse
import json
import re
from pathlib import Path

from recbole_mgformer.benchmark.stats import paired_verdict, read_per_user, verdict_text

RUNS = Path(__file__).resolve().parents[1] / "results" / "runs"


def per_user_by_seed(runs_dir, stem, tuned=True):
    """``{seed: {user: value}}`` from the ``<stem>-seed<k>.json`` records of one section (``tuned``: records of an
    equal-budget search, else the older runs) that stored per-user values."""
    by_seed = {}
    for path in sorted(Path(runs_dir).glob(f"{stem}-seed*.json")):
        match = re.fullmatch(rf"{re.escape(stem)}-seed(\d+)\.json", path.name)
        if not match or bool(json.loads(path.read_text()).get("tuning")) != tuned:
            continue
        values = read_per_user(path)
        if values is not None:
            by_seed[int(match.group(1))] = values
    if not by_seed:
        section = "from an equal-budget search (add --older for the older runs)" if tuned else "of older runs"
        raise SystemExit(f"no records {section} with per-user values for {stem!r} in {runs_dir}: name a row by its "
                         f"record stem, e.g. 'mgformer' for mgformer-seed0.json")
    return by_seed


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset")
    parser.add_argument("row", help="record stem of the row to test, e.g. mgformer")
    parser.add_argument("others", nargs="+", help="record stems to compare it with")
    parser.add_argument("--runs", default=str(RUNS), help="folder holding <dataset>/<stem>-seed<k>.json")
    parser.add_argument("--older", action="store_true",
                        help="compare the older runs' rows, not those of the equal-budget searches")
    args = parser.parse_args(argv)
    runs_dir = Path(args.runs) / args.dataset
    tuned = not args.older
    row = per_user_by_seed(runs_dir, args.row, tuned)
    lines = []
    for other in args.others:
        verdict = paired_verdict(row, per_user_by_seed(runs_dir, other, tuned))
        lines.append(verdict_text(args.row, other, verdict) if verdict else f"{args.row} and {other} share no seed")
    print("\n".join(lines))
    return lines


if __name__ == "__main__":
    main()
