"""``python -m recbole_mgformer.tune`` and the ``recbole-mgformer-tune`` console script."""

import argparse
import json
import shlex
import sys
from pathlib import Path

from recbole_mgformer.config.command_line import config_settings
from recbole_mgformer.config.input_checks import user_errors, write_new_text
from recbole_mgformer.integration.patches import register
from recbole_mgformer.tune.report import render_markdown
from recbole_mgformer.tune.search import tune_recommender
from recbole_mgformer.tune.space import SEARCHES, TuneSetupError


def main(argv=None):
    register()
    with user_errors():  # bad input: its message, no traceback
        return _main(argv)


def _main(argv):
    parser = argparse.ArgumentParser(
        prog="recbole-mgformer-tune",
        description=__doc__,
        allow_abbrev=False,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--model", "-m", default="MGFormer", help="model name, e.g. MGFormer, LightGCN, BPR")
    parser.add_argument("--dataset", "-d", default="ml-100k", help="dataset name (a folder under --data_path)")
    parser.add_argument(
        "--space",
        default=None,
        help="search space YAML (default properties/hyper/<dataset>/<Model>.yaml where the dataset "
        "has its own, else properties/hyper/<Model>.yaml)",
    )
    # None: the default of a new search, or on --resume the value the search started with
    parser.add_argument("--search", choices=SEARCHES, default=None, help="search algorithm (default random)")
    parser.add_argument("--samples", type=int, default=None, help="trials drawn by random/hyperopt search (default 10)")
    parser.add_argument(
        "--scheduler", choices=("asha", "fifo"), default=None, help="asha (default) stops poor trials early"
    )
    parser.add_argument(
        "--grace-period", type=int, default=None, help="evaluations before ASHA may stop a trial (default 10)"
    )
    parser.add_argument("--cpus-per-trial", type=float, default=1)
    parser.add_argument("--gpus-per-trial", type=float, default=0, help="fractions share a GPU, e.g. 0.25")
    parser.add_argument("--address", default=None, help="join this Ray cluster (e.g. auto, or host:6379)")
    parser.add_argument("--num-cpus", type=int, default=None, help="CPUs of the Ray started here (default all)")
    parser.add_argument("--num-gpus", type=int, default=None, help="GPUs of the Ray started here (default all)")
    parser.add_argument("--data_path", default=None, help="RecBole's data_path (default dataset)")
    parser.add_argument("--config_files", default=None, help="space-separated YAML files for every trial")
    parser.add_argument(
        "--results",
        default="tuning",
        help="folder of <name>.md/.json/.yaml, the search's report (default ./tuning; name <Model>-<dataset>)",
    )
    parser.add_argument(
        "--storage",
        default="saved/tune",
        help="searches' folders: <name>/ holds Ray's folders (scratch), and the search's records unless --records",
    )
    parser.add_argument(
        "--records",
        default=None,
        metavar="DIR",
        help="folder of the search's own records (its request and trials/<index>.json, plain JSON; default "
        "<storage>/<name>): kept apart from Ray's (e.g. committed with the results), they continue the search "
        "with --resume on a new machine",
    )
    parser.add_argument(
        "--temp-dir",
        default=None,
        help="Ray's temporary folder (default <storage>/ray-tmp if short, else /tmp/ray-recbole-mgformer)",
    )
    parser.add_argument(
        "--name",
        default=None,
        help="search name: its Ray folder and its report files <name>.md/.json/.yaml (default <Model>-<dataset>)",
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue an interrupted search from its records (--records, default <storage>/<name>/; copied from "
        "another machine too, Ray's folders not needed): finished trials kept, the same remaining draws run; a "
        "changed setting is refused",
    )
    parser.add_argument("--search-seed", type=int, default=None, help="seed of the search algorithm's draws (0)")
    parser.add_argument(
        "--defaults-first",
        action="store_true",
        default=None,
        help="the first of the --samples trials runs the model's own defaults for the searched keys "
        "(properties/model/<Model>.yaml over RecBole's, under your settings), even one outside "
        "the space (random search; hyperopt refuses it, naming the key)",
    )
    parser.add_argument("--no-retrain", action="store_true", help="skip retraining the best configuration")
    parser.add_argument("--verbose", type=int, default=1, choices=(0, 1, 2), help="Ray Tune's progress output")
    parser.add_argument(
        "--render",
        nargs="+",
        metavar="RECORD",
        default=None,
        help="only rewrite the page (.md) beside each search record (.json), e.g. tuning/*.json",
    )
    args, rest = parser.parse_known_args(sys.argv[1:] if argv is None else argv)
    if args.render:
        return render_pages(args.render)
    if args.search == "grid" and args.samples is not None:  # the record would say 1 sample of each combination
        parser.error("--samples sets the draws of a random or hyperopt search; a grid runs each combination once")
    if args.scheduler == "fifo" and args.grace_period is not None:
        parser.error("--grace-period sets when ASHA may stop a trial; --scheduler fifo stops none (drop one of them)")
    try:
        config_files, overrides = config_settings(args, rest)
        summary = tune_recommender(
            args.model,
            args.dataset,
            args.space,
            config_files=config_files,
            config_dict=overrides,
            data_path=args.data_path,
            search=args.search,
            samples=args.samples,
            scheduler=args.scheduler,
            grace_period=args.grace_period,
            cpus_per_trial=args.cpus_per_trial,
            gpus_per_trial=args.gpus_per_trial,
            address=args.address,
            num_cpus=args.num_cpus,
            num_gpus=args.num_gpus,
            results_dir=args.results,
            storage_dir=args.storage,
            records_dir=args.records,
            temp_dir=args.temp_dir,
            name=args.name,
            resume=args.resume,
            search_seed=args.search_seed,
            retrain_best=not args.no_retrain,
            verbose=args.verbose,
            defaults_first=args.defaults_first,
        )
    except TuneSetupError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    rows, best = summary["rows"], summary["best"]
    print(f"{len(rows)} trials ({sum(r['status'] == 'failed' for r in rows)} failed); wrote {summary['markdown']}")
    if summary["interrupted"]:
        given = (("--storage", args.storage), ("--records", args.records))  # where the resume must look again
        where = "".join(f" {o} {shlex.quote(str(v))}" for o, v in given if v and v != parser.get_default(o[2:]))
        print(f"interrupted: resume with --resume --name {summary['request']['name']}{where}")
        return 130
    if best is None:
        print("no trial finished; see the errors in the table")
        return 1
    print(f"best valid {summary['request']['metric']} {best['score']:.4f}: {summary['best_yaml']}")
    if summary["retrain_error"]:
        print(f"retraining the best configuration failed: {summary['retrain_error']}")
    if summary["retrained"]:
        print("test " + ", ".join(f"{k} {v:.4f}" for k, v in summary["retrained"]["test_result"].items()))
    return 0


def render_pages(records):
    """Rewrite the page of each search from its record (the JSON beside it), without searching; a file that is not
    a search record is named and skipped (exit status 2)."""
    status = 0
    for record in map(Path, records):
        try:
            page = render_markdown(json.loads(record.read_text()))
        except (OSError, ValueError, KeyError, TypeError) as error:
            print(
                f"error: {record} is not a search record of this tool ({type(error).__name__}: {error}); skipped",
                file=sys.stderr,
            )
            status = 2
            continue
        write_new_text(record.with_suffix(".md"), page, "--render", overwrite=True)  # whole, never half a page
        print(f"wrote {record.with_suffix('.md')}")
    return status
