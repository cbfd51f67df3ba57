"""Does bf16 train MGFormer as well as fp32? The same seeds on ml-100k in each precision, to convergence
(the model's defaults, early stopping on valid NDCG@20), compared by mean and spread over seeds.

    python benchmarks/precision_accuracy.py                       # seeds 0,1,2, ml-100k
    python benchmarks/precision_accuracy.py --seeds 0,1,2,3,4 --dataset ml-100k

Writes a JSON record per run to results/performance/runs/performance/precision-<dataset>/ (a rerun skips finished
runs) and the table to results/performance/precision-<dataset>.md.
"""

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

METRICS = ("recall@20", "ndcg@20")


def main(argv=None):
    from benchmarks.recorded_run import timing_provenance, write_table
    from recbole_mgformer import run_recommender
    from recbole_mgformer.records import git_commit, machine, package_versions, write_record

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="ml-100k")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--results", default=str(ROOT / "results" / "performance"))
    args = parser.parse_args(argv)
    runs = Path(args.results) / "runs" / "performance" / f"precision-{args.dataset}"
    commit = git_commit(ROOT)
    records = []
    for seed in [int(s) for s in args.seeds.split(",")]:
        for precision in ("fp32", "bf16"):
            path = runs / f"mgformer-{precision}-seed{seed}.json"
            if path.exists():
                records.append(json.loads(path.read_text()))
                continue
            started = time.perf_counter()
            result = run_recommender("MGFormer", args.dataset, saved=False, config_dict={
                "seed": seed, "precision": precision, "show_progress": False, "state": "WARNING"})
            record = {"precision": precision, "seed": seed, "dataset": args.dataset,
                      "valid": {m: result["best_valid_result"][m] for m in METRICS},
                      "test": {m: result["test_result"][m] for m in METRICS},
                      "seconds": round(time.perf_counter() - started, 1), "commit": commit,
                      "versions": package_versions(), "machine": machine()}
            write_record(path, record)
            records.append(record)
            print(f"seed {seed} {precision}: test NDCG@20 {record['test']['ndcg@20']:.4f} "
                  f"({record['seconds']:.0f} s)", flush=True)
    lines = [f"# MGFormer in fp32 and bf16 on {args.dataset}", "",
             "Produced by `python benchmarks/precision_accuracy.py` (MGFormer's defaults, early stopping on valid "
             "NDCG@20). Mean ± std over seeds; the last column is bf16 minus fp32, paired by seed.", "",
             "| metric | fp32 | bf16 | bf16 - fp32 (mean, min, max over seeds) |", "|---|---|---|---|"]
    for split in ("valid", "test"):
        for metric in METRICS:
            by = {p: {r["seed"]: r[split][metric] for r in records if r["precision"] == p} for p in ("fp32", "bf16")}
            seeds = sorted(set(by["fp32"]) & set(by["bf16"]))
            if not seeds:
                continue
            cells = []
            for p in ("fp32", "bf16"):
                values = [by[p][s] for s in seeds]
                spread = statistics.stdev(values) if len(values) > 1 else 0.0
                cells.append(f"{statistics.mean(values):.4f} ± {spread:.4f}")
            diffs = [by["bf16"][s] - by["fp32"][s] for s in seeds]
            lines.append(f"| {split} {metric} | {cells[0]} | {cells[1]} | {statistics.mean(diffs):+.4f} "
                         f"({min(diffs):+.4f}, {max(diffs):+.4f}) |")
    seconds = {p: statistics.mean(r["seconds"] for r in records if r["precision"] == p) for p in ("fp32", "bf16")}
    lines += ["", f"Mean wall time of a run: fp32 {seconds['fp32']:.0f} s, bf16 {seconds['bf16']:.0f} s."]
    write_table(Path(args.results) / f"precision-{args.dataset}.md", lines,
                timing_provenance(commit, len(records), {"seeds": args.seeds}))


if __name__ == "__main__":
    main()
