"""What experiments/hybrid_grid.sh and trained_hybrid.sh ask of the benchmark: the ``filter_residual_*`` arguments that
give MGFormer's residual filter the settings the filter has on a dataset's board (so the hybrid adds the filter the
page shows), and the entry of a grid that validation chooses.

Usage: ``python -m recbole_mgformer.benchmark.hybrid DATASET FILTER [BOARD_RUNS]`` prints the arguments on one line
(the source on stderr): the filter's tuned file on the dataset, else its paper's YAML, with the settings its row on
the board (``BOARD_RUNS``, default ``results/runs``) was given (BSPM's README settings on ``yelp2018``);
``python -m recbole_mgformer.benchmark.hybrid --best-on-validation RUNS DATASET ENTRY...`` prints the entry whose
seed-0 record in ``RUNS/DATASET/`` has the highest validation NDCG@20;
``python -m recbole_mgformer.benchmark.hybrid --promote GRID_RUNS BOARD_RUNS DATASET ENTRY`` puts the chosen trained
entry's seed-0 run of the grid on the board (:func:`promote_chosen`).
"""

import json
import shutil
import sys
from pathlib import Path

from recbole_mgformer.benchmark.tuning import read_settings, search_info, tuned_file_for
from recbole_mgformer.config.defaults import benchmark_config_file, model_config_file
from recbole_mgformer.model.filter_residual import FILTERS, TRAINING_KEYS, filter_defaults


def filter_settings_source(dataset, kind):
    """The file of filter ``kind``'s settings on ``dataset``: its tuned file there, else its paper's YAML."""
    name = FILTERS[kind][0].__name__
    return benchmark_config_file(name, dataset) or model_config_file(name)


def board_overrides(board_runs, dataset, kind):
    """``(overrides, record path)`` of filter ``kind``'s row on ``dataset``'s board (``board_runs/<dataset>/``): the
    settings its entry gave over its file's (``BSPM[solver_sharpen=euler; ...]``), ``{}`` where the row has none or
    the board no row. A board with the filter at several settings leaves the choice to the caller: a ValueError
    naming them."""
    name = FILTERS[kind][0].__name__
    rows = {}
    for path in sorted((Path(board_runs) / dataset).glob("*-seed*.json")):
        record = json.loads(path.read_text())
        if record.get("model") == name:
            rows.setdefault(json.dumps(record.get("overrides") or {}, sort_keys=True), path)
    if len(rows) > 1:
        shown = "; ".join(f"{path.name}: {overrides}" for overrides, path in rows.items())
        raise ValueError(
            f"{name} has rows at {len(rows)} settings on {dataset}'s board ({shown}): which one the hybrid adds is a "
            "choice; give it as FILTER_ARGS (--filter_residual_k=... --filter_residual_alpha=... "
            "--filter_residual_settings={...})"
        )
    return next(((json.loads(overrides), path) for overrides, path in rows.items()), ({}, None))


def residual_arguments(dataset, kind, overrides=None):
    """The command-line arguments (a list) that set filter ``kind``'s residual to its settings on ``dataset``
    (:func:`filter_settings_source`, with ``overrides`` over them: its board row's, :func:`board_overrides`): its
    low-rank part as ``--filter_residual_k`` / ``--filter_residual_alpha``, and any other setting that differs from
    its paper's in one ``--filter_residual_settings`` literal without spaces (the script splits its arguments on
    them)."""
    filter_class, rank_key, share_key = FILTERS[kind]
    settings = read_settings(filter_settings_source(dataset, kind))
    settings.update(overrides or {})
    papers = {**filter_defaults(filter_class.__name__), **{key: settings[key] for key in (rank_key, share_key)}}
    arguments = [f"--filter_residual_k={papers[rank_key]}", f"--filter_residual_alpha={papers[share_key]}"]
    changed = {
        key: value
        for key, value in sorted(settings.items())
        if key not in (rank_key, share_key, "filter_batch_size", *TRAINING_KEYS) and value != papers.get(key)
    }
    if changed:
        literal = "{" + ",".join(f"{key!r}:{value!r}" for key, value in changed.items()) + "}"
        if any(char.isspace() for char in literal):
            raise ValueError(f"{kind} settings on {dataset} hold a space, which the script cannot pass: {literal}")
        arguments.append(f"--filter_residual_settings={literal}")
    return arguments


VALIDATION_METRIC = "ndcg@20"


def best_on_validation(runs, dataset, entries, seed=0):
    """The entry of ``entries`` whose record at ``seed`` in ``runs`` has the highest validation NDCG@20; the first of
    equal scores, so a grid listed from the smallest weight up chooses the smallest of equal weights."""
    from recbole_mgformer.benchmark.entries import parse_entry, variant_name
    from recbole_mgformer.benchmark.runs import record_path

    def score(entry):
        path = record_path(runs, dataset, variant_name(*parse_entry(entry)), seed)
        if not path.exists():
            raise FileNotFoundError(f"{entry} has no record at seed {seed} ({path}): run the grid before choosing")
        return json.loads(path.read_text())["valid"][VALIDATION_METRIC]

    if not entries:
        raise ValueError("no entries to choose from")
    return max(entries, key=score)


def promote_chosen(grid_runs, board_runs, dataset, entry, seed=0):
    """Copy the grid's record of ``entry`` at ``seed`` (and its per-user values) to the board's runs, now saying its
    weight was chosen on validation: the grid's run is the run validation chose from, so the board's would train it
    a second time from the same seed. Returns the board's record path, or None where the board has one already.
    Only a run that trained itself moves (a scored record names its trained entry's paths in the grid's folder)."""
    from recbole_mgformer.benchmark.entries import parse_entry, variant_name
    from recbole_mgformer.benchmark.run_record import record_path
    from recbole_mgformer.benchmark.stats import per_user_path
    from recbole_mgformer.records import shown_path, write_record

    variant = variant_name(*parse_entry(entry))
    source, target = record_path(grid_runs, dataset, variant, seed), record_path(board_runs, dataset, variant, seed)
    if target.exists():
        return None
    if not source.exists():
        raise FileNotFoundError(f"{entry} has no record at seed {seed} ({source}): run the grid before promoting")
    record = json.loads(source.read_text())
    if "scored_from" in record:
        raise ValueError(f"{source} is scored from {record['scored_from']['variant']}: score it on the board instead")
    if record.get("choice_made_on") != "none":
        raise ValueError(f"{source} says choice_made_on {record.get('choice_made_on')!r}, not 'none': not a grid's run")
    board_results = Path(board_runs).parent
    record.update(choice_made_on="validation", promoted_from=shown_path(source, board_results))
    # the same tuned file trained it; the board's folder may also hold the search that chose the file, which a run
    # there records (without it, the board would move the record aside as trained before that search)
    record.pop("tuning", None)
    tuning = search_info(tuned_file_for(*parse_entry(entry), dataset), board_results)
    if tuning:
        record["tuning"] = tuning
    target.parent.mkdir(parents=True, exist_ok=True)
    if per_user_path(source).exists():  # first: the record, written last, says the run is there
        shutil.copyfile(per_user_path(source), per_user_path(target))
    write_record(target, record, overwrite=False)
    return target


USAGE = (
    "usage: python -m recbole_mgformer.benchmark.hybrid DATASET FILTER [BOARD_RUNS] | --best-on-validation RUNS "
    "DATASET ENTRY [ENTRY ...] | --promote GRID_RUNS BOARD_RUNS DATASET ENTRY"
)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    try:
        _main(argv)
    except (FileNotFoundError, ValueError) as error:  # a grid not yet run, a bad entry: named, not a traceback
        sys.exit(f"error: {error}")


def _main(argv):
    if argv[:1] == ["--best-on-validation"]:
        if len(argv) < 4:
            sys.exit("usage: --best-on-validation RUNS DATASET ENTRY [ENTRY ...]")
        runs, dataset, *entries = argv[1:]
        print(best_on_validation(runs, dataset, entries))
        return
    if argv[:1] == ["--promote"]:
        if len(argv) != 5:
            sys.exit("usage: --promote GRID_RUNS BOARD_RUNS DATASET ENTRY")
        target = promote_chosen(*argv[1:])
        print(f"{argv[4]} at seed 0: {f'copied to {target}' if target else 'on the board already'}", file=sys.stderr)
        return
    if len(argv) not in (2, 3) or argv[0].startswith("-"):
        sys.exit(USAGE)
    dataset, kind, board_runs = (*argv, "results/runs")[:3]
    if kind not in FILTERS:
        sys.exit(f"unknown filter {kind!r}; choose one of {', '.join(FILTERS)}")
    overrides, row = board_overrides(board_runs, dataset, kind)
    source = filter_settings_source(dataset, kind) + (f", with the settings of its row {row}" if overrides else "")
    print(f"{FILTERS[kind][0].__name__}'s settings from {source}", file=sys.stderr)
    print(" ".join(residual_arguments(dataset, kind, overrides)))


if __name__ == "__main__":
    main()
