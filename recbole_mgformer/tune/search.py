"""The search itself: a checked request, Ray started or joined, the trials run, the results written.

The pieces: request.py (the checked request), records.py (the search's plain-data records), resume.py (the
request rebuilt on --resume), draws.py (the trials a search runs), tuner.py (Ray), recorder.py (each finished
trial's record)."""

import json
import os
import time
from pathlib import Path

from recbole_mgformer.config.input_checks import check_writable, check_writable_folder, write_new_text
from recbole_mgformer.records import code_commit, display_path, machine, package_versions
from recbole_mgformer.training.checkpoint_files import plain_value
from recbole_mgformer.tune.draws import plan_trials
from recbole_mgformer.tune.records import (
    REQUEST_FILE,
    SEARCH_FIELDS,
    as_json,
    claim_request,
    read_trial_records,
    records_folder,
    search_locks,
)
from recbole_mgformer.tune.report import best_config_yaml, ranked, render_markdown, sort_rows
from recbole_mgformer.tune.request import check_address, check_dataset_files, check_trial_resources, make_request
from recbole_mgformer.tune.resume import prepare_experiment
from recbole_mgformer.tune.retrain import retrain_on_ray
from recbole_mgformer.tune.space import TuneSetupError
from recbole_mgformer.tune.trials import UNFINISHED
from recbole_mgformer.tune.tuner import build_tuner, check_resources, default_temp_dir, fit_tuner, init_ray

# the request's and the tuner's pieces used from here before they had their own modules
__all__ = [
    "REQUEST_FILE",
    "check_address",
    "default_temp_dir",
    "make_request",
    "report_paths",
    "tune_recommender",
]

DEFAULT_RESULTS = "tuning"  # reports go to ./tuning/ in the current folder unless --results names another


def report_paths(request, results_dir=None, stem=None):
    """``{md, json, yaml: path}`` of the search's report, named after it (``stem``, else its ``--name``); a
    TuneSetupError where one of them belongs to another search (:func:`report_owner_differs`), before anything
    runs."""
    folder = Path(results_dir or DEFAULT_RESULTS).resolve()
    stem = stem or request["name"]
    paths = {suffix: folder / f"{stem}.{suffix}" for suffix in ("md", "json", "yaml")}
    existing = [path for path in paths.values() if path.exists()]
    if not existing:
        return paths
    try:
        owner = json.loads(paths["json"].read_text())
        owner = owner if isinstance(owner, dict) and isinstance(owner.get("request"), dict) else None
    except (OSError, ValueError):
        owner = None
    if owner is None or report_owner_differs(owner, request, folder):
        shown = (owner or {}).get("request", {}).get("experiment") or "no search record beside it"
        raise TuneSetupError(
            f"{existing[0]} is the report of another search ({shown}), not of "
            f"{request['experiment']}; give this search its own report with another --name (or --results folder), "
            "or move those files away"
        )
    return paths


def report_owner_differs(record, request, folder):
    """Whether the report ``record`` (its ``.json``, in ``folder``) is another search's than ``request``'s: it
    names another search folder, unless it is the same search (same digest and name) written on another machine
    with its records at the same place relative to the report (the benchmark's ``<stem>.records/`` beside it).
    The report's JSON sorts its keys, so the fields are compared whatever their order; the records, which keep it,
    are checked against the search when read."""
    owner = record["request"]
    if owner.get("experiment") == request["experiment"]:
        return False
    try:
        same_search = _unordered(owner) == _unordered(request) and owner.get("name") == request["name"]
        there = os.path.relpath(records_folder(owner), Path(record["markdown"]).parent)
    except (KeyError, TypeError, ValueError):
        return True
    return not (same_search and there == os.path.relpath(records_folder(request), folder))


def _unordered(request):
    return json.dumps(as_json({field: request.get(field) for field in SEARCH_FIELDS}), sort_keys=True)


def record_row(record):
    """A finished trial's row on the page, from its record."""
    row = {key: record[key] for key in ("trial", "status", "score", "epochs", "valid", "params", "error")}
    row["index"] = record["index"]
    if record.get("defaults"):
        row["defaults"] = True
    return row


def tune_recommender(
    model,
    dataset,
    space=None,
    *,
    config_files=None,
    config_dict=None,
    data_path=None,
    search=None,
    samples=None,
    scheduler=None,
    grace_period=None,
    cpus_per_trial=1,
    gpus_per_trial=0,
    address=None,
    num_cpus=None,
    num_gpus=None,
    results_dir=None,
    storage_dir=None,
    records_dir=None,
    temp_dir=None,
    name=None,
    resume=False,
    search_seed=None,
    retrain_best=True,
    verbose=1,
    stem=None,
    defaults_first=None,
    log=print,
):
    """Search hyperparameters of ``model`` on ``dataset`` with Ray Tune; returns a summary dict.

    ``space``: a YAML file or mapping (``properties/hyper/<Model>.yaml`` when None), see the module's docstring.
    ``config_files``/``config_dict``: fixed settings of every trial, as in ``run_recommender``; ``data_path``:
    RecBole's data folder (``dataset``). ``search``: ``random`` (default; ``samples`` draws, 10 by default, each
    over every grid point), ``grid`` (every combination of the listed values) or ``hyperopt`` (TPE,
    ``pip install hyperopt==0.2.5``).
    ``scheduler``: ``asha`` (default) stops poor trials after ``grace_period`` (10) evaluations; ``fifo`` never.
    ``cpus_per_trial``/``gpus_per_trial`` (fractions allowed) share the machine, or the Ray cluster at
    ``address`` (``auto`` for a local ``ray start``); ``num_cpus``/``num_gpus`` cap a Ray started here.
    ``storage_dir``: Ray's results (``saved/tune``), the experiment ``name`` (``<Model>-<dataset>``) inside;
    ``records_dir``: the search's own records (its request and one JSON file per finished trial,
    :mod:`recbole_mgformer.tune.records`), that experiment folder when None: a folder kept apart from Ray's
    scratch (committed with the results) continues the search on a new machine. ``temp_dir``: Ray's temporary
    folder (see :func:`default_temp_dir`). ``resume``: continue an interrupted search from its own records (Ray's
    pickles are never read, and Ray's folder may be gone): finished and failed trials stay, the others run from
    their first epoch, the same draws as an uninterrupted search. The settings left None take the values the
    search started with; one given that differs is refused (:func:`~recbole_mgformer.tune.resume.resume_changes`).
    A second command on the same search stops with an error while one runs it. ``results_dir`` (``./tuning``)
    receives ``<name>.md``, ``.json`` and the best ``.yaml`` (the searched values only), named after the search
    (``<Model>-<dataset>`` by default); files there of another search are never replaced, and a folder that cannot
    be written fails before Ray starts.
    ``retrain_best``: train the best configuration once more for its test metrics. ``stem``: the name of the
    written files (the search's name). ``defaults_first``: the first of the ``samples`` trials runs the model's
    own defaults for the searched keys (``properties/model/<Model>.yaml`` over RecBole's, merged as a plain run
    merges them, under ``config_files`` and ``config_dict``), a value outside the space included (random search;
    hyperopt refuses one, naming the key); its row is marked ``defaults`` on the page and in the record.
    ``log``: receives the line a resumed search starts with.

    The summary holds ``request``, ``rows`` (all trials, best first), ``best`` (a row or None), ``best_yaml``,
    ``retrained`` (``run_recommender``'s dict or None), ``interrupted``, ``markdown`` (the page's path).
    """
    check_address(address)
    check_trial_resources(cpus_per_trial, gpus_per_trial, num_cpus, num_gpus)
    for folder, option in (
        (storage_dir or "saved/tune", "--storage"),
        (records_dir, "--records"),
        (temp_dir, "--temp-dir"),
    ):
        if folder is not None:  # a file there stopped the search with "[Errno 17] File exists"
            try:
                check_writable_folder(folder, option)
            except OSError as error:
                raise TuneSetupError(str(error)) from None
    settings = {key: value for key, value in (config_dict or {}).items() if key != "data_path"}
    given = {
        field
        for field, value in (
            ("space", space),
            ("search", search),
            ("samples", samples),
            ("scheduler", scheduler),
            ("grace_period", grace_period),
            ("search_seed", search_seed),
            ("config_files", config_files),
            ("defaults_first", defaults_first),
            ("overrides", settings or None),
            ("data_path", data_path or (config_dict or {}).get("data_path")),
        )
        if value is not None
    }
    request = make_request(
        model,
        dataset,
        space,
        config_files,
        config_dict,
        data_path,
        search or "random",
        10 if samples is None else samples,
        scheduler or "asha",
        10 if grace_period is None else grace_period,
        search_seed or 0,
        name,
        storage_dir,
        defaults_first=bool(defaults_first),
        records_dir=records_dir,
    )
    request = prepare_experiment(request, resume, given)  # a new search's claim comes later, exclusive
    paths = report_paths(request, results_dir, stem)  # the request as it runs: on --resume, the stored one's
    try:
        check_writable(paths["md"], "--results")  # before any trial: the report is what the search is for
    except OSError as error:
        raise TuneSetupError(str(error)) from None
    check_dataset_files(request)
    with search_locks(request):  # from here on, no other command runs this search
        plan = plan_trials(request, read_trial_records(records_folder(request), request) if resume else {})
        if resume:
            log(resume_line(request, plan))
        existed = {suffix for suffix, path in paths.items() if path.exists()}
        ray_options = {"address": address, "num_cpus": num_cpus, "num_gpus": num_gpus, "temp_dir": temp_dir}
        resources = (cpus_per_trial, gpus_per_trial)
        summary = run_search(request, plan, ray_options, resources, verbose, retrain_best, claim=not resume)
        summary["markdown"] = str(paths["md"])
        summary["best_yaml"] = display_path(paths["yaml"]) if summary["best"] is not None else None
        write_report(paths, existed, summary, request)
    return summary


def resume_line(request, plan):
    """The log line of a resumed search: what it keeps, what it runs, and where unfinished trials go on from."""
    if not plan.to_run:
        where = ""
    elif plan.drawn is None:  # hyperopt's trials are known by their values only once they end
        where = ", those that were running when the search stopped among them, each from its first epoch"
    else:
        kept = sorted((Path(request["experiment"]) / UNFINISHED).glob("trial-*.latest.pth"))
        where = (
            ", those that were running when the search stopped among them, each from its last epoch's checkpoint "
            f"({len(kept)} in {Path(request['experiment']) / UNFINISHED}), else from its first epoch"
        )
    return (
        f"resuming {request['name']}: {len(plan.records)} of {plan.total} trials finished (kept, not trained "
        f"again); {plan.to_run} to run" + where
    )


def run_search(request, plan, ray_options, resources, verbose, retrain_best, claim):
    """Ray started (``ray_options``: address, num_cpus, num_gpus, temp_dir) or joined, the request claimed (a new
    search), the plan's trials run with ``resources`` (CPUs, GPUs) each, the best retrained: the summary, less its
    file names."""
    import ray

    from recbole_mgformer.tune.recorder import TrialRecorder

    temp_dir = ray_options["temp_dir"] or default_temp_dir(request["storage"])
    started = init_ray(ray_options["address"], ray_options["num_cpus"], ray_options["num_gpus"], temp_dir)
    try:
        check_resources(*resources)
        if claim:
            claim_request(request)
        commit = code_commit()
        recorder = TrialRecorder(request, plan)
        if plan.to_run:
            fit_tuner(build_tuner(request, plan, recorder, *resources, verbose))
        records = {**plan.records, **recorder.written}
        rows = [record_row(record) for _, record in sorted(records.items())] + recorder.unfinished_rows()
        rows = sort_rows(rows, request["mode"] == "max")
        best = next((r for r in rows if ranked(r)), None)
        summary = {
            "request": request,
            "rows": rows,
            "best": best,
            "best_yaml": None,
            "retrained": None,
            "retrain_error": None,
            "interrupted": len(records) < plan.total,
        }
        if best is not None and retrain_best and not summary["interrupted"]:
            summary["retrained"], summary["retrain_error"] = retrain_on_ray(request, best, *resources)
    finally:
        if started:
            ray.shutdown()
    summary["provenance"] = {
        "commit": commit,
        "machine": machine(),
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "versions": {**package_versions(), "ray": ray.__version__},
    }
    return summary


def write_report(paths, existed, summary, request):
    """The best YAML, the page and the record, each written whole; a file of the report that was not there when
    the search started and is now (another search, writing the same name meanwhile) is never replaced."""
    texts = {"md": render_markdown(summary), "json": json.dumps(plain_value(summary), indent=2, sort_keys=True) + "\n"}
    if summary["best"] is not None:
        texts["yaml"] = best_config_yaml(request, summary["best"], summary["best_yaml"])
    for suffix in ("yaml", "md", "json"):
        if suffix not in texts:
            continue
        try:
            write_new_text(paths[suffix], texts[suffix], "--results", overwrite=suffix in existed)
        except FileExistsError:
            raise TuneSetupError(
                f"--results {paths[suffix]}: another search wrote this file while this one ran; this search's "
                f"trials are recorded in {records_folder(request)}: write its report elsewhere with --resume "
                f"--name {request['name']} --results <another folder>"
            ) from None
