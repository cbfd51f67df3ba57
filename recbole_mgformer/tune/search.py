"""The search itself: a checked request, Ray started or joined, the trials run, the results written."""

import importlib.util
import json
import logging
import os
import shutil
import signal
import tempfile
import threading
import time
from pathlib import Path

from recbole_mgformer.checkpoint_files import plain_value
from recbole_mgformer.data import validate_dataset_files
from recbole_mgformer.data.sources import ensure_dataset
from recbole_mgformer.quick_start import build_config
from recbole_mgformer.records import (
    code_commit,
    display_path,
    machine,
    package_versions,
    write_record,
)
from recbole_mgformer.registry import fits_once, get_model
from recbole_mgformer.safety import UnsafeSettingError, check_literal_strings
from recbole_mgformer.tune.report import (
    best_config_yaml,
    ranked,
    render_markdown,
    sort_rows,
    trial_rows,
)
from recbole_mgformer.tune.retrain import retrain_on_ray
from recbole_mgformer.tune.space import (
    TuneSetupError,
    check_keys,
    default_point,
    load_space,
    parse_space,
    ray_space,
)
from recbole_mgformer.tune.trials import METRIC, PROGRESS, STATES_DIR, WholeValue, train_trial

REQUEST_FILE = "recbole_mgformer_tune.json"  # the search's settings, inside Ray's experiment folder, for --resume


def default_temp_dir(storage):
    """Ray's temporary folder: ``<storage>/ray-tmp`` when short enough, else ``/tmp/ray-recbole-mgformer``.

    Ray puts unix sockets at ``<temp>/session_<date>_<pid>/sockets/...``, which must stay under 107 characters."""
    candidate = Path(storage) / "ray-tmp"
    return candidate if len(str(candidate)) <= 40 else Path(tempfile.gettempdir()) / "ray-recbole-mgformer"


def _driver_config(model, dataset, config_files, config_dict):
    """The model's final config, built in this process without touching its CUDA_VISIBLE_DEVICES
    (RecBole's Config rewrites it, which would hide GPUs from Ray)."""
    saved = os.environ.get("CUDA_VISIBLE_DEVICES")
    try:
        return build_config(model, dataset, config_files, config_dict)[0]
    finally:
        if saved is None:
            os.environ.pop("CUDA_VISIBLE_DEVICES", None)
        else:
            os.environ["CUDA_VISIBLE_DEVICES"] = saved


def _evaluations(config, parsed):
    """How many times a trial reports at most: the epochs (the largest searched) over eval_step; once for a model
    fit in its constructor (EASE, ItemKNN, ...: RecBole's traditional trainer runs one epoch whatever ``epochs``
    says), so a trial is one fit and ASHA's grace period shrinks to it."""
    if fits_once(config["model"]):
        return 1
    epochs = config["epochs"]
    if "epochs" in parsed:
        epochs = max(int(v) for v in parsed["epochs"][1])
    return max(1, epochs // max(1, config["eval_step"]))


def make_request(
    model,
    dataset,
    space=None,
    config_files=None,
    config_dict=None,
    data_path=None,
    search="random",
    samples=10,
    scheduler="asha",
    grace_period=10,
    search_seed=0,
    name=None,
    storage_dir=None,
    defaults_first=False,
):
    """Everything a search (and its resumption) needs, checked: raises TuneSetupError before any trial starts.

    ``defaults_first``: the first of the ``samples`` trials runs the model's defaults (:func:`default_point`),
    kept in the request as ``first_trial`` (and the keys where they lie outside the space, ``first_trial_outside``:
    run anyway); the other trials are drawn as without it."""
    try:
        model = get_model(model).__name__
    except ValueError as error:
        raise TuneSetupError(str(error)) from None
    if isinstance(samples, bool) or not isinstance(samples, int) or samples < 1:
        raise TuneSetupError(f"--samples {samples!r}: a search draws at least 1 sample; give --samples 1 or more")
    if name is not None and (not str(name).strip() or Path(str(name)).name != str(name) or str(name) in (".", "..")):
        raise TuneSetupError(f"--name {name!r}: give a plain folder name (no '/'), e.g. --name {model}-{dataset}-wide")
    raw, source = load_space(space, model, dataset)
    parsed = parse_space(raw, source)
    overrides = dict(config_dict or {})
    # the best YAML keeps the path as given (e.g. "dataset"), not this machine's absolute one the trials need
    data_path_given = overrides.pop("data_path", None) or data_path
    data_path = str(Path(data_path_given or "dataset").resolve())
    config_files = [str(Path(p).resolve()) for p in (config_files or [])]
    try:
        ensure_dataset(dataset, data_path)
    except FileNotFoundError as error:
        raise TuneSetupError(str(error)) from None
    try:
        config = _driver_config(model, dataset, config_files, {**overrides, "data_path": data_path})
    except ValueError as error:  # config_check: an unknown or non-finite fixed setting, a GPU that is not there
        raise TuneSetupError(str(error)) from None
    check_keys(parsed, config, model, source)
    ray_space(parsed, search)  # rejects a space the search algorithm cannot use
    if search == "hyperopt":
        _require_hyperopt()
    first = default_point(parsed, config, model, search, source) if defaults_first else None
    if scheduler not in ("asha", "fifo"):
        raise TuneSetupError(f"unknown scheduler {scheduler!r}; choose asha or fifo")
    name = name or f"{model}-{dataset}"
    storage = Path(storage_dir or "saved/tune").resolve()
    max_t = _evaluations(config, parsed)
    return {
        "model": model,
        "dataset": dataset,
        "space": raw,
        "space_source": display_path(source),
        "config_files": config_files,
        "overrides": plain_value(overrides),
        "data_path": data_path,
        "data_path_given": str(data_path_given) if data_path_given else None,
        "search": search,
        "samples": 1 if search == "grid" else int(samples),
        "scheduler": scheduler,
        "grace_period": max(1, min(int(grace_period), max_t)),
        "max_t": max_t,
        "grace_asked": int(grace_period),  # before the cap: the budget a search of EASE shares with the others
        "search_seed": search_seed,
        "metric": config["valid_metric"].lower(),
        "mode": "max" if config["valid_metric_bigger"] else "min",
        "name": name,
        "storage": str(storage),
        "experiment": str(storage / name),
        "defaults_first": bool(defaults_first),
        **({"first_trial": plain_value(first[0]), "first_trial_outside": first[1]} if first else {}),
    }


def _require_hyperopt():
    if importlib.util.find_spec("hyperopt") is None:
        raise TuneSetupError(
            "--search hyperopt needs the hyperopt package: pip install hyperopt==0.2.5 "
            "(or pip install 'recbole-mgformer[tune]')"
        )


def _search_algorithm(search, seed, first_trial=None):
    """Ray's search algorithm; ``first_trial`` (a point of every searched key) replaces the first of its samples,
    the others drawn as without it (the point draws nothing)."""
    if search == "hyperopt":
        _require_hyperopt()
        from ray.tune.search.hyperopt import HyperOptSearch

        return HyperOptSearch(random_state_seed=seed, points_to_evaluate=[dict(first_trial)] if first_trial else None)
    from ray.tune.search.basic_variant import BasicVariantGenerator

    points = (
        [{key: WholeValue(value) if isinstance(value, (list, dict)) else value for key, value in first_trial.items()}]
        if first_trial
        else None
    )
    return BasicVariantGenerator(random_state=seed, points_to_evaluate=points)


def _check_dataset_files(request):
    """The atomic files the trials will read (a resumed search's own ``data_path``): a trial would fail on them
    inside Ray, its traceback in a trial's log."""
    config = _driver_config(
        request["model"],
        request["dataset"],
        request["config_files"],
        {**request["overrides"], "data_path": request["data_path"]},
    )
    try:
        validate_dataset_files(config)
    except (OSError, ValueError) as error:
        raise TuneSetupError(str(error)) from None


def check_address(address):
    """``address`` as ``ray.init`` takes it (``auto``, ``local``, ``host:port``, ``ray://host:port``), else a
    TuneSetupError naming the forms: Ray's own error comes as a traceback."""
    if address is None:
        return
    text = str(address)
    host, colon, port = text.removeprefix("ray://").rpartition(":")
    if text in ("auto", "local") or (colon and host and "/" not in host and port.isdigit()):
        return
    raise TuneSetupError(
        f"--address {text!r}: give auto (a Ray started with `ray start` on this machine), "
        "host:port (the head node's GCS port, e.g. 10.0.0.5:6379) or ray://host:port"
    )


def _init_ray(address, num_cpus, num_gpus, temp_dir):
    """Start Ray (or join the cluster at ``address``) unless this process already did; True if started here."""
    import ray

    if ray.is_initialized():
        return False
    if address:
        ray.init(address=address, include_dashboard=False, logging_level=logging.WARNING)
    else:
        Path(temp_dir).mkdir(parents=True, exist_ok=True)
        ray.init(
            num_cpus=num_cpus,
            num_gpus=num_gpus,
            include_dashboard=False,
            _temp_dir=str(temp_dir),
            logging_level=logging.WARNING,
        )
    return True


def _check_resources(cpus_per_trial, gpus_per_trial):
    import ray

    available = ray.cluster_resources()
    for kind, wanted in (("CPU", cpus_per_trial), ("GPU", gpus_per_trial)):
        if wanted > available.get(kind, 0):
            flag = f"--{kind.lower()}s-per-trial"
            raise TuneSetupError(
                f"{flag} {wanted} asks for more than the Ray cluster has ({available.get(kind, 0)} "
                f"{kind}s); lower {flag}" + (" (the benchmark's --tune-gpus) or set it to 0" if kind == "GPU" else "")
            )


def _tuner(request, cpus_per_trial, gpus_per_trial, resume, verbose):
    from ray import tune
    from ray.air import FailureConfig, RunConfig
    from ray.tune.schedulers import FIFOScheduler

    from recbole_mgformer.tune.asha import ResumableASHA

    trainable = tune.with_resources(
        tune.with_parameters(train_trial, request=request), {"cpu": cpus_per_trial, "gpu": gpus_per_trial}
    )
    if resume:
        return tune.Tuner.restore(
            request["experiment"],
            trainable=trainable,
            resume_unfinished=True,
            resume_errored=False,
            restart_errored=False,
        )
    scheduler = (
        ResumableASHA(time_attr=PROGRESS, max_t=request["max_t"], grace_period=request["grace_period"])
        if request["scheduler"] == "asha"
        else FIFOScheduler()
    )
    return tune.Tuner(
        trainable,
        param_space=ray_space(parse_space(request["space"]), request["search"]),
        tune_config=tune.TuneConfig(
            metric=METRIC,
            mode=request["mode"],
            num_samples=request["samples"],
            scheduler=scheduler,
            search_alg=_search_algorithm(request["search"], request["search_seed"], request.get("first_trial")),
        ),
        run_config=RunConfig(
            name=request["name"],
            storage_path=request["storage"],
            verbose=verbose,
            failure_config=FailureConfig(max_failures=0),
        ),
    )


def _fit(tuner):
    """``tuner.fit()``, then Ctrl-C back to interrupting this process (Ray Tune leaves its own handler behind)."""
    handler = signal.getsignal(signal.SIGINT)
    try:
        return tuner.fit()
    finally:
        if handler is not None and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, handler)


# What a resumed search keeps from its start: request field -> the option that sets it. Ray restores the trials,
# space and sample count it started with, so a resumed search cannot take another value of any of them.
RESUMED_FIELDS = {
    "model": "--model",
    "dataset": "--dataset",
    "space": "--space",
    "search": "--search",
    "samples": "--samples",
    "scheduler": "--scheduler",
    "grace_period": "--grace-period",
    "search_seed": "--search-seed",
    "overrides": "--key=value settings",
    "config_files": "--config_files",
    "data_path": "--data_path",
    "defaults_first": "--defaults-first",
}
ALWAYS_COMPARED = ("model", "dataset")  # they name the search (its default --name)


def resume_changes(stored, request, given):
    """``[(option, started with, now)]`` for each field of ``request`` that differs from the ``stored`` one the
    search started with; ``given`` holds the fields the user set for this run (the others take the stored ones)."""
    changes = []
    for field, option in RESUMED_FIELDS.items():
        if field not in ALWAYS_COMPARED and field not in given:
            continue
        now = json.loads(json.dumps(plain_value(request[field])))  # as the stored request holds it
        if now != stored.get(field, now):
            changes.append((option, stored.get(field), now))
    return changes


def _prepare_experiment(request, resume, given=()):
    """Check the experiment folder against ``resume``; on resume, the stored request wins over the new one, and
    a setting ``given`` for this run that differs from the stored one is refused (Ray would silently keep the old)."""
    from ray import tune

    experiment = Path(request["experiment"])
    stored = experiment / REQUEST_FILE
    if resume:
        if not (tune.Tuner.can_restore(experiment) and stored.is_file()):
            raise TuneSetupError(f"nothing to resume at {experiment}; start the search without --resume")
        started = json.loads(stored.read_text())
        parse_space(started["space"], str(stored))  # what the trials will be given is checked as a new search's is
        try:
            check_literal_strings(started["overrides"], str(stored))
        except UnsafeSettingError as error:
            raise TuneSetupError(str(error)) from None
        changes = resume_changes(started, request, given)
        if changes:
            listed = "; ".join(f"{option}: started with {before!r}, now {now!r}" for option, before, now in changes)
            raise TuneSetupError(
                f"the search at {experiment} cannot change on --resume ({listed}): a resumed search continues the "
                f"trials it started. Drop {', '.join(option for option, _, _ in changes)} to resume it as it "
                "started, or start a new search with another --name"
            )
        return started
    if tune.Tuner.can_restore(experiment):
        raise TuneSetupError(
            f"{experiment} already holds a search; --resume continues it, --name starts "
            "another beside it (or delete that folder to start over)"
        )
    return request


def _store_request(request):
    stored = Path(request["experiment"]) / REQUEST_FILE
    stored.parent.mkdir(parents=True, exist_ok=True)
    stored.write_text(json.dumps(request, indent=2) + "\n")  # unsorted: the space keeps its order


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
    request = _prepare_experiment(request, resume, given)
    _check_dataset_files(request)
    paths = report_paths(request, results_dir, stem)
    started = _init_ray(address, num_cpus, num_gpus, temp_dir or default_temp_dir(request["storage"]))
    try:
        _check_resources(cpus_per_trial, gpus_per_trial)
        _store_request(request)
        commit = code_commit()
        grid = _fit(_tuner(request, cpus_per_trial, gpus_per_trial, resume, verbose))
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
