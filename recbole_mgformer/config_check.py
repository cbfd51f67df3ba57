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
"""

import difflib
import functools
import inspect
import logging
import math
import re
from pathlib import Path

import recbole
import torch
import yaml
from recbole.utils import dataset_arguments, evaluation_arguments, general_arguments, training_arguments

from recbole_mgformer.defaults import dataset_config_file, model_config_file
from recbole_mgformer.safety import SafeLoader, refuse_pickle_settings

ESCAPE_KEY = "extra_config_keys"
RECBOLE_DIR = Path(recbole.__file__).resolve().parent
RECBOLE_PACKAGES = ("config", "data", "trainer", "evaluator", "sampler", "utils", "quick_start")
# Keys of this project's data-parallel runs (distributed.py, run_recommender), and the escape hatch.
# Read by this project's runner, not by a model: data-parallel settings, a dataset config's benchmark table,
# results page and the dataset whose files it reads (benchmark/datasets.py, data/sources.py), and whether a run
# flushes subnormal numbers (model/precision.py).
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
    close = difflib.get_close_matches(key, sorted(known), n=3, cutoff=0.75)
    hint = f"did you mean {' or '.join(close)}? " if close else ""
    raise ConfigKeyError(
        f"unknown config key {key!r} (from {_origin(key, config_files)}): {hint}neither {model_class.__name__}, "
        f"the dataset {config['dataset']!r} nor RecBole reads it, so it would be ignored"
        + (f" (other unknown keys: {', '.join(unknown[1:])})" if unknown[1:] else "")
        + f". If your own code reads it, list it in {ESCAPE_KEY}, e.g. `{ESCAPE_KEY}: [{key}]` in a config file "
        f"or --{ESCAPE_KEY}=[{key}]."
    )


def _non_finite(value, where):
    """The path of the first NaN or infinite number in ``value`` (numbers, numeric strings, lists, dicts)."""
    if isinstance(value, bool):
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
            raise ValueError(
                f"config value {where} is {value!r}: not a finite number; give a finite value "
                f"(e.g. --{key}=0.5 or `{key}: 0.5` in a config file)"
            )


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
POSITIVE_NUMBER_KEYS = ("learning_rate",)


def check_sizes(config):
    """Reject impossible counts and sizes before a run starts: ``--epochs=0`` trained nothing and reported the
    untrained model's metrics, ``embedding_size: 0`` trained a model of zero width."""
    for key in POSITIVE_INTEGER_KEYS:
        value = config.final_config_dict.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(
                f"config value {key} is {value!r}: it must be a whole number of at least 1 "
                f"(e.g. --{key}=10 or `{key}: 10` in a config file)"
            )
    for key in POSITIVE_NUMBER_KEYS:
        value = config.final_config_dict.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            raise ValueError(
                f"config value {key} is {value!r}: it must be a number above 0 "
                f"(e.g. --{key}=0.001 or `{key}: 0.001` in a config file)"
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


def check_config(config, model_class, trainer_class=None, config_files=None):
    """All checks of this module, in the order a user would want to hear of them."""
    check_known_keys(config, model_class, trainer_class, config_files)
    refuse_pickle_settings(config)
    check_finite(config)
    check_sizes(config)
    check_device(config)
