"""Paired test of one benchmark row against others, over users' test NDCG@20 (NDCG@10 on sequential data) pooled
over seeds.

The leaderboard sets each MGFormer row of an equal-budget section against every other model of that section;
this names any pair (two baselines, an ablation and a baseline):
    python experiments/paired.py amazon-beauty mgformer xsimgcl directau
compares the first row with each of the others (rows by their record stem, ``<stem>-seed<k>.json``). As on the
leaderboard, a row is the records of one section: those from the equal-budget searches by default, the older runs
of the same stem (still beside them until each tuned seed retires its namesake) with ``--older``.

A row may also be named with its own runs folder, ``<runs folder>/<stem>`` (a grid's records beside the board's):
    python experiments/paired.py amazon-beauty <trained hybrid> results/exploration/trained-hybrid/runs/<control>
takes the one section of that folder's records (a grid outside the board's results has no equal-budget search of
its own, though it trained with the same tuned file), the equal-budget one where it has both, the older with
``--older``.
"""

import argparse
import re
from pathlib import Path

from recbole_mgformer.benchmark import general, stats
from recbole_mgformer.benchmark.render import read_records
from recbole_mgformer.benchmark.stats import paired_verdict, verdict_text

RUNS = Path(__file__).resolve().parents[1] / "results" / "runs"


def per_user_by_seed(runs_dir, stem, tuned=True):
    """``({seed: {user: value}}, metric)`` of one row: the per-user test values (NDCG@20 on the general boards,
    NDCG@10 on the sequential one) of the ``<stem>-seed<k>.json`` records in ``runs_dir`` of one section of the
    leaderboard (``general.sections``), an equal-budget search's (``tuned``), the older runs', or (``tuned`` None)
    the one section there is, the equal-budget one of two."""
    name = re.compile(rf"{re.escape(stem)}-seed\d+\.json")
    own = [r for r in read_records(runs_dir) if name.fullmatch(Path(r["_path"]).name)]
    sections = general.sections(own)
    if tuned is None:
        tuned = any(budget is not None for budget, _ in sections) or not sections
    chosen = [(budget, records) for budget, records in sections if (budget is not None) == tuned]
    if len(chosen) > 1:
        raise SystemExit(
            f"the records of {stem!r} come from searches of different budgets ("
            + "; ".join(budget for budget, _ in chosen)
            + "): they are separate rows"
        )
    by_seed = stats.per_user_by_seed(chosen[0][1]) if chosen else {}
    metrics = (
        {r["per_user"].get("metric", stats.PER_USER_METRIC) for r in chosen[0][1] if r.get("per_user")}
        if chosen
        else set()
    )
    if len(metrics) > 1:
        raise SystemExit(f"the records of {stem!r} store different per-user metrics ({', '.join(sorted(metrics))})")
    if not by_seed:
        section = "from an equal-budget search (add --older for the older runs)" if tuned else "of older runs"
        raise SystemExit(
            f"no records {section} with per-user values for {stem!r} in {runs_dir}: name a row by its "
            f"record stem, e.g. 'mgformer' for mgformer-seed0.json"
        )
    return by_seed, metrics.pop()


def row_source(argument, runs, dataset, older):
    """``(records folder, stem, tuned)`` of a row argument: a stem from ``runs``, or ``<runs folder>/<stem>`` from
    that folder, whose one section counts (:func:`per_user_by_seed` with ``tuned`` None) unless ``older``."""
    folder, slash, stem = argument.rpartition("/")
    if not slash:
        return Path(runs) / dataset, argument, not older
    return Path(folder) / dataset, stem, False if older else None


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset")
    parser.add_argument("row", help="record stem of the row to test, e.g. mgformer (or <runs folder>/<stem>)")
    parser.add_argument("others", nargs="+", help="record stems to compare it with (or <runs folder>/<stem>)")
    parser.add_argument("--runs", default=str(RUNS), help="folder holding <dataset>/<stem>-seed<k>.json")
    parser.add_argument(
        "--older", action="store_true", help="compare the older runs' rows, not those of the equal-budget searches"
    )
    args = parser.parse_args(argv)
    row, metric = per_user_by_seed(*row_source(args.row, args.runs, args.dataset, args.older))
    lines = []
    for other in args.others:
        values, other_metric = per_user_by_seed(*row_source(other, args.runs, args.dataset, args.older))
        if other_metric != metric:
            raise SystemExit(f"{args.row} stores per-user {metric}, {other} {other_metric}: they cannot be paired")
        verdict = paired_verdict(row, values)
        lines.append(
            verdict_text(args.row, other, verdict, metric) if verdict else f"{args.row} and {other} share no seed"
        )
    print("\n".join(lines))
    return lines


if __name__ == "__main__":
    main()
