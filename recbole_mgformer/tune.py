"""Hyperparameter search with Ray Tune for any model of the runner, on CPUs or GPUs, locally or on a Ray cluster.

    python -m recbole_mgformer.tune --model MGFormer --dataset amazon-beauty \\
        --space properties/hyper/MGFormer.yaml --samples 24 --cpus-per-trial 1 --gpus-per-trial 0.25
    python -m recbole_mgformer.tune --model MGFormer --dataset amazon-beauty --resume   # after Ctrl-C
    python -m recbole_mgformer.tune --model LightGCN --dataset ml-100k --search grid --epochs=50

A space is a YAML mapping of config keys to one distribution each (``properties/hyper/<Model>.yaml`` by default)::

    embedding_size: {choice: [32, 64, 128]}      # one of the values, drawn at random
    n_layers: {grid: [1, 2, 3]}                  # every value (ray.tune.grid_search), times --samples
    uniformity_weight: {loguniform: [0.1, 5.0]}  # low < high, both > 0
    attention_weight: {uniform: [0.5, 1.0]}      # low < high
    n_heads: {randint: [1, 5]}                   # integers low <= x < high, as ray.tune.randint

Each trial trains through :func:`recbole_mgformer.quick_start.prepare` and the trainer's ``fit``, the path of
``run_recommender``, reports the validation metric after every evaluation, and ASHA stops poor trials early.
Any other ``--key=value`` is a fixed config setting for every trial. The command writes
``results/tuning/<Model>-<dataset>.md`` (all trials, best first, failed ones with their error, and the test
metrics of the best configuration retrained once), ``.json`` beside it, and ``<Model>-<dataset>.yaml``:
the best configuration, for ``run.py --config_files``. Ray's results go to ``saved/tune/<Model>-<dataset>/``.
"""

import argparse
import difflib
import importlib.util
import json
import logging
import math
import numbers
import os
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

import yaml
from recbole.config import Config
from recbole.utils import init_logger, init_seed

from recbole_mgformer.cli import parse_overrides
from recbole_mgformer.config_check import known_keys
from recbole_mgformer.data.sources import ensure_dataset
from recbole_mgformer.defaults import properties_dir
from recbole_mgformer.quick_start import build_config, prepare, run_recommender
from recbole_mgformer.records import display_path, git_commit, machine, package_versions, write_record
from recbole_mgformer.registry import get_model
from recbole_mgformer.trainer import plain_value

ROOT = Path(__file__).resolve().parents[1]
DISTRIBUTIONS = {
    "choice": "a non-empty list of values, e.g. {choice: [32, 64, 128]}",
    "grid": "a non-empty list of values, e.g. {grid: [1, 2, 3]}",
    "uniform": "[low, high] numbers with low < high, e.g. {uniform: [0.0, 0.5]}",
    "loguniform": "[low, high] numbers with 0 < low < high, e.g. {loguniform: [0.1, 5.0]}",
    "randint": "[low, high] integers with low < high (high excluded), e.g. {randint: [1, 5]}",
}
SEARCHES = ("random", "grid", "hyperopt")
REQUEST_FILE = "recbole_mgformer_tune.json"  # the search's settings, inside Ray's experiment folder, for --resume
METRIC = "best_valid_score"  # the trial's best validation score so far, what RecBole's early stopping keeps


class TuneSetupError(ValueError):
    """A search that cannot start: a bad space, search algorithm, resource request or experiment folder."""


# ---------------------------------------------------------------------------------------------------- spaces


def space_file(model):
    """``properties/hyper/<Model>.yaml``, the space shipped for ``model``."""
    return properties_dir() / "hyper" / f"{model}.yaml"


def load_space(space, model):
    """``space`` (a path, a mapping, or None for the model's shipped file) -> (mapping, where it came from)."""
    if isinstance(space, dict):
        return space, "the space"
    path = Path(space) if space is not None else space_file(model)
    if not path.is_file():
        shipped = sorted(p.stem for p in (properties_dir() / "hyper").glob("*.yaml"))
        raise TuneSetupError(f"search space {path} does not exist; spaces ship for {', '.join(shipped)} "
                             "(write one as `key: {choice: [...]}` per line and pass it with --space)")
    try:
        raw = yaml.load(path.read_text(), Loader=Config._build_yaml_loader(None))  # reads 1e-4 as a float
    except yaml.YAMLError as error:
        raise TuneSetupError(f"search space {path} is not valid YAML: {error}") from None
    return raw, str(path)


def _is_number(value):
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _bounds_ok(name, args):
    if not (isinstance(args, list) and len(args) == 2 and all(_is_number(a) for a in args) and args[0] < args[1]):
        return False
    if name == "loguniform":
        return args[0] > 0
    if name == "randint":
        return all(isinstance(a, numbers.Integral) for a in args)
    return True


def parse_space(raw, source="the space"):
    """Check a space mapping; returns ``{key: (distribution, arguments)}`` or raises TuneSetupError."""
    allowed = ", ".join(DISTRIBUTIONS)
    if not isinstance(raw, dict) or not raw:
        raise TuneSetupError(f"{source} must be a non-empty mapping of config keys to distributions, "
                             f"e.g. `embedding_size: {{choice: [32, 64]}}`; got {raw!r}")
    parsed = {}
    for key, spec in raw.items():
        if not isinstance(spec, dict) or len(spec) != 1:
            raise TuneSetupError(f"{source}: {key} must be one distribution, e.g. `{key}: {{choice: [...]}}`, "
                                 f"got {spec!r}; distributions: {allowed} (fix a value with --{key}=... instead)")
        (name, args), = spec.items()
        if name not in DISTRIBUTIONS:
            raise TuneSetupError(f"{source}: {key} uses unknown distribution {name!r}; choose one of {allowed}")
        ok = (isinstance(args, list) and len(args) > 0) if name in ("choice", "grid") else _bounds_ok(name, args)
        if not ok:
            raise TuneSetupError(f"{source}: {key}: {name} takes {DISTRIBUTIONS[name]}; got {args!r}")
        parsed[str(key)] = (name, list(args))
    return parsed


def check_keys(parsed, config, model, source="the space"):
    """Every searched key must be a key the run reads (or one of ``extra_config_keys``): a typo fails before any
    trial starts."""
    known = known_keys(config, get_model(model))  # as build_config checks the fixed settings
    for key in parsed:
        if key not in known:
            close = difflib.get_close_matches(key, sorted(known), n=3)
            hint = f"did you mean {', '.join(close)}?" if close else \
                f"see properties/model/{model}.yaml and RecBole's defaults for the keys {model} has"
            raise TuneSetupError(f"{source}: {model} has no config key {key!r}; {hint}")


def ray_space(parsed, search):
    """``{key: (distribution, arguments)}`` -> Ray Tune's param_space for ``search``."""
    from ray import tune

    if search not in SEARCHES:
        raise TuneSetupError(f"unknown search {search!r}; choose one of {', '.join(SEARCHES)}")
    space = {}
    for key, (name, args) in parsed.items():
        if search == "grid" and name not in ("choice", "grid"):
            raise TuneSetupError(f"--search grid needs finite values, but {key} is {name}; "
                                 f"write it as {{grid: [...]}} or use --search random")
        if search == "hyperopt" and name == "grid":
            raise TuneSetupError(f"--search hyperopt cannot enumerate {key}: {{grid: ...}}; write {{choice: ...}}")
        if name == "grid" or search == "grid":
            space[key] = tune.grid_search(args)
        elif name == "choice":
            space[key] = tune.choice(args)
        else:
            space[key] = getattr(tune, name)(*args)
    return space


# ---------------------------------------------------------------------------------------------------- trials


def _ray_gpu_ids():
    """RecBole's ``gpu_id`` for the GPUs Ray gave this worker ('' for none: RecBole then trains on the CPU).

    RecBole sets CUDA_VISIBLE_DEVICES to ``gpu_id``; its default '0' would put every trial on the first GPU."""
    import ray

    return ",".join(str(i) for i in ray.get_gpu_ids())


def _config_dict(request, params, workdir):
    return {**request["overrides"], "data_path": request["data_path"], **params,
            "show_progress": False, "checkpoint_dir": str(workdir), "gpu_id": _ray_gpu_ids()}


def train_trial(params, request):
    """One trial: ``build_config`` + ``prepare`` + ``fit`` as in ``run_recommender``, reporting to Ray Tune
    after every evaluation. RecBole's ./log and ./log_tensorboard land in the trial's folder."""
    from ray.air import session

    trial_dir = session.get_trial_dir()
    os.chdir(trial_dir)
    params = {key: _item(value) for key, value in params.items()}
    config, _ = build_config(request["model"], request["dataset"], request["config_files"],
                             _config_dict(request, params, trial_dir))
    init_seed(config["seed"], config["reproducibility"])
    logging.getLogger().handlers.clear()  # an actor reused for another trial logs to that trial's folder
    init_logger(config)
    _, trainer, (train_data, valid_data, _) = prepare(config)

    def report(epoch_idx, valid_score):
        # the trial ends by itself after this evaluation: early stopping, or no evaluation left
        finished = trainer.cur_step > trainer.stopping_step or epoch_idx + trainer.eval_step >= trainer.epochs
        best = {f"best_{name}": float(value) for name, value in (trainer.best_valid_result or {}).items()}
        session.report({METRIC: float(trainer.best_valid_score), "valid_score": float(valid_score),
                        "epoch": epoch_idx + 1, "finished": finished, **best})

    trainer.fit(train_data, valid_data, saved=False, show_progress=False, callback_fn=report)


def retrain(request, settings, workdir):
    """Train ``settings`` (the best YAML's content) the way ``run.py --config_files=best.yaml`` does, in ``workdir``."""
    previous = os.getcwd()
    Path(workdir).mkdir(parents=True, exist_ok=True)
    os.chdir(workdir)
    try:
        logging.getLogger().handlers.clear()
        config_dict = {"data_path": request["data_path"], **settings, "show_progress": False,
                       "checkpoint_dir": str(workdir), "gpu_id": _ray_gpu_ids()}
        return plain_value(run_recommender(request["model"], request["dataset"], config_dict=config_dict))
    finally:
        os.chdir(previous)


# ---------------------------------------------------------------------------------------------------- results


def error_line(error):
    """The last non-empty line of a trial's error (its exception), without Ray's traceback around it."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[-1] if lines else type(error).__name__


def _trial_params(result, keys):
    config = result.config
    if not config and result._local_path:  # a trial that failed before reporting: Ray's params.json
        params_file = Path(result._local_path) / "params.json"
        config = json.loads(params_file.read_text()) if params_file.is_file() else {}
    return {key: plain_value(_item((config or {}).get(key))) for key in keys}


def _item(value):
    return value.item() if hasattr(value, "item") else value  # numpy scalars from the samplers


def trial_rows(results, keys):
    """One dict per trial of a ResultGrid: trial, status, score, epochs, best metrics, searched values, error."""
    rows = []
    for result in results:
        metrics = result.metrics or {}
        if result.error is not None:
            status = "failed"
        elif metrics.get("done"):
            status = "completed" if metrics.get("finished") else "stopped early"
        else:
            status = "unfinished"
        rows.append({
            "trial": metrics.get("trial_id") or Path(result._local_path or "?").name,
            "status": status,
            "score": metrics.get(METRIC),
            "epochs": metrics.get("epoch", 0),
            "valid": {k[len("best_"):]: v for k, v in metrics.items() if k.startswith("best_") and k != METRIC},
            "params": _trial_params(result, keys),
            "error": error_line(result.error) if result.error is not None else None,
        })
    return rows


def ranked(row):
    """A trial that ended (by itself or by ASHA) with a score: those are ranked, and the best is one of them."""
    return row["status"] in ("completed", "stopped early") and row["score"] is not None


def sort_rows(rows, bigger=True):
    """Ranked trials, best first; then unfinished ones (by their score so far); failed ones last."""
    def key(row):
        group = 0 if ranked(row) else 2 if row["status"] == "failed" else 1
        score = row["score"] if row["score"] is not None else (-math.inf if bigger else math.inf)
        return group, -score if bigger else score, row["trial"]
    return sorted(rows, key=key)


def best_settings(request, params):
    """The best configuration as one standalone config: the config files' settings, the fixed settings and the
    searched values, later ones winning, as RecBole merges them."""
    loader = Config._build_yaml_loader(None)
    settings = {}
    for path in request["config_files"]:
        settings.update(yaml.load(Path(path).read_text(), Loader=loader) or {})
    settings.update(request["overrides"])
    if request["data_path_given"]:
        settings["data_path"] = request["data_path"]
    settings.update(params)
    return plain_value(settings)


def best_config_yaml(request, row, path):
    """The text of the best configuration's YAML, loadable by ``run.py --config_files``."""
    header = [
        f"# Best of a hyperparameter search of {request['model']} on {request['dataset']} "
        f"(python -m recbole_mgformer.tune): valid {request['metric']} {_fmt(row['score'])}, trial {row['trial']}.",
        f"# python run.py --model={request['model']} --dataset={request['dataset']} --config_files={path}",
    ]
    body = yaml.safe_dump(best_settings(request, row["params"]), sort_keys=False, default_flow_style=None)
    return "\n".join(header) + "\n" + body


def _fmt(value):
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.4f}" if 1e-3 <= abs(value) < 1e4 or value == 0 else f"{value:.3g}"
    return str(value)


def _param(value):
    return "" if value is None else f"{value:.4g}" if isinstance(value, float) else str(value)


def _cell(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


def render_markdown(summary):
    """The results page: the search, the best configuration and its test metrics, and every trial."""
    request, rows = summary["request"], summary["rows"]
    keys = list(request["space"])
    metric = request["metric"]
    counts = {s: sum(r["status"] == s for r in rows) for s in ("completed", "stopped early", "failed", "unfinished")}
    scheduler = (f"ASHA (grace period {request['grace_period']}, max {request['max_t']} evaluations)"
                 if request["scheduler"] == "asha" else "no early stopping of trials")
    lines = [
        f"# Hyperparameter search: {request['model']} on {request['dataset']}", "",
        f"Rendered by `python -m recbole_mgformer.tune`. Search: {request['search']}, {request['samples']} sample(s), "
        f"{scheduler}, ranked by the best validation {metric} of each trial "
        f"({'higher' if request['mode'] == 'max' else 'lower'} is better). "
        f"Space: `{request['space_source']}`; fixed settings: "
        f"{', '.join(f'`{k}={v}`' for k, v in request['overrides'].items()) or 'none'}"
        f"{'; config files: ' + ', '.join(f'`{display_path(p)}`' for p in request['config_files']) if request['config_files'] else ''}.",
        "",
        "Trials: " + ", ".join(f"{n} {s}" for s, n in counts.items() if n) + ".", "",
    ]
    best, retrained = summary.get("best"), summary.get("retrained")
    if best:
        lines += [f"Best: trial {best['trial']}, valid {metric} {_fmt(best['score'])}, "
                  + ", ".join(f"`{k}={_param(best['params'][k])}`" for k in keys)
                  + f". Its configuration: `{summary['best_yaml']}`, for "
                  f"`python run.py --model={request['model']} --dataset={request['dataset']} "
                  f"--config_files={summary['best_yaml']}`.", ""]
    if retrained:
        lines += ["Best configuration retrained once: "
                  + ", ".join(f"valid {k} {_fmt(v)}" for k, v in retrained["best_valid_result"].items()) + "; "
                  + ", ".join(f"**test {k} {_fmt(v)}**" for k, v in retrained["test_result"].items()) + ".", ""]
    if summary.get("retrain_error"):
        lines += [f"Retraining the best configuration failed: {summary['retrain_error']}", ""]
    if summary.get("interrupted"):
        lines += ["The search was interrupted; the table holds the trials so far. Resume it with "
                  f"`python -m recbole_mgformer.tune --model {request['model']} --dataset {request['dataset']} "
                  f"--name {request['name']} --resume`.", ""]
    valid_names = sorted({name for row in rows for name in row["valid"]})
    lines += ["| rank | trial | status | valid " + metric + " | epochs | " + " | ".join(keys)
              + "".join(f" | valid {n}" for n in valid_names if n != metric) + " |",
              "|" + "---|" * (5 + len(keys) + len([n for n in valid_names if n != metric]))]
    for rank, row in enumerate(rows, start=1):
        status = f"failed: {row['error']}" if row["status"] == "failed" else row["status"]
        cells = [str(rank) if ranked(row) else "", row["trial"], status, _fmt(row["score"]),
                 str(row["epochs"]), *(_param(row["params"].get(k)) for k in keys),
                 *(_fmt(row["valid"].get(n)) for n in valid_names if n != metric)]
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    prov = summary["provenance"]
    lines += ["", f"Ran on {prov['machine']} at commit {prov['commit']}, {prov['date']}; Ray storage "
              f"`{display_path(request['experiment'])}`; versions: " + ", ".join(f"{k} {v}" for k, v in prov["versions"].items())
              + ".", ""]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------------- the search


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
    """How many times a trial reports at most: the epochs (the largest searched) over eval_step."""
    epochs = config["epochs"]
    if "epochs" in parsed:
        epochs = max(int(v) for v in parsed["epochs"][1])
    return max(1, epochs // max(1, config["eval_step"]))


def make_request(model, dataset, space=None, config_files=None, config_dict=None, data_path=None, search="random",
                 samples=10, scheduler="asha", grace_period=10, search_seed=0, name=None, storage_dir=None):
    """Everything a search (and its resumption) needs, checked: raises TuneSetupError before any trial starts."""
    try:
        model = get_model(model).__name__
    except ValueError as error:
        raise TuneSetupError(str(error)) from None
    raw, source = load_space(space, model)
    parsed = parse_space(raw, source)
    overrides = dict(config_dict or {})
    data_path_given = data_path is not None or "data_path" in overrides
    data_path = str(Path(overrides.pop("data_path", None) or data_path or "dataset").resolve())
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
    if scheduler not in ("asha", "fifo"):
        raise TuneSetupError(f"unknown scheduler {scheduler!r}; choose asha or fifo")
    name = name or f"{model}-{dataset}"
    storage = Path(storage_dir or "saved/tune").resolve()
    max_t = _evaluations(config, parsed)
    return {
        "model": model, "dataset": dataset, "space": raw, "space_source": display_path(source),
        "config_files": config_files, "overrides": plain_value(overrides), "data_path": data_path,
        "data_path_given": data_path_given, "search": search, "samples": 1 if search == "grid" else int(samples),
        "scheduler": scheduler, "grace_period": max(1, min(int(grace_period), max_t)), "max_t": max_t,
        "search_seed": search_seed, "metric": config["valid_metric"].lower(),
        "mode": "max" if config["valid_metric_bigger"] else "min",
        "name": name, "storage": str(storage), "experiment": str(storage / name),
    }


def _require_hyperopt():
    if importlib.util.find_spec("hyperopt") is None:
        raise TuneSetupError("--search hyperopt needs the hyperopt package: pip install hyperopt==0.2.5 "
                             "(or pip install 'recbole-mgformer[tune]')")


def _search_algorithm(search, seed):
    if search == "hyperopt":
        _require_hyperopt()
        from ray.tune.search.hyperopt import HyperOptSearch

        return HyperOptSearch(random_state_seed=seed)
    from ray.tune.search.basic_variant import BasicVariantGenerator

    return BasicVariantGenerator(random_state=seed)


def _init_ray(address, num_cpus, num_gpus, temp_dir):
    """Start Ray (or join the cluster at ``address``) unless this process already did; True if started here."""
    import ray

    if ray.is_initialized():
        return False
    if address:
        ray.init(address=address, include_dashboard=False, logging_level=logging.WARNING)
    else:
        Path(temp_dir).mkdir(parents=True, exist_ok=True)
        ray.init(num_cpus=num_cpus, num_gpus=num_gpus, include_dashboard=False, _temp_dir=str(temp_dir),
                 logging_level=logging.WARNING)
    return True


def _check_resources(cpus_per_trial, gpus_per_trial):
    import ray

    available = ray.cluster_resources()
    for kind, wanted in (("CPU", cpus_per_trial), ("GPU", gpus_per_trial)):
        if wanted > available.get(kind, 0):
            flag = f"--{kind.lower()}s-per-trial"
            raise TuneSetupError(f"{flag} {wanted} asks for more than the Ray cluster has ({available.get(kind, 0)} "
                                 f"{kind}s); lower {flag}" + (" or set it to 0" if kind == "GPU" else ""))


def _tuner(request, cpus_per_trial, gpus_per_trial, resume, verbose):
    from ray import tune
    from ray.air import FailureConfig, RunConfig
    from ray.tune.schedulers import ASHAScheduler, FIFOScheduler

    trainable = tune.with_resources(tune.with_parameters(train_trial, request=request),
                                    {"cpu": cpus_per_trial, "gpu": gpus_per_trial})
    if resume:
        return tune.Tuner.restore(request["experiment"], trainable=trainable, resume_unfinished=True,
                                  resume_errored=False, restart_errored=False)
    scheduler = (ASHAScheduler(time_attr="training_iteration", max_t=request["max_t"],
                               grace_period=request["grace_period"])
                 if request["scheduler"] == "asha" else FIFOScheduler())
    return tune.Tuner(
        trainable,
        param_space=ray_space(parse_space(request["space"]), request["search"]),
        tune_config=tune.TuneConfig(metric=METRIC, mode=request["mode"], num_samples=request["samples"],
                                    scheduler=scheduler,
                                    search_alg=_search_algorithm(request["search"], request["search_seed"])),
        run_config=RunConfig(name=request["name"], storage_path=request["storage"], verbose=verbose,
                             failure_config=FailureConfig(max_failures=0)),
    )


def _fit(tuner):
    """``tuner.fit()``, then Ctrl-C back to interrupting this process (Ray Tune leaves its own handler behind)."""
    handler = signal.getsignal(signal.SIGINT)
    try:
        return tuner.fit()
    finally:
        if handler is not None and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, handler)


def _prepare_experiment(request, resume):
    """Check the experiment folder against ``resume``; on resume, the stored request wins over the new one."""
    from ray import tune

    experiment = Path(request["experiment"])
    stored = experiment / REQUEST_FILE
    if resume:
        if not (tune.Tuner.can_restore(experiment) and stored.is_file()):
            raise TuneSetupError(f"nothing to resume at {experiment}; start the search without --resume")
        return json.loads(stored.read_text())
    if tune.Tuner.can_restore(experiment):
        raise TuneSetupError(f"{experiment} already holds a search; --resume continues it, --name starts "
                             "another beside it (or delete that folder to start over)")
    return request


def _store_request(request):
    stored = Path(request["experiment"]) / REQUEST_FILE
    stored.parent.mkdir(parents=True, exist_ok=True)
    stored.write_text(json.dumps(request, indent=2) + "\n")  # unsorted: the space keeps its order


def _retrain_on_ray(request, row, cpus_per_trial, gpus_per_trial):
    """The best configuration retrained once as a Ray task with a trial's resources: (result, error line)."""
    import ray

    task = ray.remote(num_cpus=cpus_per_trial, num_gpus=gpus_per_trial)(retrain)
    workdir = str(Path(request["experiment"]) / "best")
    try:
        return ray.get(task.remote(request, best_settings(request, row["params"]), workdir)), None
    except Exception as error:  # the trials' results stay worth writing
        return None, error_line(error)


def tune_recommender(model, dataset, space=None, *, config_files=None, config_dict=None, data_path=None,
                     search="random", samples=10, scheduler="asha", grace_period=10, cpus_per_trial=1,
                     gpus_per_trial=0, address=None, num_cpus=None, num_gpus=None, results_dir=None,
                     storage_dir=None, temp_dir=None, name=None, resume=False, search_seed=0, retrain_best=True,
                     verbose=1):
    """Search hyperparameters of ``model`` on ``dataset`` with Ray Tune; returns a summary dict.

    ``space``: a YAML file or mapping (``properties/hyper/<Model>.yaml`` when None), see the module's docstring.
    ``config_files``/``config_dict``: fixed settings of every trial, as in ``run_recommender``; ``data_path``:
    RecBole's data folder (``dataset``). ``search``: ``random`` (``samples`` draws, each over every grid point),
    ``grid`` (every combination of the listed values) or ``hyperopt`` (TPE, ``pip install hyperopt==0.2.5``).
    ``scheduler``: ``asha`` stops poor trials after ``grace_period`` evaluations; ``fifo`` never.
    ``cpus_per_trial``/``gpus_per_trial`` (fractions allowed) share the machine, or the Ray cluster at
    ``address`` (``auto`` for a local ``ray start``); ``num_cpus``/``num_gpus`` cap a Ray started here.
    ``storage_dir``: Ray's results (``saved/tune``), the experiment ``name`` (``<Model>-<dataset>``) inside;
    ``temp_dir``: Ray's temporary folder (see :func:`default_temp_dir`). ``resume``: continue an interrupted
    search from its folder; finished and failed trials stay, unfinished ones run again from their first epoch.
    ``results_dir`` (``results/tuning``) receives ``<Model>-<dataset>.md``, ``.json`` and the best ``.yaml``.
    ``retrain_best``: train the best configuration once more for its test metrics.

    The summary holds ``request``, ``rows`` (all trials, best first), ``best`` (a row or None), ``best_yaml``,
    ``retrained`` (``run_recommender``'s dict or None), ``interrupted``, ``markdown`` (the page's path).
    """
    import ray

    request = make_request(model, dataset, space, config_files, config_dict, data_path, search, samples, scheduler,
                           grace_period, search_seed, name, storage_dir)
    request = _prepare_experiment(request, resume)
    started = _init_ray(address, num_cpus, num_gpus, temp_dir or default_temp_dir(request["storage"]))
    try:
        _check_resources(cpus_per_trial, gpus_per_trial)
        _store_request(request)
        commit = git_commit(ROOT)
        grid = _fit(_tuner(request, cpus_per_trial, gpus_per_trial, resume, verbose))
        rows = sort_rows(trial_rows(grid, list(request["space"])), request["mode"] == "max")
        best = next((r for r in rows if ranked(r)), None)
        summary = {"request": request, "rows": rows, "best": best, "best_yaml": None, "retrained": None,
                   "retrain_error": None, "interrupted": any(r["status"] == "unfinished" for r in rows)}
        if best is not None and retrain_best and not summary["interrupted"]:
            summary["retrained"], summary["retrain_error"] = _retrain_on_ray(request, best, cpus_per_trial,
                                                                             gpus_per_trial)
    finally:
        if started:
            ray.shutdown()
    summary["provenance"] = {"commit": commit, "machine": machine(), "date": time.strftime("%Y-%m-%d %H:%M"),
                             "versions": {**package_versions(), "ray": ray.__version__}}
    folder = Path(results_dir or "results/tuning").resolve()
    paths = {suffix: folder / f"{request['model']}-{request['dataset']}.{suffix}" for suffix in ("md", "json", "yaml")}
    folder.mkdir(parents=True, exist_ok=True)
    if best is not None:
        summary["best_yaml"] = display_path(paths["yaml"])
        paths["yaml"].write_text(best_config_yaml(request, best, summary["best_yaml"]))
    paths["md"].write_text(render_markdown(summary))
    write_record(paths["json"], plain_value(summary))
    summary["markdown"] = str(paths["md"])
    return summary


def main(argv=None):
    parser = argparse.ArgumentParser(prog="recbole-mgformer-tune", description=__doc__, allow_abbrev=False,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", "-m", default="MGFormer", help="model name, e.g. MGFormer, LightGCN, BPR")
    parser.add_argument("--dataset", "-d", default="ml-100k", help="dataset name (a folder under --data_path)")
    parser.add_argument("--space", default=None, help="search space YAML (default properties/hyper/<Model>.yaml)")
    parser.add_argument("--search", choices=SEARCHES, default="random", help="search algorithm (default random)")
    parser.add_argument("--samples", type=int, default=10, help="trials drawn by random/hyperopt search")
    parser.add_argument("--scheduler", choices=("asha", "fifo"), default="asha", help="asha stops poor trials early")
    parser.add_argument("--grace-period", type=int, default=10, help="evaluations before ASHA may stop a trial")
    parser.add_argument("--cpus-per-trial", type=float, default=1)
    parser.add_argument("--gpus-per-trial", type=float, default=0, help="fractions share a GPU, e.g. 0.25")
    parser.add_argument("--address", default=None, help="join this Ray cluster (e.g. auto, or host:6379)")
    parser.add_argument("--num-cpus", type=int, default=None, help="CPUs of the Ray started here (default all)")
    parser.add_argument("--num-gpus", type=int, default=None, help="GPUs of the Ray started here (default all)")
    parser.add_argument("--data_path", default=None, help="RecBole's data_path (default dataset)")
    parser.add_argument("--config_files", default=None, help="space-separated YAML files for every trial")
    parser.add_argument("--results", default="results/tuning", help="folder of <Model>-<dataset>.md/.json/.yaml")
    parser.add_argument("--storage", default="saved/tune", help="Ray's results folder")
    parser.add_argument("--temp-dir", default=None, help="Ray's temporary folder (default <storage>/ray-tmp if "
                                                         "short, else /tmp/ray-recbole-mgformer)")
    parser.add_argument("--name", default=None, help="experiment name (default <Model>-<dataset>)")
    parser.add_argument("--resume", action="store_true", help="continue an interrupted search")
    parser.add_argument("--search-seed", type=int, default=0, help="seed of the search algorithm's draws")
    parser.add_argument("--no-retrain", action="store_true", help="skip retraining the best configuration")
    parser.add_argument("--verbose", type=int, default=1, choices=(0, 1, 2), help="Ray Tune's progress output")
    args, rest = parser.parse_known_args(sys.argv[1:] if argv is None else argv)
    try:
        summary = tune_recommender(
            args.model, args.dataset, args.space, config_files=args.config_files.split() if args.config_files else None,
            config_dict=parse_overrides(rest), data_path=args.data_path, search=args.search, samples=args.samples,
            scheduler=args.scheduler, grace_period=args.grace_period, cpus_per_trial=args.cpus_per_trial,
            gpus_per_trial=args.gpus_per_trial, address=args.address, num_cpus=args.num_cpus, num_gpus=args.num_gpus,
            results_dir=args.results, storage_dir=args.storage, temp_dir=args.temp_dir, name=args.name,
            resume=args.resume, search_seed=args.search_seed, retrain_best=not args.no_retrain, verbose=args.verbose)
    except TuneSetupError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    rows, best = summary["rows"], summary["best"]
    print(f"{len(rows)} trials ({sum(r['status'] == 'failed' for r in rows)} failed); wrote {summary['markdown']}")
    if summary["interrupted"]:
        print(f"interrupted: resume with --resume --name {summary['request']['name']}")
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


if __name__ == "__main__":
    sys.exit(main())
