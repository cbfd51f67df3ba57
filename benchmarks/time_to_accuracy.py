"""Time to accuracy, the figure a user feels: wall time of training (every epoch's training and validation)
until the validation NDCG@20 first reaches a target, and until the best epoch, with the leaderboard's settings.

    python benchmarks/time_to_accuracy.py --models "MGFormer,DirectAU,MGFormer[attention=False],XSimGCL,LightGCN"
    python benchmarks/time_to_accuracy.py --models "MGFormer[embedding_size=128]" --target 0.060 --max_minutes 60

Each model trains as the leaderboard trains it (``properties/benchmark/<dataset>/<Model>.yaml`` over its
defaults, early stopping on the validation metric), in this process, one after the other, never two at once.
A run stops at early stopping or after ``--max_minutes`` of training, whichever comes first; a capped run's best
epoch is the best so far, and the table says it was capped. Writes one JSON record per model to
results/performance/runs/performance/time-to-accuracy-<dataset>/ (a rerun skips finished ones) and the table to
results/performance/time_to_accuracy-<dataset>.md.
"""

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


class StopTraining(Exception):
    pass


def train_timed(model, overrides, dataset, seed, max_minutes, data_path):
    """Train with the leaderboard's settings; -> per-epoch (epoch, cumulative seconds, valid score), the best
    epoch, whether the time cap stopped it, the config, and the matmuls' resolved precision."""
    import torch

    from recbole_mgformer.data.sources import ensure_dataset
    from recbole_mgformer.defaults import benchmark_config_file
    from recbole_mgformer.quick_start import build_config, prepare
    from recbole_mgformer.resume import RunTimer

    ensure_dataset(dataset, data_path)
    tuned = benchmark_config_file(model, dataset)
    config, _ = build_config(model, dataset, [tuned] if tuned else [], {
        "seed": seed, "data_path": data_path, "show_progress": False, "state": "WARNING", **overrides})
    model_instance, trainer, (train_data, valid_data, _) = prepare(config)
    timer = RunTimer(trainer)

    def stop_when_over_time(epoch, _score):
        if sum(timer.train_seconds) + sum(timer.valid_seconds) > 60 * max_minutes:
            raise StopTraining

    capped = False
    try:
        trainer.fit(train_data, valid_data, saved=False, show_progress=False, callback_fn=stop_when_over_time)
    except StopTraining:
        capped = True
    elapsed, history = 0.0, []
    for (epoch, score), train_s, valid_s in zip(timer.valid_scores, timer.train_seconds, timer.valid_seconds):
        elapsed += train_s + valid_s  # validation runs every epoch (eval_step 1), so the lists align
        history.append((epoch, round(elapsed, 1), score))
    matmuls = "bf16" if getattr(model_instance, "matmul_dtype", None) == torch.bfloat16 else "fp32"
    return history, timer.best_epoch(config["valid_metric_bigger"]), capped, config, matmuls


def main(argv=None):
    from benchmarks.recorded_run import timing_provenance, write_table
    from recbole_mgformer.benchmark import parse_entry, slug, split_models, variant_name
    from recbole_mgformer.records import git_commit, machine, package_versions, read_records, write_record

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="amazon-beauty")
    parser.add_argument("--models", default="MGFormer,DirectAU,MGFormer[attention=False],XSimGCL,LightGCN")
    parser.add_argument("--target", type=float, default=0.060, help="validation NDCG@20 to reach")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max_minutes", type=float, default=45.0, help="training time cap per model")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--data_path", default=str(ROOT / "dataset"))
    parser.add_argument("--results", default=str(ROOT / "results" / "performance"))
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    folder = Path(args.results) / "runs" / "performance" / f"time-to-accuracy-{args.dataset}"
    commit = git_commit(ROOT)
    for model, overrides in (parse_entry(e) for e in split_models(args.models)):
        name = variant_name(model, overrides)
        path = folder / f"{slug(name)}-seed{args.seed}.json"
        if path.exists():
            print(f"[skip] {name}: {path} exists", flush=True)
            continue
        print(f"[run ] {name}", flush=True)
        history, best_epoch, capped, config, matmuls = train_timed(model, overrides, args.dataset, args.seed,
                                                          args.max_minutes, args.data_path)
        reached = next(((e, s, v) for e, s, v in history if v >= args.target), None)
        best = next((e, s, v) for e, s, v in history if e == best_epoch)
        write_record(path, {
            "model": name, "dataset": args.dataset, "seed": args.seed, "target": args.target,
            "seconds_to_target": reached[1] if reached else None, "epoch_at_target": reached[0] if reached else None,
            "seconds_to_best": best[1], "best_epoch": best_epoch, "best_valid": best[2], "capped": capped,
            "epochs": len(history), "history": history, "threads": args.threads,
            "settings": {k: config[k] for k in ("train_batch_size", "learning_rate", "embedding_size")
                         if k in config.final_config_dict},
            "precision": matmuls,  # resolved: `precision: auto` is bf16 where the hardware multiplies it natively
            "commit": commit, "versions": package_versions(), "machine": machine()})
        print(f"[done] {name}: target at {reached[1] if reached else '-'} s, best epoch {best_epoch} at {best[1]} s"
              f"{' (capped)' if capped else ''}", flush=True)
    records = sorted(read_records(folder), key=lambda r: (r["seconds_to_target"] is None,
                                                          r["seconds_to_target"] or 0))
    lines = [f"# Time to accuracy on {args.dataset}", "",
             "Produced by `python benchmarks/time_to_accuracy.py`: wall time of training and validation, with the "
             "leaderboard's settings for each model, until validation NDCG@20 first reaches "
             f"{args.target} and until the best epoch (early stopping on validation NDCG@20). One model at a "
             "time in one process.", "",
             "| model | matmuls | batch | lr | d | to target s (epoch) | to best s (epoch) | best valid NDCG@20 | "
             "s per epoch | machine, threads |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in records:
        s = r["settings"]
        target = f"{r['seconds_to_target']:.0f} ({r['epoch_at_target']})" if r["seconds_to_target"] else "not reached"
        capped = ", capped: best so far" if r["capped"] else ""
        lines.append(f"| {r['model']} | {r['precision']} | {s.get('train_batch_size')} | {s.get('learning_rate')} | "
                     f"{s.get('embedding_size')} | {target} | {r['seconds_to_best']:.0f} ({r['best_epoch']}{capped}) "
                     f"| {r['best_valid']:.4f} | {r['history'][-1][1] / r['epochs']:.1f} | {r['machine']}, "
                     f"{r['threads']} | ")
    write_table(Path(args.results) / f"time_to_accuracy-{args.dataset}.md", lines,
                timing_provenance(commit, 1, {"seed": args.seed, "max_minutes": args.max_minutes}))


if __name__ == "__main__":
    main()
