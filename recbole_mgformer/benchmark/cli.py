"""``python -m recbole_mgformer.benchmark`` and the ``recbole-mgformer-benchmark`` console script."""

import argparse
import shlex
import sys
from pathlib import Path

from recbole_mgformer.benchmark import context, general, sequential
from recbole_mgformer.benchmark.claims import Busy
from recbole_mgformer.benchmark.datasets import check_model_fits, same_for_every_seed
from recbole_mgformer.benchmark.entries import (
    comma_list,
    parse_entry,
    parse_seeds,
    seed_conflict,
    split_models,
    tuning_target,
)
from recbole_mgformer.benchmark.names import CHOICES, recorded_choice
from recbole_mgformer.benchmark.render import render_results, required_metrics
from recbole_mgformer.config.command_line import split_config_files
from recbole_mgformer.config.input_checks import check_writable_folder, user_errors

# What runs, tunes or parses a setting (torch, RecBole, the runner) is imported in the functions that do it, so
# ``--render-only`` imports neither torch nor RecBole.

HEADLINES = {"general": general.HEADLINE, "sequential": sequential.HEADLINE, "context": context.HEADLINE}


def finished_line(run, record):
    """What a finished run prints: its kind's headline test metrics, best epoch and speed."""
    metrics = " ".join(f"{m} {record['test'][m]:.4f}" for m in HEADLINES[run.kind] if m in record["test"])
    speed = record["train_seconds_per_epoch"]
    return f"test {metrics}, best epoch {record['best_epoch']} of {record['epochs']}" + (
        f", {speed:.1f} s/epoch" if speed is not None else ""
    )


def choice_fields(args):
    """The record fields of ``--choice-made-on`` / ``--choice-dataset``, checked."""
    if args.choice_dataset is not None and args.choice_made_on != "validation":
        raise ValueError(
            f"--choice-dataset={args.choice_dataset} says the weight was chosen on that dataset's validation set; "
            "add --choice-made-on validation"
        )
    return recorded_choice(vars(args))


def planned_runs(args, extra, command):
    """Every (dataset, seed, model entry) run, checked before the first one starts. A run that every seed would
    repeat (:func:`~recbole_mgformer.benchmark.datasets.same_for_every_seed`: a deterministic model on a split the
    seed does not draw) runs its first seed only."""
    from recbole_mgformer.benchmark.runs import Run
    from recbole_mgformer.data.atomic import check_dataset_folder
    from recbole_mgformer.data.sources import written_on_first_use
    from recbole_mgformer.integration.registry import fits_once

    if "seed" in extra:
        raise ValueError(seed_conflict(f"--seed={extra['seed']} sets the seed of every run"))
    seeds = parse_seeds(args.seeds)
    entries = [parse_entry(e) for e in split_models(args.models)]
    datasets = list(dict.fromkeys(comma_list(args.datasets)))  # each once, as the entries
    for option, given, example in (("--models", entries, "BPR,MGFormer"), ("--datasets", datasets, "ml-100k")):
        if not given:
            raise ValueError(
                f"{option} {getattr(args, option[2:])!r} names none; give a comma-separated list, e.g. "
                f"{option} {example}"
            )
    for model, _ in entries:
        for dataset in datasets:
            check_model_fits(model, dataset)
    settings = {
        "runs_dir": Path(args.results) / "runs",
        "data_path": args.data_path,
        "config_files": split_config_files(args.config_files),
        "extra": extra,
        "checkpoint_dir": args.checkpoint_dir,
        "command": command,
        "tuned_dir": args.tuned_dir,
        "trained_runs_dir": Path(args.trained_results or args.results) / "runs",
        "retrain_missing": args.retrain_missing_checkpoints,
        "choice": choice_fields(args),
    }
    if args.tune_budget:  # each entry's search, then its seeds: a row at a time
        runs = [
            Run(model, overrides, dataset, seed, **settings)
            for dataset in datasets
            for model, overrides in entries
            for seed in seeds
        ]
    else:
        runs = [
            Run(model, overrides, dataset, seed, **settings)
            for dataset in datasets
            for seed in seeds
            for model, overrides in entries
        ]
    kept, seeded_once, schedules = [], set(), {}
    for run in runs:
        config = run.check_config()
        if not written_on_first_use(run.dataset):  # a misspelt dataset fails now, not after the ones before it
            check_dataset_folder(config["data_path"], run.dataset)
        check_table_metrics(run, config)
        if args.tune_budget and run.kind != "general" and not fits_once(run.model):
            schedules.setdefault(run.dataset, {})[run.variant] = tuple(config[key] for key in STOPPING_KEYS)
        if (run.variant, run.dataset) in seeded_once:
            continue
        if same_for_every_seed(run.model, config):
            seeded_once.add((run.variant, run.dataset))
        kept.append(run)
    for dataset, by_variant in schedules.items():
        check_same_schedule(dataset, by_variant)
    return kept


STOPPING_KEYS = ("epochs", "stopping_step", "eval_step")


def check_same_schedule(dataset, by_variant):
    """An equal-budget comparison trains every model of a sequential or context dataset under the same epoch cap
    and early stopping; a model's own YAML (EAGPS's ``epochs: 300``, CSA's ``epochs: 20``) may say otherwise."""
    if len(set(by_variant.values())) > 1:
        shown = "; ".join(
            f"{variant} " + ", ".join(f"{k} {v}" for k, v in zip(STOPPING_KEYS, values))
            for variant, values in sorted(by_variant.items())
        )
        raise ValueError(
            f"with --tune-budget every model of {dataset} trains under the same epoch cap and early "
            f"stopping, but {shown}; pass them for all, e.g. --epochs=200 --stopping_step=10 "
            "--eval_step=1"
        )


def check_table_metrics(run, config):
    """A run's record must hold its table's metrics: a dataset with no ``properties/dataset/<name>.yaml`` runs with
    RecBole's default metrics (Recall@10, ...), which no table shows."""
    keys = {str(m).lower() for m in config["metrics"]}
    keys |= {f"{str(m).lower()}@{k}" for m in config["metrics"] for k in config["topk"] or ()}
    missing = [m for m in dict.fromkeys(sum(required_metrics(run.kind), ())) if m not in keys]
    if missing:
        raise ValueError(
            f"{run.label}: the {run.kind} table needs {', '.join(missing)}, which its settings do not compute "
            f"(metrics {list(config['metrics'])}, topk {config['topk']}); add properties/dataset/{run.dataset}.yaml "
            "(copy one of properties/dataset/ for its protocol) or pass a --config_files file that sets metrics "
            "and topk, e.g. metrics: [Recall, NDCG] and topk: [20]"
        )


def budget_of(args):
    from recbole_mgformer.benchmark.tuning import TuneBudget
    from recbole_mgformer.tune.search import check_address

    if not args.tune_budget:
        if args.tune_defaults_first:
            raise ValueError(
                "--tune-defaults-first makes the first trial of each model's search its defaults; "
                "it needs a search: add --tune-budget N"
            )
        return None
    if min(args.tune_budget, args.tune_epochs, args.tune_grace) < 1:
        raise ValueError("--tune-budget, --tune-epochs and --tune-grace must be at least 1")
    if args.tune_gpus < 0:
        raise ValueError(
            f"--tune-gpus {args.tune_gpus}: a trial's share of a GPU is 0 (CPU only) or more, "
            "e.g. 0.25 for four trials a GPU"
        )
    if args.tune_address and args.tune_cpus is not None:
        raise ValueError(
            "--tune-cpus sizes a Ray started here; with --tune-address the cluster's own CPUs count, "
            "so leave --tune-cpus out"
        )
    check_address(args.tune_address)
    return TuneBudget(
        trials=args.tune_budget,
        epochs=args.tune_epochs,
        grace=args.tune_grace,
        seed=args.search_seed,
        cpus=args.tune_cpus,
        gpus=args.tune_gpus,
        address=args.tune_address,
        storage=args.tune_storage,
        defaults_first=args.tune_defaults_first,
    )


def search_before(run, budget, args, extra, searched):
    """The search that gives ``run`` its settings, unless this command already made sure of it. Raises Busy while
    another process runs that search (for each of its runs: none may start without its settings)."""
    from recbole_mgformer.benchmark.tuning import ensure_search, trained_overrides

    # a scoring-only variant takes the settings of the entry it trains as: that entry's search
    target = (run.dataset, *tuning_target(run.model, trained_overrides(run.model, run.overrides)))
    key = (target[0], target[1], tuple(sorted(target[2].items())))
    if key not in searched:
        try:
            ensure_search(
                target[1],
                target[2],
                run.dataset,
                budget,
                results=args.results,
                data_path=args.data_path,
                config_files=split_config_files(args.config_files),
                extra=extra,
                folder=args.tuned_dir,
                log=lambda line: print(line, flush=True),
            )
            searched[key] = None
        except Busy as busy:
            searched[key] = busy
    if searched[key] is not None:
        raise searched[key]


def setting_overrides(arguments):
    """:func:`recbole_mgformer.config.command_line.parse_overrides` of ``arguments``; none (and the runner not
    imported) without."""
    if not arguments:
        return {}
    from recbole_mgformer.config.command_line import parse_overrides

    return parse_overrides(arguments)


def main(argv=None):
    with user_errors():  # bad input: its message, no traceback
        return _main(argv)


def _main(argv):
    from recbole_mgformer.benchmark import __doc__ as doc

    argv = sys.argv[1:] if argv is None else list(argv)
    # no abbreviations: a RecBole setting such as --seed=5 would otherwise be taken for --seeds 5
    parser = argparse.ArgumentParser(
        prog="recbole-mgformer-benchmark",
        description=doc,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )
    parser.add_argument("--models", default="MGFormer,DirectAU,SimGCL,XSimGCL,SGL,LightGCN,BPR")
    parser.add_argument(
        "--datasets",
        default="amazon-beauty",
        help="comma-separated; each dataset's config in properties/dataset/ picks its table",
    )
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--data_path", default="dataset", help="RecBole's data_path; known datasets are imported here")
    parser.add_argument("--config_files", default="", help="space-separated YAML files applied to every run")
    parser.add_argument("--results", default="results", help="folder of runs/ and the pages (default ./results)")
    parser.add_argument("--checkpoint_dir", default="saved/benchmark", help="per-run checkpoints, for resuming")
    parser.add_argument("--render-only", action="store_true", help="only re-render every table from its records")
    scoring = parser.add_argument_group(
        "scoring-only variants (an entry with only scoring options more, e.g. MGFormer's filter_residual*): scored "
        "from the checkpoint of the entry they train as, trained first if it has no record"
    )
    scoring.add_argument(
        "--trained-results",
        default=None,
        help="results folder whose runs/ hold the trained entries' records (default --results)",
    )
    scoring.add_argument(
        "--retrain-missing-checkpoints",
        action="store_true",
        help="a trained entry whose record exists without its checkpoint moves to "
        "exploration/runs/ and trains again (default: an error)",
    )
    choice = parser.add_argument_group(
        "where a hybrid's filter weight was chosen, written into its records (choice_made_on, choice_dataset) and "
        "shown in its row's name"
    )
    choice.add_argument(
        "--choice-made-on",
        choices=CHOICES,
        default=None,
        help="validation: chosen on a validation set; test: on the test items (the row must say test-picked); "
        "none: a point of a grid that shows every weight",
    )
    choice.add_argument(
        "--choice-dataset",
        default=None,
        help="the dataset whose validation set chose it, where not the run's own (e.g. gowalla for a weight "
        "carried to gowalla-full); needs --choice-made-on validation",
    )
    tuning = parser.add_argument_group("equal-budget tuning: a search per model entry before its seed runs")
    tuning.add_argument("--tune-budget", type=int, default=0, help="trials of each entry's random search (0: none)")
    tuning.add_argument("--tune-epochs", type=int, default=30, help="epochs a trial trains at most (default 30)")
    tuning.add_argument("--tune-grace", type=int, default=5, help="evaluations before ASHA may stop a trial")
    tuning.add_argument("--search-seed", type=int, default=0, help="seed of the random search (default 0)")
    tuning.add_argument(
        "--tune-defaults-first",
        action="store_true",
        help="the first of each entry's --tune-budget trials runs the model's own defaults for the "
        "searched keys (properties/model/<Model>.yaml over RecBole's, under the command's "
        "settings), even one outside the space; the pages say so",
    )
    tuning.add_argument("--tune-cpus", type=int, default=None, help="CPUs of the local Ray (default all); 1 a trial")
    tuning.add_argument(
        "--tune-gpus", type=float, default=0, help="GPUs a trial takes; fractions share one (0.25: four trials a GPU)"
    )
    tuning.add_argument(
        "--tune-address",
        default=None,
        help="join an existing Ray cluster (auto: a local `ray start`) instead of starting Ray",
    )
    tuning.add_argument(
        "--tune-storage",
        default="saved/tune",
        help="Ray's folders of the searches (scratch: a search resumes from its records, "
        "<results>/tuning/<dataset>/<stem>.records/)",
    )
    tuning.add_argument(
        "--tuned-dir", default=None, help="where the chosen settings go and are read (default properties/benchmark)"
    )
    args, rest = parser.parse_known_args(argv)
    check_writable_folder(args.results, "--results")  # records and pages go there: a file or locked folder fails now
    extra = setting_overrides(rest)  # --key=value applied to every run, e.g. --device=cuda --epochs=5
    if not args.render_only:
        check_writable_folder(args.checkpoint_dir, "--checkpoint_dir")
        from recbole_mgformer.integration.patches import register  # rendering imports neither torch nor RecBole

        register()
        try:
            budget = budget_of(args)
            runs = planned_runs(args, extra, shlex.join(["python", "-m", "recbole_mgformer.benchmark", *argv]))
        except (ValueError, FileNotFoundError) as error:
            parser.error(str(error))
        searched = {}
        for index, run in enumerate(runs, start=1):
            label = f"[{index}/{len(runs)}] {run.label}"
            if budget:
                try:
                    search_before(run, budget, args, extra, searched)
                except Busy as busy:  # another benchmark process sharing these folders is on it
                    print(f"{label}: skipped, {busy}", flush=True)
                    continue
                except ValueError as error:  # TuneSetupError: a bad space, another budget on record
                    print(f"error: {error}", file=sys.stderr)
                    return 2
                except KeyboardInterrupt as stop:
                    print(f"stopped: {stop or 'interrupted'}; rerun the same command to continue", flush=True)
                    return 130
            try:  # "running" only once claimed: another process's run, or a record there, is a skip
                record = run.execute(announce=lambda label=label: print(f"{label}: running", flush=True))
            except Busy as busy:
                print(f"{label}: skipped, {busy}", flush=True)
                continue
            print(
                f"{label}: " + ("record exists, skipped" if record is None else finished_line(run, record)), flush=True
            )
    written = render_results(args.results)
    print("wrote " + ", ".join(str(path) for path in written))
    return 0
