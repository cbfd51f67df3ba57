"""The search itself: a checked request, Ray started or joined, the trials run, the results written.

The pieces: request.py (the checked request), resume.py (its copy in the experiment folder), tuner.py (Ray)."""

import json
import shutil
import time
from pathlib import Path

from recbole_mgformer.checkpoint_files import plain_value
from recbole_mgformer.records import (
    code_commit,
    display_path,
    machine,
    package_versions,
    write_record,
)
from recbole_mgformer.tune.report import (
    best_config_yaml,
    ranked,
    render_markdown,
    sort_rows,
    trial_rows,
)
from recbole_mgformer.tune.request import check_address, check_dataset_files, make_request
from recbole_mgformer.tune.resume import REQUEST_FILE, prepare_experiment, store_request
from recbole_mgformer.tune.retrain import retrain_on_ray
from recbole_mgformer.tune.space import TuneSetupError
from recbole_mgformer.tune.trials import STATES_DIR
from recbole_mgformer.tune.tuner import build_tuner, check_resources, default_temp_dir, fit_tuner, init_ray

# the request's and the tuner's pieces used from here before they had their own modules
__all__ = [
    "REQUEST_FILE",
    "check_address",
    "default_temp_dir",
    "make_request",
    "mark_first_trial",
    "report_paths",
    "tune_recommender",
]


def report_paths(request, results_dir=None, stem=None):
    """``{md, json, yaml: path}`` of the search's report, named after it (``stem``, else its ``--name``); a
    TuneSetupError where one of them belongs to another search (its record names another experiment), before
    anything runs."""
    folder = Path(results_dir or "results/tuning").resolve()
    stem = stem or request["name"]
    paths = {suffix: folder / f"{stem}.{suffix}" for suffix in ("md", "json", "yaml")}
    existing = [path for path in paths.values() if path.exists()]
    if not existing:
        return paths
    try:
        owner = json.loads(paths["json"].read_text())["request"]["experiment"]
    except (OSError, ValueError, KeyError, TypeError):
        owner = None
    if owner != request["experiment"]:
        raise TuneSetupError(
            f"{existing[0]} is the report of another search ({owner or 'no search record beside it'}), not of "
            f"{request['experiment']}; give this search its own report with another --name (or --results folder), "
            "or move those files away"
        )
    return paths


def mark_first_trial(rows, first_trial):
    """Mark ``defaults: True`` on the row of the trial that ran ``first_trial`` (the model's defaults): the first
    row, in the order Ray created the trials, whose values are that point."""
    if first_trial is None:
        return
    point = plain_value(first_trial)
    for row in rows:
        if row["params"] == point:
            row["defaults"] = True
            return


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
    temp_dir=None,
    name=None,
    resume=False,
    search_seed=None,
    retrain_best=True,
    verbose=1,
    stem=None,
    defaults_first=None,
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
    ``temp_dir``: Ray's temporary folder (see :func:`default_temp_dir`). ``resume``: continue an interrupted
    search from its folder; finished and failed trials stay, unfinished ones continue from their last epoch. The
    settings left None take the values the search started with; one given that differs is refused
    (:func:`resume_changes`). ``results_dir`` (``results/tuning``) receives ``<name>.md``, ``.json`` and the best
    ``.yaml``, named after the search (``<Model>-<dataset>`` by default); files there of another search are never
    replaced. ``retrain_best``: train the best configuration once more for its test metrics. ``stem``: the name of
    the written files (the search's name). ``defaults_first``: the first of the ``samples`` trials runs the model's
    own defaults for the searched keys (``properties/model/<Model>.yaml`` over RecBole's, merged as a plain run
    merges them, under ``config_files`` and ``config_dict``), a value outside the space included (random search;
    hyperopt refuses one, naming the key); its row is marked ``defaults`` on the page and in the record.

    The summary holds ``request``, ``rows`` (all trials, best first), ``best`` (a row or None), ``best_yaml``,
    ``retrained`` (``run_recommender``'s dict or None), ``interrupted``, ``markdown`` (the page's path).
    """
    import ray

    check_address(address)
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
    )
    request = prepare_experiment(request, resume, given)
    check_dataset_files(request)
    paths = report_paths(request, results_dir, stem)
    started = init_ray(address, num_cpus, num_gpus, temp_dir or default_temp_dir(request["storage"]))
    try:
        check_resources(cpus_per_trial, gpus_per_trial)
        store_request(request)
        commit = code_commit()
        grid = fit_tuner(build_tuner(request, cpus_per_trial, gpus_per_trial, resume, verbose))
        rows = trial_rows(grid, list(request["space"]))
        mark_first_trial(rows, request.get("first_trial"))
        rows = sort_rows(rows, request["mode"] == "max")
        best = next((r for r in rows if ranked(r)), None)
        summary = {
            "request": request,
            "rows": rows,
            "best": best,
            "best_yaml": None,
            "retrained": None,
            "retrain_error": None,
            "interrupted": any(r["status"] == "unfinished" for r in rows),
        }
        if not summary["interrupted"]:  # trials ASHA stopped left their last epoch behind
            shutil.rmtree(Path(request["experiment"]) / STATES_DIR, ignore_errors=True)
        if best is not None and retrain_best and not summary["interrupted"]:
            summary["retrained"], summary["retrain_error"] = retrain_on_ray(
                request, best, cpus_per_trial, gpus_per_trial
            )
    finally:
        if started:
            ray.shutdown()
    summary["provenance"] = {
        "commit": commit,
        "machine": machine(),
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "versions": {**package_versions(), "ray": ray.__version__},
    }
    paths["md"].parent.mkdir(parents=True, exist_ok=True)
    if best is not None:
        summary["best_yaml"] = display_path(paths["yaml"])
        paths["yaml"].write_text(best_config_yaml(request, best, summary["best_yaml"]))
    paths["md"].write_text(render_markdown(summary))
    write_record(paths["json"], plain_value(summary))
    summary["markdown"] = str(paths["md"])
    return summary
