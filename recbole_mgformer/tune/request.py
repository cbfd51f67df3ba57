"""A search's request: the model, data, space and search settings it runs with, checked before Ray starts."""

import hashlib
import importlib.util
import math
import os
from pathlib import Path

from recbole_mgformer.data import validate_dataset_files
from recbole_mgformer.data.sources import ensure_dataset
from recbole_mgformer.integration.registry import fits_once, get_model
from recbole_mgformer.quick_start import build_config
from recbole_mgformer.records import display_path
from recbole_mgformer.training.checkpoint_files import plain_value
from recbole_mgformer.tune.records import RECORDS_VERSION
from recbole_mgformer.tune.space import (
    TuneSetupError,
    check_keys,
    default_point,
    load_space,
    parse_space,
    ray_space,
)

# a search's name is its folder's and its files' (<name>.md, .json, .yaml, .lock, Ray's trial folders beside it)
MAX_NAME_BYTES = 200


def file_digests(paths):
    """sha256 of each file's bytes: a config file edited after the search started is noticed on resume."""
    return [hashlib.sha256(Path(path).read_bytes()).hexdigest() for path in paths]


def driver_config(model, dataset, config_files, config_dict):
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


def _epoch_cap(config, parsed):
    """The most epochs a trial trains: ``epochs`` (the largest searched, where it is searched)."""
    if "epochs" in parsed:
        return max(int(v) for v in parsed["epochs"][1])
    return int(config["epochs"])


def _evaluations(config, parsed):
    """How many times a trial reports at most: the epochs (the largest searched) over eval_step; once for a model
    fit in its constructor (EASE, ItemKNN, ...: RecBole's traditional trainer runs one epoch whatever ``epochs``
    says), so a trial is one fit and ASHA's grace period shrinks to it."""
    if fits_once(config["model"]):
        return 1
    return max(1, _epoch_cap(config, parsed) // max(1, config["eval_step"]))


def _whole_number(value, option, minimum=None):
    if isinstance(value, bool) or not isinstance(value, int) or (minimum is not None and value < minimum):
        floor = f" of {minimum} or more" if minimum is not None else ""
        raise TuneSetupError(f"{option} {value!r}: give a whole number{floor}")
    return value


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
    records_dir=None,
):
    """Everything a search (and its resumption) needs, checked: raises TuneSetupError before any trial starts.

    ``storage_dir``: Ray's folders go to ``<storage_dir>/<name>/`` (``experiment``); ``records_dir``: the folder of
    the search's own records (:mod:`recbole_mgformer.tune.records`), that experiment folder when None.

    ``defaults_first``: the first of the ``samples`` trials runs the model's defaults (:func:`default_point`),
    kept in the request as ``first_trial`` (and the keys where they lie outside the space, ``first_trial_outside``:
    run anyway); the other trials are drawn as without it."""
    try:
        model = get_model(model).__name__
    except ValueError as error:
        raise TuneSetupError(str(error)) from None
    if isinstance(samples, bool) or not isinstance(samples, int) or samples < 1:
        raise TuneSetupError(f"--samples {samples!r}: a search draws at least 1 sample; give --samples 1 or more")
    _whole_number(search_seed, "--search-seed", 0)  # Ray's draws take no negative seed
    _whole_number(grace_period, "--grace-period", 1)
    if name is not None and (not str(name).strip() or Path(str(name)).name != str(name) or str(name) in (".", "..")):
        raise TuneSetupError(f"--name {name!r}: give a plain folder name (no '/'), e.g. --name {model}-{dataset}-wide")
    if name is not None and len(str(name).encode()) > MAX_NAME_BYTES:
        raise TuneSetupError(
            f"--name {str(name)[:40]}...: {len(str(name).encode())} bytes, above the {MAX_NAME_BYTES} a search's "
            "folder and files may take (a file name holds 255); give a shorter name, e.g. "
            f"--name {model}-{dataset}-wide"
        )
    raw, source = load_space(space, model, dataset)
    parsed = parse_space(raw, source)
    overrides = dict(config_dict or {})
    # the best YAML keeps the path as given (e.g. "dataset"), not this machine's absolute one the trials need
    data_path_given = overrides.pop("data_path", None) or data_path
    data_path = str(Path(data_path_given or "dataset").resolve())
    config_files_given = [str(p) for p in (config_files or [])]
    config_files = [str(Path(p).resolve()) for p in config_files_given]
    try:
        ensure_dataset(dataset, data_path)
    except FileNotFoundError as error:
        raise TuneSetupError(str(error)) from None
    try:
        config = driver_config(model, dataset, config_files, {**overrides, "data_path": data_path})
    except ValueError as error:  # config_check: an unknown or non-finite fixed setting, a GPU that is not there
        raise TuneSetupError(str(error)) from None
    check_keys(parsed, config, model, source)
    fixed = sorted(set(parsed) & set(overrides))
    if fixed and not defaults_first:  # the draws would replace it without a word (with --defaults-first it is the
        key = fixed[0]  # first trial's value)
        raise TuneSetupError(
            f"{source}: {key} is searched there and fixed on the command line (--{key}={overrides[key]}); keep one, "
            "or pass --defaults-first to make the fixed value the first trial's"
        )
    ray_space(parsed, search)  # rejects a space the search algorithm cannot use
    if search == "hyperopt":
        require_hyperopt()
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
        "config_files_given": config_files_given,  # as given: a relative path leads there on another machine
        "config_files_sha256": file_digests(config_files),
        "overrides": plain_value(overrides),
        "data_path": data_path,
        "data_path_given": str(data_path_given) if data_path_given else None,
        "search": search,
        "samples": 1 if search == "grid" else int(samples),
        "scheduler": scheduler,
        "grace_period": max(1, min(int(grace_period), max_t)),
        "max_t": max_t,
        "grace_asked": int(grace_period),  # before the cap: the budget a search of EASE shares with the others
        "epochs": _epoch_cap(config, parsed),  # at most, a trial: the best YAML says so, never sets it
        "search_seed": search_seed,
        "metric": config["valid_metric"].lower(),
        "mode": "max" if config["valid_metric_bigger"] else "min",
        "name": name,
        "storage": str(storage),
        "experiment": str(storage / name),
        "records_dir": str(Path(records_dir).resolve()) if records_dir else str(storage / name),
        "defaults_first": bool(defaults_first),
        "records": RECORDS_VERSION,
        **({"first_trial": plain_value(first[0]), "first_trial_outside": first[1]} if first else {}),
    }


def require_hyperopt():
    if importlib.util.find_spec("hyperopt") is None:
        raise TuneSetupError(
            "--search hyperopt needs the hyperopt package: pip install hyperopt==0.2.5 "
            "(or pip install 'recbole-mgformer[tune]')"
        )


def check_dataset_files(request):
    """The atomic files the trials will read (a resumed search's own ``data_path``): a trial would fail on them
    inside Ray, its traceback in a trial's log."""
    config = driver_config(
        request["model"],
        request["dataset"],
        request["config_files"],
        {**request["overrides"], "data_path": request["data_path"]},
    )
    try:
        validate_dataset_files(config)
    except (OSError, ValueError) as error:
        raise TuneSetupError(str(error)) from None


def check_trial_resources(cpus_per_trial, gpus_per_trial, num_cpus=None, num_gpus=None):
    """Each trial's share of CPUs (above 0) and GPUs (0 or more, fractions share one), and the caps of a Ray started
    here (whole numbers: at least 1 CPU, 0 or more GPUs), else a TuneSetupError: Ray's own errors come late, as a
    traceback ("Cannot initialize a ResourceRequest with an empty head")."""
    for value, option, positive in (
        (cpus_per_trial, "--cpus-per-trial", True),
        (gpus_per_trial, "--gpus-per-trial", False),
    ):
        number = not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)
        if not number or value < 0 or (positive and value == 0):
            floor = "above 0" if positive else "of 0 or more"
            raise TuneSetupError(f"{option} {value!r}: give a number {floor} (fractions share a core or a GPU)")
    if num_cpus is not None:
        _whole_number(num_cpus, "--num-cpus", 1)
    if num_gpus is not None:
        _whole_number(num_gpus, "--num-gpus", 0)


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
