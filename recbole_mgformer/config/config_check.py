"""Checks of a built RecBole Config that RecBole itself does not make, run by ``build_config`` (so by ``run.py``,
``run_recommender``, the benchmark and the tuning command alike):

- :func:`check_known_keys`: a key nobody reads (``--embeding_size=32``) is an error with a "did you mean";
  RecBole's Config takes any ``--key=value`` of its command line and any key of a file or dict, and ignores
  what nothing reads (it warns only about arguments that are not ``--key=value``). Known keys are those of
  RecBole's YAML defaults, the model's and the dataset's YAML files (RecBole's and this project's), the keys
  RecBole's own code and the model's and trainer's classes read (``config["key"]`` in their source), the keys
  Config adds itself, the data-parallel settings, and the user's escape hatch ``extra_config_keys: [my_key]``.
- :func:`recbole_mgformer.safety.refuse_pickle_settings`: RecBole's saved-dataset and saved-dataloader settings
  (``dataset_save_path``, ``save_dataset``, ...) are errors: they load or write pickles, which run code.
- :func:`check_finite`: a NaN or infinite number anywhere in the config is an error naming the key.
- :func:`check_sizes`: an epoch count, batch size, width or patience below 1 (``--epochs=0``,
  ``embedding_size: 0``) or a learning rate <= 0 is an error; RecBole trains nothing or a zero-width model and
  reports metrics as if it had (it refuses ``topk`` <= 0 itself).
- :func:`check_device`: ``device: cuda`` without a usable GPU is an error, ``use_gpu: True`` a warning;
  ``device: cpu`` (or ``use_gpu: False``) is honoured where RecBole would take the GPU anyway.
- :func:`check_evaluation`: ``valid_metric`` must be one of what ``metrics`` at ``topk`` compute
  (``--valid_metric=Recall@50`` with ``topk: [20]`` failed after a whole epoch), the split ratios, order, grouping
  and mode must be ones RecBole can use (``RS: [0, 0, 1]`` crashed deep in RecBole), the seed one numpy accepts, the
  mode one the metrics can use (ranking metrics never on ``labeled`` pairs, a top-k below the sampled candidates of
  ``uni100``), and a time order (``order: TO``, a ``TS`` split) needs ``TIME_FIELD`` among the loaded columns.
- :func:`check_model_kind`, :func:`check_negative_sampling`, :func:`check_normalization`: a sequential model on a
  general protocol (the importer's YAML), a pairwise model without negatives or ``sample_num: 0``, and
  ``normalize_all`` with ``normalize_field``, each of which RecBole met with a traceback.

What needs the data is checked once the dataset is built, by :func:`check_against_dataset`: ``topk`` above the item
count, a time field that is not a float column, a labeled evaluation or a context-aware model without labels, and a
split that leaves the validation or test set empty.
:func:`recbole_config_errors` and :func:`dataset_build_errors` turn what RecBole's Config and dataset refuse (value
metrics under full ranking, filters that leave no interaction) into messages naming the settings.
"""

import collections
import contextlib
import functools
import importlib.util
import inspect
import logging
import math
import re
from pathlib import Path

import numpy as np
import recbole
import torch
import yaml
from recbole.utils import (
    EvaluatorType,
    FeatureSource,
    FeatureType,
    InputType,
    ModelType,
    dataset_arguments,
    evaluation_arguments,
    general_arguments,
    training_arguments,
)

from recbole_mgformer.config.defaults import dataset_config_file, model_config_file, model_defaults
from recbole_mgformer.config.input_checks import did_you_mean, metric_at_k, setting_type_error
from recbole_mgformer.safety import SafeLoader, refuse_pickle_settings

ESCAPE_KEY = "extra_config_keys"
RECBOLE_DIR = Path(recbole.__file__).resolve().parent
RECBOLE_PACKAGES = ("config", "data", "trainer", "evaluator", "sampler", "utils", "quick_start")
# Keys of this project's data-parallel runs (distributed.py, run_recommender), and the escape hatch.
# Read by this project's runner, not by a model: data-parallel settings, a dataset config's benchmark table,
# results page and the dataset whose files it reads (benchmark/datasets.py, data/sources.py), whether a run
# flushes subnormal numbers (model/precision.py) and keeps freed memory (training/heap.py), and a model's training
# protocol (data/train_protocols.py).
PROJECT_KEYS = {
    "nproc",
    "world_size",
    "ip",
    "port",
    "offset",
    "local_rank",
    "dist_backend",
    "dist_timeout",
    "benchmark_table",
    "benchmark_page",
    "benchmark_untuned_heading",
    "dataset_source",
    "flush_subnormals",
    "keep_freed_memory",
    "train_protocol",
    "train_window_stride",
    "train_user_chunk",
    ESCAPE_KEY,
}
# config["key"], settings["key"], final_config_dict["key"], config.get("key"), and options.choice(config, "key")
_READ_PATTERNS = (
    re.compile(r"""\w*(?:config|settings)\w*\[\s*["'](\w+)["']\s*\]"""),
    re.compile(r"""config\w*\.get\(\s*["'](\w+)["']"""),
    re.compile(r"""\(\s*(?:self\.)?config\s*,\s*["'](\w+)["']"""),
    re.compile(r"""["'](\w+)["']\s+(?:not\s+)?in\s+(?:self\.)?config\b"""),
)


class ConfigKeyError(ValueError):
    """A config key that no part of the run reads."""


@functools.lru_cache(maxsize=None)
def yaml_keys(path):
    with open(path, encoding="utf-8") as handle:
        content = yaml.load(handle, Loader=SafeLoader)  # RecBole's float resolver, no Python objects
    return frozenset(str(k) for k in content) if isinstance(content, dict) else frozenset()


@functools.lru_cache(maxsize=None)
def source_keys(path):
    """Config keys a Python file reads by a literal name."""
    text = Path(path).read_text(encoding="utf-8")
    return frozenset(match for pattern in _READ_PATTERNS for match in pattern.findall(text))


@functools.lru_cache(maxsize=None)
def recbole_keys():
    """Keys RecBole knows whatever the model: its YAML defaults, its argument lists, and the keys its
    config, data, trainer, evaluator, sampler and utils code reads (``encoding``, for one, is in no YAML)."""
    keys = set(general_arguments + training_arguments + evaluation_arguments + dataset_arguments)
    properties = RECBOLE_DIR / "properties"
    for path in [
        properties / "overall.yaml",
        *(properties / "dataset").glob("*.yaml"),
        *(properties / "quick_start_config").glob("*.yaml"),
    ]:
        keys |= yaml_keys(path)
    for package in RECBOLE_PACKAGES:
        for path in (RECBOLE_DIR / package).rglob("*.py"):
            keys |= source_keys(path)
    return frozenset(keys)


def class_keys(cls):
    """Keys ``cls`` and its bases read in their source (RecBole's, this project's, or a user's own model)."""
    keys = set()
    for klass in inspect.getmro(cls):
        if klass.__module__.split(".")[0] in ("builtins", "torch", "abc"):
            continue
        try:
            keys |= source_keys(inspect.getsourcefile(klass))
        except (TypeError, OSError):  # a class without a source file
            continue
    return keys


def escape_keys(config):
    value = config[ESCAPE_KEY]
    if value is None:
        return set()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise ConfigKeyError(f"{ESCAPE_KEY} must be a list of key names, e.g. [my_key, my_other_key]; got {value!r}")
    return set(value)


def known_keys(config, model_class, trainer_class=None):
    """Every key some part of a run of ``model_class`` on ``config``'s dataset reads or accepts."""
    model, dataset = model_class.__name__, config["dataset"]
    keys = set(recbole_keys()) | PROJECT_KEYS | class_keys(model_class) | escape_keys(config)
    if trainer_class is not None:
        keys |= class_keys(trainer_class)
    for path in (
        RECBOLE_DIR / "properties" / "model" / f"{model}.yaml",
        model_config_file(model),
        dataset_config_file(dataset),
    ):
        if path and Path(path).is_file():
            keys |= yaml_keys(path)
    keys |= set(config.final_config_dict) - set(config.external_config_dict)  # RecBole's internal and added keys
    return keys


def _origin(key, config_files):
    for path in reversed(list(config_files or [])):
        if key in yaml_keys(path):
            return f"config file {path}"
    return f"--{key}=... (config_dict)"


def check_known_keys(config, model_class, trainer_class=None, config_files=None):
    """Raise ConfigKeyError for the first key of the user's files or settings that nothing reads."""
    known = known_keys(config, model_class, trainer_class)
    unknown = [key for key in config.external_config_dict if key not in known]
    if not unknown:
        return
    key = unknown[0]
    hint = did_you_mean(key, known)
    hint += " " if hint else ""
    raise ConfigKeyError(
        f"unknown config key {key!r} (from {_origin(key, config_files)}): {hint}neither {model_class.__name__}, "
        f"the dataset {config['dataset']!r} nor RecBole reads it, so it would be ignored"
        + (f" (other unknown keys: {', '.join(unknown[1:])})" if unknown[1:] else "")
        + f". If your own code reads it, list it in {ESCAPE_KEY}, e.g. `{ESCAPE_KEY}: [{key}]` in a config file "
        f"or --{ESCAPE_KEY}=[{key}]."
    )


# settings where infinity means something: torch's max norm (``clip_grad_norm_``'s norm_type)
MAY_BE_INFINITE = frozenset({"clip_grad_norm['norm_type']"})


def _non_finite(value, where):
    """The path of the first NaN or infinite number in ``value`` (numbers, numeric strings, lists, dicts)."""
    if isinstance(value, bool) or (where in MAY_BE_INFINITE and value in (math.inf, "inf")):
        return None
    if isinstance(value, (int, float)):
        return None if math.isfinite(value) else where
    if isinstance(value, str):
        try:
            return None if math.isfinite(float(value)) else where
        except ValueError:
            return None
    if isinstance(value, (list, tuple)):
        items = enumerate(value)
    elif isinstance(value, dict):
        items = value.items()
    else:
        return None
    for key, item in items:
        found = _non_finite(item, f"{where}[{key!r}]")
        if found:
            return found
    return None


def check_finite(config):
    """Reject NaN and infinity in any setting before a run starts (a NaN weight trains to 'loss is nan')."""
    for key, value in config.final_config_dict.items():
        where = _non_finite(value, key)
        if where:
            example = f" (e.g. --{key}=0.5 or `{key}: 0.5` in a config file)" if where == key else ""
            raise ValueError(f"config value {where} is {value!r}: not a finite number; give a finite value{example}")


# Settings that count something a run cannot do zero times or with zero width.
POSITIVE_INTEGER_KEYS = (
    "epochs",
    "train_batch_size",
    "eval_batch_size",
    "embedding_size",
    "hidden_size",
    "n_heads",
    "stopping_step",
)
# (whole numbers only, the lowest value allowed, whether it may equal that value, what to write instead); torch's
# optimizers refuse a negative weight decay only at their start ("Invalid weight_decay value: -0.1")
BOUNDS = {
    **{key: (True, 1, True, "a whole number of at least 1", "10") for key in POSITIVE_INTEGER_KEYS},
    "learning_rate": (False, 0, False, "a number above 0", "0.001"),
    "weight_decay": (False, 0, True, "a number of at least 0", "1e-6"),
    # torch's loader refuses a negative count or a fraction; a negative decimal place fails the log's format string
    # after the first epoch has trained
    "worker": (True, 0, True, "a whole number of at least 0", "0"),
    "loss_decimal_place": (True, 0, True, "a whole number of at least 0", "4"),
}


def check_sizes(config):
    """Reject impossible counts and sizes before a run starts: ``--epochs=0`` trained nothing and reported the
    untrained model's metrics, ``embedding_size: 0`` trained a model of zero width."""
    for key, (whole, low, low_allowed, what, example) in BOUNDS.items():
        value = config.final_config_dict.get(key)
        if value is None:
            continue
        kinds = int if whole else (int, float)
        if (
            isinstance(value, bool)
            or not isinstance(value, kinds)
            or not (value >= low if low_allowed else value > low)
        ):
            raise ValueError(
                f"config value {key} is {value!r}: it must be {what} "
                f"(e.g. --{key}={example} or `{key}: {example}` in a config file)"
            )


def _wants(config, key):
    return config.external_config_dict.get(key)


def check_device(config):
    """``device: cuda`` without a usable GPU is an error; ``use_gpu: True`` without one a warning, and the run
    then logs ``use_gpu = False`` beside ``device = cpu``. ``device: cpu`` (or ``use_gpu: False``) is honoured
    where RecBole would take a visible GPU anyway."""
    device = config["device"]
    asked = _wants(config, "device")
    asked = str(asked).lower() if asked is not None else None
    if asked is not None and not re.fullmatch(r"cpu|cuda(:\d+)?", asked):
        raise ValueError(f"device {asked!r} is not a device; use --device=cpu or --device=cuda")
    wants_gpu = asked.startswith("cuda") if asked is not None else _wants(config, "use_gpu") is True
    if wants_gpu and device.type != "cuda":
        reason = (
            f"torch.cuda.is_available() is False (no GPU, no driver, or a CPU-only torch {torch.__version__})"
            if not torch.cuda.is_available()
            else f"gpu_id is {config['gpu_id']!r}, which hides every GPU"
        )
        if asked is not None:
            raise ValueError(
                f"device: {asked} asks for a GPU, but {reason}; train on the CPU with --device=cpu, "
                "or run where a GPU is visible"
            )
        logging.getLogger().warning(f"use_gpu: True, but {reason}: training on device: cpu")
    wants_cpu = asked == "cpu" or (asked is None and _wants(config, "use_gpu") is False)
    if wants_cpu and device.type == "cuda" and config["single_spec"]:
        config.final_config_dict["device"] = device = torch.device("cpu")
    config.final_config_dict["use_gpu"] = device.type == "cuda"


# ------------------------------------------------------------------------------------------------ evaluation


def _setting_error(key, problem):
    return ValueError(f"setting {key} {problem}; fix it in your config file or on the command line (--{key}=...)")


def computed_metrics(config):
    """The names of the results a run of ``config`` reports (``recall@20``, ``auc``), as RecBole's evaluator keys
    them, in the order of ``metrics`` and ``topk``."""
    names = []
    for metric in config["metrics"]:
        names += [f"{metric}@{k}" for k in config["topk"]] if metric_at_k(metric) else [metric]
    return names


def check_valid_metric(config):
    """``valid_metric`` must be one of the results the run computes: RecBole looks it up in the validation results
    after the first epoch, and a key they lack failed there."""
    valid_metric = config["valid_metric"]
    computed = computed_metrics(config)
    if valid_metric.lower() in (name.lower() for name in computed):
        return
    name, _, k = valid_metric.partition("@")
    if name.lower() not in (str(m).lower() for m in config["metrics"]):
        fix = f"add {name} to metrics (e.g. --metrics=[{','.join(map(str, [*config['metrics'], name]))}])"
    else:
        fix = f"add {k} to topk (e.g. --topk=[{','.join(map(str, [*config['topk'], k]))}])"
    raise ValueError(
        f"valid_metric {valid_metric} is not among the results the run computes (metrics "
        f"{list(config['metrics'])} at topk {list(config['topk'])}: {', '.join(computed)}), so the first validation "
        f"would fail after a whole epoch; {fix}, or choose valid_metric among those"
    )


def _time_ordered(config):
    split = config["eval_args"]["split"]
    return not config["benchmark_filename"] and (config["eval_args"]["order"] == "TO" or "TS" in split)


def check_time_order(config):
    """A time order (``order: TO``, a ``TS`` split) sorts by ``TIME_FIELD``, which must be set and loaded."""
    if not _time_ordered(config):
        return
    time_field, load_col, unload_col = config["TIME_FIELD"], config["load_col"], config["unload_col"]
    why = "eval_args orders interactions by time (order: TO, or a TS split)"
    if not time_field:
        raise ValueError(f"{why}, but TIME_FIELD is not set; set TIME_FIELD to the time column, or use order: RO")
    listed = load_col.get("inter") if isinstance(load_col, dict) else "*"
    if listed != "*" and time_field not in (listed or ()):
        raise ValueError(
            f"{why}, but load_col does not load the TIME_FIELD {time_field!r} (load_col inter: {listed}); add it, "
            f"e.g. load_col: {{inter: [{', '.join([*(listed or ()), time_field])}]}}, or use order: RO"
        )
    if isinstance(unload_col, dict) and time_field in (unload_col.get("inter") or ()):
        raise ValueError(f"{why}, but unload_col leaves out the TIME_FIELD {time_field!r}; remove it from unload_col")


def _modes(config):
    return set(config["eval_args"]["mode"].values())


def check_eval_mode(config):
    """Ranking metrics rank candidates, so they need full ranking or sampled candidates (``uni100``), never
    ``labeled`` pairs (RecBole's evaluation then fails on its first batch); with sampled candidates a top-k at or
    above their count holds every candidate, a recall of 1 by construction."""
    if config["eval_type"] != EvaluatorType.RANKING:
        return
    metrics, modes = list(config["metrics"]), _modes(config)
    if "labeled" in modes:
        raise ValueError(
            f"metrics {metrics} rank items, but eval_args mode is labeled, which scores labeled pairs only (RecBole's "
            "evaluation fails on it); set eval_args mode: full (or uni100), or use value metrics such as [AUC, LogLoss]"
        )
    sampled = [int(mode[3:]) for mode in modes if mode[:3] in ("uni", "pop")]
    if sampled and any(metric_at_k(m) for m in metrics) and max(config["topk"]) > min(sampled):
        raise ValueError(
            f"topk {list(config['topk'])} reaches the {min(sampled) + 1} candidates eval_args mode "
            f"{'/'.join(sorted(modes))} ranks for a held-out item ({min(sampled)} sampled and the item itself): the "
            f"top-{max(config['topk'])} would hold them all, a hit by construction; lower topk to at most "
            f"{min(sampled)}, or sample more candidates (e.g. mode: uni100)"
        )


def check_evaluation(config):
    """The evaluation settings of a built Config: each of a shape RecBole can use (metrics, topk, valid_metric,
    eval_args, seed; see :func:`recbole_mgformer.config.input_checks.setting_type_error`), the validation metric among
    the results, and a time order with a time field to order by."""
    for key in ("metrics", "topk", "valid_metric", "eval_args", "seed"):
        problem = setting_type_error(key, config[key], None)
        if problem:
            raise _setting_error(key, problem)
    check_valid_metric(config)
    check_eval_mode(config)
    check_time_order(config)


SEQUENTIAL_PROTOCOL = (
    "eval_args: {split: {LS: valid_and_test}, order: TO, group_by: user, mode: full} and train_neg_sample_args: ~ "
    "(properties/dataset/ml-100k-seq.yaml is one)"
)


def check_model_kind(config, model_class):
    """A sequential model reads each user's history in time order: RecBole's sequential data stops with a traceback
    ("The ordering args for sequential recommendation has to be 'TO'") on a general protocol's random order, such as
    the importer's YAML gives."""
    if model_class.type == ModelType.SEQUENTIAL and config["eval_args"]["order"] != "TO":
        raise ValueError(
            f"{model_class.__name__} is a sequential model: it reads each user's interactions in time order "
            f"(eval_args order: TO), but the settings give order {config['eval_args']['order']} (a general "
            f"protocol); for {config['dataset']}, put the sequential protocol in a config file, e.g. "
            f"{SEQUENTIAL_PROTOCOL}, and pass it with --config_files"
        )


def check_negative_sampling(config, model_class):
    """A pairwise model (BPR) trains on a sampled negative per pair; ``train_neg_sample_args: ~`` left it without one
    (KeyError: 'neg_item_id' at the first step), and ``sample_num: 0`` divided by zero."""
    sampling = config["train_neg_sample_args"] or {}
    distribution, sample_num = sampling.get("distribution"), sampling.get("sample_num")
    if distribution not in (None, "none") and not (
        isinstance(sample_num, int) and not isinstance(sample_num, bool) and sample_num >= 1
    ):
        raise _setting_error(
            "train_neg_sample_args",
            f"sample_num takes a whole number of negatives of at least 1 (e.g. 1), not {sample_num!r}; for none, "
            "set train_neg_sample_args: ~",
        )
    pairwise = getattr(model_class, "input_type", None) == InputType.PAIRWISE  # a sequential model sets it per run
    if pairwise and distribution in (None, "none"):
        raise _setting_error(
            "train_neg_sample_args",
            f"leaves {model_class.__name__} without negatives: a pairwise model trains on a sampled negative item "
            "per pair; remove train_neg_sample_args: ~ from your settings (RecBole's default samples one, uniformly)",
        )
    defaults = model_defaults(model_class.__name__)
    trains_without = "train_neg_sample_args" in defaults and not defaults["train_neg_sample_args"]
    if trains_without and distribution not in (None, "none"):  # its YAML sets none: its loss reads positives only
        logging.getLogger().warning(
            f"train_neg_sample_args {sampling}: {model_class.__name__} trains on positive pairs only, so the sampled "
            "negatives are drawn and never read (only time lost); leave train_neg_sample_args: ~ for it"
        )


def check_normalization(config):
    """RecBole refuses both at once with a traceback from its dataset ("Normalize_field and normalize_all can't be
    set at the same time")."""
    if config["normalize_all"] and config["normalize_field"]:
        raise _setting_error(
            "normalize_field",
            f"{config['normalize_field']!r} and normalize_all: True cannot both be set (normalize_all scales every "
            "float column); keep one, e.g. normalize_all: False",
        )


def check_logging(config):
    """``log_wandb: True`` without the wandb package fails with an ImportError when RecBole's trainer starts, after
    the dataset and model are built."""
    if config["log_wandb"] and importlib.util.find_spec("wandb") is None:
        raise _setting_error(
            "log_wandb",
            "is True, but the wandb package is not installed; install it (pip install wandb, then wandb login), "
            "or leave log_wandb: False (the run's log and TensorBoard files are written either way)",
        )


def check_config(config, model_class, trainer_class=None, config_files=None):
    """All checks of this module, in the order a user would want to hear of them."""
    check_known_keys(config, model_class, trainer_class, config_files)
    refuse_pickle_settings(config)
    check_finite(config)
    check_sizes(config)
    check_device(config)
    check_evaluation(config)
    check_model_kind(config, model_class)
    check_negative_sampling(config, model_class)
    check_normalization(config)
    check_logging(config)


# ------------------------------------------------------------------------------------------------ what RecBole refuses

# What RecBole's Config raises on settings it refuses, and the settings to name (the rest: its own message)
RECBOLE_REFUSALS = {
    "Full sort evaluation do not match value-based metrics": (
        "metrics",
        "are value metrics (AUC, LogLoss, MAE, RMSE), which score labeled pairs, but eval_args mode is full (every "
        "item ranked); set eval_args mode: labeled (with a label field or threshold), or use ranking metrics such as "
        "[Recall, NDCG]",
    ),
    "Ranking metrics and value metrics can not be used at the same time": (
        "metrics",
        "mix ranking and value metrics, which RecBole cannot compute in one run; keep one kind",
    ),
    "should be None when the loss_type is CE": (
        "train_neg_sample_args",
        "must be ~ (none) for a model trained with loss_type CE, which scores every item (SASRec and GRU4Rec by "
        "default; a general protocol's YAML, such as the importer's, samples negatives); set "
        "train_neg_sample_args: ~ in a config file of the sequential protocol, or loss_type: BPR",
    ),
    "only support repeatable recommendation": (
        "repeatable",
        "must be True for a sequential model; set repeatable: True",
    ),
}


def _from_recbole(error):
    frames = []
    traceback = error.__traceback__
    while traceback is not None:
        frames.append(Path(traceback.tb_frame.f_code.co_filename).resolve())
        traceback = traceback.tb_next
    return bool(frames) and frames[-1].is_relative_to(RECBOLE_DIR)


@contextlib.contextmanager
def recbole_config_errors(config_dict=None):
    """Around RecBole's Config: what it refuses of the settings (a ValueError, TypeError, NotImplementedError or
    RuntimeError raised in RecBole's own code) becomes a ValueError naming the setting and the fix."""
    try:
        yield
    except (ValueError, TypeError, NotImplementedError, RuntimeError, AttributeError) as error:
        if not _from_recbole(error):
            raise
        text = str(error)
        for pattern, (key, why) in RECBOLE_REFUSALS.items():
            if pattern in text:
                shown = (config_dict or {}).get(key)
                raise ValueError(f"setting {key}{f' {shown!r}' if shown is not None else ''} {why}") from None
        raise ValueError(
            f"RecBole refused the settings: {text}; fix the setting it names in your config file or on the command line"
        ) from None


FILTER_SETTINGS = ("val_interval", "user_inter_num_interval", "item_inter_num_interval", "rm_dup_inter")


@contextlib.contextmanager
def dataset_build_errors(config):
    """Around building ``config``'s dataset: filters that leave no interaction (RecBole's "Some feat is empty")
    become a ValueError naming the filters in effect."""
    try:
        yield
    except ValueError as error:
        if not (_from_recbole(error) and "Some feat is empty" in str(error)):
            raise
        raise ValueError(_no_data_message(config)) from None


# settings that size a model's tensors, named in an out-of-memory error where the model reads them
SIZE_SETTINGS = ("embedding_size", "structural_size", "hidden_size", "n_features", "n_layers", "memory_size")


# torch's words for an allocation it could not make, on the CPU ("you tried to allocate N bytes") and on CUDA ("CUDA
# out of memory. Tried to allocate ..."); another RuntimeError that mentions allocating passes through as it is
ALLOCATION_FAILED = re.compile(r"tried to allocate|can't allocate memory|out of memory", re.IGNORECASE)
UNIT_BYTES = {"bytes": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}


@contextlib.contextmanager
def model_build_errors(config):
    """Around building ``config``'s model: an allocation the machine cannot make (sizes far beyond the data, such
    as ``structural_size=100000``) becomes a MemoryError naming the model, the size asked for and the settings that
    set it, not a traceback from the allocator."""
    try:
        yield
    except (RuntimeError, MemoryError) as error:
        text = str(error)
        if not isinstance(error, MemoryError) and not ALLOCATION_FAILED.search(text):
            raise
        asked = re.search(r"allocate (\d+(?:\.\d+)?) (bytes|[KMGT]iB)", text)
        size = f" (one tensor of {float(asked.group(1)) * UNIT_BYTES[asked.group(2)] / 2**30:.1f} GiB)" if asked else ""
        sizes = ", ".join(f"{key}={config[key]}" for key in SIZE_SETTINGS if config[key] is not None)
        raise MemoryError(
            f"building {config['model']} on {config['dataset']} needs more memory than this machine can give{size}"
            + (f", at {sizes}" if sizes else "")
            + "; lower those sizes, or run where more memory is free"
        ) from None


def _no_data_message(config):
    filters = ", ".join(f"{key}: {config[key]}" for key in FILTER_SETTINGS if config[key] not in (None, False))
    return (
        f"the data of {config['dataset']} leaves no interaction (or no user or item) after its filters"
        + (f" ({filters})" if filters else "")
        + "; widen the filters, or check the dataset's files"
    )


def _column(dataset, field):
    column = dataset.inter_feat[field]
    return column.numpy() if hasattr(column, "numpy") else np.asarray(column)


def _split_sizes(config, dataset):
    """``(train, valid, test)`` interaction counts RecBole's split of ``dataset`` will give (its own arithmetic,
    ``Dataset._calcu_split_ids`` per group), or None for a split that depends on more than counts (TS, files)."""
    split = config["eval_args"]["split"]
    if config["benchmark_filename"] or "TS" in split:
        return None
    per_user = collections.Counter(collections.Counter(_column(dataset, dataset.uid_field).tolist()).values())
    if "LS" in split:

        def at_least(n):  # users with n or more interactions: each gives one to each set it can fill
            return sum(users for count, users in per_user.items() if count >= n)

        valid, test = {
            "valid_and_test": (at_least(3), at_least(2)),
            "valid_only": (at_least(2), 0),
            "test_only": (0, at_least(2)),
        }[split["LS"]]
        return dataset.inter_num - valid - test, valid, test
    ratios = [r / sum(split["RS"]) for r in split["RS"]]
    group_by = config["eval_args"]["group_by"]
    groups = per_user.items() if group_by == "user" else [(dataset.inter_num, 1)]
    sizes = np.zeros(3, dtype=np.int64)
    for count, users in groups:
        bounds = [0, *dataset._calcu_split_ids(tot=count, ratios=ratios), count]
        sizes += users * np.diff(bounds)
    return tuple(int(size) for size in sizes)


def check_split_sizes(config, dataset):
    """A set the split gives a share must get interactions: each user's share is rounded down, so a validation share
    over users of a few interactions each leaves the validation set empty, and the run would go on without it."""
    sizes = _split_sizes(config, dataset)
    if sizes is None:
        return
    split = config["eval_args"]["split"]
    most = max(collections.Counter(_column(dataset, dataset.uid_field).tolist()).values())
    wanted = {"valid": True, "test": True}
    if "RS" in split:
        wanted = {"valid": split["RS"][1] > 0, "test": split["RS"][2] > 0}
    elif "LS" in split:
        wanted = {"valid": split["LS"] != "test_only", "test": split["LS"] != "valid_only"}
    for name, size in zip(("valid", "test"), sizes[1:]):
        if wanted[name] and size == 0:
            raise ValueError(
                f"eval_args split {split} leaves the {name} set of {config['dataset']} empty: its users have at most "
                f"{most} interactions each after filtering, too few for a {name} part (RecBole rounds each user's "
                f"share down); give it a larger share, keep users with more interactions, or give it no share to run "
                f"without it"
            )


def check_topk_fits(config, dataset):
    """A top-k list longer than the items there are ranks the padding item and every item: a recall of 1 by
    construction, not a measurement."""
    if config["eval_type"] != EvaluatorType.RANKING or not any(metric_at_k(m) for m in config["metrics"]):
        return
    items = dataset.item_num - 1  # id 0 is RecBole's padding
    if max(config["topk"]) > items:
        raise ValueError(
            f"topk {list(config['topk'])} goes above the {items} items of {config['dataset']} (after filtering): a "
            f"top-{max(config['topk'])} list would hold every item; lower topk to at most {items} (and valid_metric "
            "with it)"
        )


def check_time_field(config, dataset):
    """The time field a time order sorts by is a float column of the interactions (a token field sorts by id)."""
    if not _time_ordered(config):
        return
    field = config["TIME_FIELD"]
    if dataset.field2source.get(field) != FeatureSource.INTERACTION:
        raise ValueError(
            f"eval_args orders interactions by time, but {config['dataset']}'s interactions have no {field!r} "
            "column (the TIME_FIELD); add it to the .inter file and load_col, or use order: RO"
        )
    if dataset.field2type[field] != FeatureType.FLOAT:
        raise ValueError(
            f"the time field {field!r} of {config['dataset']} is a {dataset.field2type[field].value} column, so "
            f"RecBole would order interactions by token id, not by time; declare it '{field}:float'"
        )


def check_labels(config, dataset):
    """Labeled evaluation scores each held-out pair against its label, which the interactions must have (a label
    column, or one ``threshold`` makes from a rating)."""
    label = config["LABEL_FIELD"]
    if config["MODEL_TYPE"] == ModelType.CONTEXT and label not in dataset.inter_feat:  # its loss reads the label
        raise ValueError(
            f"{config['model']} is a context-aware model: it trains on each pair's label, but the interactions of "
            f"{config['dataset']} have no {label!r} column (the LABEL_FIELD); set threshold (e.g. threshold: "
            f"{{rating: 4}}) to label them from a rating, or add a {label}:float column"
        )
    if "labeled" in _modes(config) and label not in dataset.inter_feat:
        raise ValueError(
            f"eval_args mode labeled scores each pair against its label, but the interactions of {config['dataset']} "
            f"have no {label!r} column (the LABEL_FIELD); set threshold (e.g. threshold: {{rating: 4}}) to label "
            f"them from a rating, add a {label}:float column, or use mode: full"
        )


def check_against_dataset(config, dataset):
    """The checks that need the data, once ``dataset`` (RecBole's Dataset of ``config``) is built and before it is
    split: interactions left after the filters, ``topk`` within the item count, a float time field for a time
    order, labels for a labeled evaluation, and no set the split gives a share left empty."""
    if dataset.inter_num == 0 or dataset.user_num <= 1 or dataset.item_num <= 1:
        raise ValueError(_no_data_message(config))
    check_topk_fits(config, dataset)
    check_time_field(config, dataset)
    check_labels(config, dataset)
    check_split_sizes(config, dataset)
