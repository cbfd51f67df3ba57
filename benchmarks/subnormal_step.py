"""What subnormal numbers cost a training step on the CPU, and what flushing them to zero gives back.

    python benchmarks/subnormal_step.py                 # amazon-beauty, the tuned MGFormer with degree_mask: adjacency

In one Beauty run of that ablation Adam shrank the key projection to 5e-34 by epoch 9, and it went on shrinking
towards float32's subnormal range (below 1.2e-38), where x86 CPUs produce results through microcode: the run's next
epoch, after 80 s epochs, was unfinished after 11 minutes, at 20 s a step. This rebuilds that state: the model with
its key projection scaled by ``--key_scale`` (1e-37 puts the weights near 5e-39), then times training steps
(``calculate_loss`` + backward + Adam) with subnormals kept and with them flushed to zero
(``recbole_mgformer.model.precision.flush_subnormals``, which every run calls), beside the healthy model;
interleaved in one process, each case on its own copy of the model (built alike, after one untimed step).
Writes a JSON record to results/performance/runs/performance/ and the table to
results/performance/subnormal_step-<dataset>.md.
"""

import argparse
import re
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TUNED_ADJACENCY = "MGFormer[precision=fp32; degree_mask=adjacency]"
# an attention layer's key projection W_K (Eq. 7), in a plain layer or inside an AttentionBlock
KEY_PROJECTION = re.compile(r"(?:.*\.)?layers\.\d+\.(?:attention\.)?key\.weight")


def main(argv=None):
    import torch

    from benchmarks.recorded_run import timing_provenance, write_table
    from benchmarks.step_time import build, train_step
    from recbole_mgformer.benchmark import parse_entry
    from recbole_mgformer.quick_start import tuned_config_file
    from recbole_mgformer.records import git_commit, package_versions, write_record

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="amazon-beauty")
    parser.add_argument("--model", default=TUNED_ADJACENCY, help="one entry, as the benchmark's --models take them")
    parser.add_argument("--key_scale", type=float, default=1e-37)
    parser.add_argument("--batch_size", type=int, default=1024)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--steps", type=int, default=2, help="timed steps per case per repeat")
    parser.add_argument("--results", default=str(ROOT / "results" / "performance"))
    parser.add_argument("--data_path", help="folder holding <dataset>/<dataset>.inter (default: RecBole's data_path)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    commit = git_commit(ROOT)
    model_name, overrides = parse_entry(args.model)
    tuned = tuned_config_file(model_name, args.dataset)  # under the entry's own settings, as the leaderboard trains
    if args.data_path:
        overrides["data_path"] = args.data_path
    runs = []
    for case, key_scale, flush in (("healthy keys, subnormals flushed", 1.0, True),
                                   (f"keys x {args.key_scale:g}, subnormals kept", args.key_scale, False),
                                   (f"keys x {args.key_scale:g}, subnormals flushed", args.key_scale, True)):
        # built afresh each time (same seed, same weights): a deep copy would share the compiled attention
        model, optimizer, batches, _ = build(model_name, args.dataset, args.batch_size, overrides, args.steps, "cpu",
                                             [tuned] if tuned else [])
        keys = [weight for name, weight in model.named_parameters()
                if KEY_PROJECTION.fullmatch(name)]
        if not keys:
            parser.error(f"{args.model} has no key projection to shrink")
        with torch.no_grad():
            for weight in keys:
                weight.mul_(key_scale)
        runs.append({"case": case, "model": model, "optimizer": optimizer, "batches": batches, "flush": flush,
                     "seconds": []})
    for run in runs:  # warm-up: compilation, caches, Adam's moments
        torch.set_flush_denormal(run["flush"])
        train_step(run["model"], run["optimizer"], run["batches"][0])
    for repeat in range(args.repeats):
        for run in runs:
            torch.set_flush_denormal(run["flush"])
            for batch in run["batches"]:
                started = time.perf_counter()
                train_step(run["model"], run["optimizer"], batch)
                run["seconds"].append(time.perf_counter() - started)
        print(f"repeat {repeat}: " + ", ".join(f"{r['case']} {1e3 * statistics.median(r['seconds']):.0f} ms"
                                               for r in runs), flush=True)
    torch.set_flush_denormal(True)
    base = statistics.median(runs[0]["seconds"])
    records = [{"case": r["case"], "flush_subnormals": r["flush"], "step_ms_median": round(1e3 * statistics.median(
                r["seconds"]), 1), "step_ms_min": round(1e3 * min(r["seconds"]), 1),
                "step_ms_max": round(1e3 * max(r["seconds"]), 1),
                "ratio_to_healthy": round(statistics.median(r["seconds"]) / base, 2), "steps_timed": len(r["seconds"])}
               for r in runs]
    provenance = timing_provenance(commit, args.repeats, {"model": args.model, "key_scale": args.key_scale,
                                                          "batch_size": args.batch_size, "threads": args.threads})
    stamp = time.strftime("%Y%m%d-%H%M%S")
    write_record(Path(args.results) / "runs" / "performance" / f"subnormal-step-{args.dataset}-{stamp}.json",
                 {"records": records, "provenance": provenance, "versions": package_versions()})
    lines = [f"# Subnormal numbers and a training step on {args.dataset}", "",
             f"Produced by `python benchmarks/subnormal_step.py` ({args.model} with the tuned settings, batch "
             f"{args.batch_size}, {args.threads} thread(s)): one step (`calculate_loss` + backward + Adam) with the "
             f"key projection scaled by {args.key_scale:g} (the state one Beauty run of the adjacency ablation drifted "
             "towards on its own), with subnormals kept and flushed to zero, beside the healthy model; the cases "
             "interleaved in one process.", "",
             "| case | step ms (median) | min-max | ratio to healthy |", "|---|---|---|---|"]
    lines += [f"| {r['case']} | {r['step_ms_median']} | {r['step_ms_min']}-{r['step_ms_max']} | "
              f"{r['ratio_to_healthy']} |" for r in records]
    write_table(Path(args.results) / f"subnormal_step-{args.dataset}.md", lines, provenance)


if __name__ == "__main__":
    main()
