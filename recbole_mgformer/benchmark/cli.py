"""``python -m recbole_mgformer.benchmark`` and the ``recbole-mgformer-benchmark`` console script."""

import argparse
import shlex
import sys
from pathlib import Path

from recbole_mgformer.benchmark import context, general, sequential
from recbole_mgformer.benchmark.datasets import check_model_fits
from recbole_mgformer.benchmark.entries import comma_list, parse_entry, split_models
from recbole_mgformer.benchmark.render import render_results
from recbole_mgformer.benchmark.runs import ROOT, Run
from recbole_mgformer.cli import parse_overrides

HEADLINES = {"general": general.HEADLINE, "sequential": sequential.HEADLINE, "context": context.HEADLINE}


def finished_line(run, record):
    """What a finished run prints: its kind's headline test metrics, best epoch and speed."""
    metrics = " ".join(f"{m} {record['test'][m]:.4f}" for m in HEADLINES[run.kind] if m in record["test"])
    speed = record["train_seconds_per_epoch"]
    return (f"test {metrics}, best epoch {record['best_epoch']} of {record['epochs']}"
            + (f", {speed:.1f} s/epoch" if speed is not None else ""))


def planned_runs(args, extra, command):
    """Every (dataset, seed, model entry) run, checked before the first one starts."""
    entries = [parse_entry(e) for e in split_models(args.models)]
    datasets = comma_list(args.datasets)
    for model, _ in entries:
        for dataset in datasets:
            check_model_fits(model, dataset)
    settings = {"runs_dir": Path(args.results) / "runs", "data_path": args.data_path,
                "config_files": args.config_files.split(), "extra": extra, "checkpoint_dir": args.checkpoint_dir,
                "command": command}
    runs = [Run(model, overrides, dataset, int(seed), **settings)
            for dataset in datasets for seed in comma_list(args.seeds) for model, overrides in entries]
    for run in runs:
        run.check_config()
    return runs


def main(argv=None):
    from recbole_mgformer.benchmark import __doc__ as doc

    argv = sys.argv[1:] if argv is None else list(argv)
    parser = argparse.ArgumentParser(prog="recbole-mgformer-benchmark", description=doc,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="MGFormer,DirectAU,SimGCL,XSimGCL,SGL,LightGCN,BPR")
    parser.add_argument("--datasets", default="amazon-beauty",
                        help="comma-separated; each dataset's config in properties/dataset/ picks its table")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--data_path", default="dataset", help="RecBole's data_path; known datasets are imported here")
    parser.add_argument("--config_files", default="", help="space-separated YAML files applied to every run")
    parser.add_argument("--results", default=str(ROOT / "results"), help="folder of runs/ and the pages")
    parser.add_argument("--checkpoint_dir", default="saved/benchmark", help="per-run checkpoints, for resuming")
    parser.add_argument("--render-only", action="store_true", help="only re-render every table from its records")
    args, rest = parser.parse_known_args(argv)
    extra = parse_overrides(rest)  # --key=value applied to every run, e.g. --device=cuda --epochs=5
    if not args.render_only:
        try:
            runs = planned_runs(args, extra, shlex.join(["python", "-m", "recbole_mgformer.benchmark", *argv]))
        except ValueError as error:
            parser.error(str(error))
        for index, run in enumerate(runs, start=1):
            label = f"[{index}/{len(runs)}] {run.label}"
            print(f"{label}: running", flush=True)
            record = run.execute()
            print(f"{label}: " + ("record exists, skipped" if record is None else finished_line(run, record)),
                  flush=True)
    written = render_results(args.results)
    print("wrote " + ", ".join(str(path) for path in written))
    return 0
