"""Checks of what a user points the commands at, before RecBole or the filesystem meets it: config files (each a
YAML mapping, read as RecBole reads it), dataset names (a folder under ``data_path``, never a path out of it) and
output paths (never silently replacing a file or a non-empty folder). Each failure names the file, line or option
and the fix."""

import contextlib
import difflib
import errno
import math
import numbers
import os
import re
import secrets
import socket
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

import yaml

PACKAGE_DIR = Path(__file__).resolve().parents[1]  # the whole package, not this folder


def close_names(name, known, cutoff=0.75):
    """Up to three of ``known`` spelled close to ``name``, closest first, case aside (the lookups that use it are
    forgiving of case), each as ``known`` spells it."""
    by_lower = {}
    for candidate in sorted(map(str, known)):
        by_lower.setdefault(candidate.lower(), candidate)
    return [by_lower[match] for match in difflib.get_close_matches(str(name).lower(), by_lower, n=3, cutoff=cutoff)]


def did_you_mean(name, known, cutoff=0.75):
    """``"did you mean A or B?"`` for the :func:`close_names`, else ``""``."""
    close = close_names(name, known, cutoff)
    return f"did you mean {' or '.join(close)}?" if close else ""


class ConfigFileError(ValueError):
    """A config file that is missing, not UTF-8, not YAML, or not a mapping of settings."""


def _compose_and_load(text):
    """The composed root node and the settings of a YAML text, read with the project's safe loader (RecBole's float
    resolver, no Python objects from tags, and bounded: :class:`recbole_mgformer.safety.settings.YamlBombError` for
    a document that aliases expand past what any config needs)."""
    from recbole_mgformer.safety.settings import SafeLoader

    loader = SafeLoader(text)
    try:
        node = loader.get_single_node()
        return node, (loader.construct_document(node) if node is not None else None)
    finally:
        loader.dispose()


def _where(path, mark):
    return f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(path)


def _duplicate_key(path, node, within="", visited=None):
    """The first key a mapping repeats, at any depth (YAML keeps the last silently), as an error naming both lines.
    Each node is visited once: aliases share nodes, and a bomb of them must not be walked exponentially."""
    visited = set() if visited is None else visited
    if id(node) in visited or not isinstance(node, (yaml.MappingNode, yaml.SequenceNode)):
        return None
    visited.add(id(node))
    if isinstance(node, yaml.SequenceNode):
        return next((e for item in node.value if (e := _duplicate_key(path, item, within, visited))), None)
    seen = {}
    for key, value in node.value:
        if isinstance(key, yaml.ScalarNode):
            if key.value in seen:
                place = f" (in {within})" if within else ""
                return ConfigFileError(
                    f"{_where(path, key.start_mark)}: key {key.value!r}{place} is set twice (also on line "
                    f"{seen[key.value] + 1}); YAML would keep the last silently: keep one"
                )
            seen[key.value] = key.start_mark.line
        inner = f"{within} {key.value}".strip() if isinstance(key, yaml.ScalarNode) else within
        error = _duplicate_key(path, value, inner, visited)
        if error:
            return error
    return None


def read_config_file(path):
    """The settings of one YAML config file as a dict (``{}`` for an empty file), read as RecBole reads it (a UTF-8
    byte-order mark is allowed); raises :class:`ConfigFileError` naming the file, line and fix otherwise."""
    path = Path(path)
    if not path.exists():
        raise ConfigFileError(
            f"config file {str(path)!r} does not exist; check the path (--config_files takes "
            "space-separated YAML files)"
        )
    if not path.is_file():
        raise ConfigFileError(f"config file {str(path)!r} is not a file; name a YAML file of settings")
    settings = parse_settings_text(utf8_text(path, "config file"), path)
    if settings is None:
        return {}
    if not isinstance(settings, dict):
        raise ConfigFileError(
            f"{path}: a config file must be a mapping of settings (lines of 'key: value', e.g. "
            f"'epochs: 10'), not a YAML {type(settings).__name__}"
        )
    return settings


def utf8_text(path, what):
    """The text of the YAML file ``path`` (a ``what``: config file, search space), read as UTF-8 as RecBole reads it
    (a byte-order mark allowed), or a :class:`ConfigFileError` naming the line of the first byte that is not."""
    raw = Path(path).read_bytes()
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = raw[: error.start].count(b"\n") + 1
        raise ConfigFileError(
            f"{path}:{line}: byte {raw[error.start : error.start + 1]!r} is not UTF-8; save the {what} as UTF-8"
        ) from None


def parse_settings_text(text, path):
    """The YAML document ``text`` (of the file ``path``, for messages) read with the project's safe loader; a
    syntax error, an alias bomb or a key a mapping repeats at any depth is a :class:`ConfigFileError` naming the
    line and the fix."""
    from recbole_mgformer.safety.settings import YamlBombError

    try:
        node, settings = _compose_and_load(text)
    except YamlBombError as error:
        raise ConfigFileError(f"{_where(path, error.problem_mark)}: {error.problem}") from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        problem = getattr(error, "problem", None) or str(error)
        hint = (
            "indent with spaces: YAML does not allow tabs"
            if "\\t" in problem or "\t" in problem
            else "fix the YAML syntax (lines of 'key: value')"
        )
        raise ConfigFileError(f"{_where(path, mark)}: not valid YAML ({problem}); {hint}") from None
    duplicate = _duplicate_key(path, node)
    if duplicate is not None:
        raise duplicate
    return settings


def _is_flag(value):
    """True, False, or a number or numpy scalar equal to one of them (a tuning draw of a flag)."""
    if isinstance(value, (str, bytes, list, tuple, dict, set)) or getattr(value, "ndim", 0) != 0:
        return False
    return value in (0, 1)


def _is_number(value):
    return isinstance(value, numbers.Real) and not isinstance(value, bool)  # numpy's scalars too (a tuning draw)


SHAPES = {"eval_args": {"split": {"RS": [0.8, 0.1, 0.1]}, "order": "RO", "group_by": "user", "mode": "full"}}


# ------------------------------------------------------------------------------------------------ evaluation settings

LS_MODES = ("valid_and_test", "valid_only", "test_only")
EVAL_ARGS_KEYS = ("split", "order", "group_by", "mode")
EVAL_MODE = re.compile(r"full|labeled|(?:uni|pop)[1-9][0-9]*")
SEED_BOUND = 2**32  # numpy's seeding takes 0 <= seed < 2**32
# settings RecBole's Config or its first use fails on when unset (``topk: ~``, ``seed: ~``)
REQUIRED = ("metrics", "topk", "valid_metric", "eval_args", "seed")


def _metric_registry():
    from recbole.evaluator.register import metric_types, metrics_dict

    return metrics_dict, metric_types


def metric_at_k(name):
    """Whether RecBole's metric ``name`` is reported at each top-k cut-off (``recall@20``), not once (``auc``)."""
    metrics_dict, _ = _metric_registry()
    return any(need in ("rec.topk", "rec.items") for need in metrics_dict[name.lower()].metric_need)


def is_value_metric(name):
    from recbole.utils import EvaluatorType

    return _metric_registry()[1][name.lower()] == EvaluatorType.VALUE


def _whole(value):
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _topk_problem(value):
    values = value if isinstance(value, list) else [value]
    if not values or not all(_whole(k) and k > 0 for k in values):
        return f"takes whole numbers above 0 (e.g. [10, 20]), not {value!r}"
    twice = next((k for i, k in enumerate(values) if k in values[:i]), None)
    if twice is not None:  # each metric would be computed and reported twice at it
        return f"lists {twice} twice in {value!r}; list each cutoff once (e.g. {sorted(set(values))})"
    return None


def _metrics_problem(value):
    metrics_dict, _ = _metric_registry()
    values = value if isinstance(value, list) else [value]
    if not values or not all(isinstance(m, str) for m in values):
        return f"takes a list of RecBole's metric names (e.g. [Recall, NDCG]) or one name, not {value!r}"
    unknown = [m for m in values if m.lower() not in metrics_dict]
    if unknown:
        return f"names {', '.join(map(repr, unknown))}, not among RecBole's metrics ({', '.join(metrics_dict)})"
    ranking = [m for m in values if not is_value_metric(m)]
    if ranking and len(ranking) < len(values):
        scored = [m for m in values if is_value_metric(m)]
        return (
            f"mixes ranking metrics ({', '.join(ranking)}) and value metrics ({', '.join(scored)}), which RecBole "
            "cannot compute in one run; keep one kind"
        )
    return None


def _valid_metric_problem(value):
    metrics_dict, _ = _metric_registry()
    if not isinstance(value, str) or not value:
        return (
            f"takes the name of one of the run's metrics, at one of topk for a top-k one (e.g. NDCG@20), not {value!r}"
        )
    name, at, k = value.partition("@")
    if name.lower() not in metrics_dict:
        return f"names {name!r}, not among RecBole's metrics ({', '.join(metrics_dict)})"
    if metric_at_k(name) and not (at and re.fullmatch(r"[1-9][0-9]*", k)):
        return f"is {value!r}: {name} is reported at a cut-off, so write {name}@K with K one of topk (e.g. {name}@20)"
    if not metric_at_k(name) and at:
        return f"is {value!r}: {name} is reported once, not at a cut-off; write {name}"
    return None


def _seed_problem(value):
    if not (_whole(value) and 0 <= value < SEED_BOUND):
        return f"takes a whole number from 0 to {SEED_BOUND - 1} (what numpy's seeding accepts), not {value!r}"
    return None


def _ratios_problem(mode, ratios):
    if not (isinstance(ratios, list) and len(ratios) == 3 and all(_is_number(r) for r in ratios)):
        return f"split {mode} takes three numbers [train, valid, test] (e.g. {{{mode}: [0.8, 0.1, 0.1]}}), not {ratios}"
    if not all(map(math.isfinite, ratios)):
        return None  # named, with its place, by config_check.check_finite
    if not all(r >= 0 for r in ratios):
        return f"split {mode} {ratios!r}: each share must be a number of at least 0"
    if ratios[0] <= 0:
        return f"split {mode} {ratios} gives training no share (RecBole would train on nothing); give it one, e.g. 0.8"
    if ratios[1] + ratios[2] <= 0:
        return (
            f"split {mode} {ratios!r} leaves nothing to validate or test on; give the validation and test sets a "
            "share, e.g. [0.8, 0.1, 0.1]"
        )
    return None


def _split_problem(split):
    if not (isinstance(split, dict) and len(split) == 1):
        return (
            f"split takes one of {{RS: [train, valid, test]}}, {{TS: [train, valid, test]}} or {{LS: valid_and_test}}, "
            f"not {split!r}"
        )
    ((mode, value),) = split.items()
    if mode in ("RS", "TS"):
        return _ratios_problem(mode, value)
    if mode == "LS":
        return None if value in LS_MODES else f"split LS takes one of {', '.join(LS_MODES)}, not {value!r}"
    return f"split {mode!r} is no RecBole split; use RS (ratios at random), TS (ratios by time) or LS (leave one out)"


def _mode_problem(mode):
    phases = mode if isinstance(mode, dict) else {"valid": mode}
    extra = [phase for phase in phases if phase not in ("valid", "test")]
    if extra:
        return f"mode takes one mode, or {{valid: <mode>, test: <mode>}}, not the key {extra[0]!r}"
    bad = [m for m in phases.values() if not (isinstance(m, str) and EVAL_MODE.fullmatch(m))]
    if bad:
        return f"mode {bad[0]!r} is not one of full, labeled, uni<N> or pop<N> (e.g. uni100)"
    return None


def eval_args_problem(value):
    """Why ``eval_args`` (a user's, or RecBole's merged one) cannot be split and evaluated, or None."""
    if not isinstance(value, dict):
        return f"takes a mapping like {SHAPES['eval_args']}, not {value!r}"
    extra = [key for key in value if key not in EVAL_ARGS_KEYS]
    if extra:
        return f"has no setting {extra[0]!r} (RecBole would ignore it); its settings are {', '.join(EVAL_ARGS_KEYS)}"
    problem = _split_problem(value["split"]) if "split" in value else None
    if not problem and value.get("order", "RO") not in ("RO", "TO"):
        problem = f"order takes RO (at random) or TO (by time), not {value['order']!r}"
    group_by = value.get("group_by", "user")
    if not problem and not (group_by is None or (isinstance(group_by, str) and group_by.lower() in ("user", "none"))):
        problem = f"group_by takes user or none, not {group_by!r}"
    if not problem and "mode" in value:
        problem = _mode_problem(value["mode"])
    return problem


LOG_STATES = ("INFO", "DEBUG", "WARNING", "ERROR", "CRITICAL")


def _state_problem(value):
    """RecBole's ``init_logger`` takes any other ``state`` as INFO without a word."""
    if not (isinstance(value, str) and value.upper() in LOG_STATES):
        return f"takes one of {', '.join(LOG_STATES)} (the log's level), not {value!r}"
    return None


# RecBole's Trainer takes any other ``learner`` as Adam without weight decay, with one log line
LEARNERS = ("adam", "adamw", "sgd", "adagrad", "rmsprop")


def _learner_problem(value):
    if isinstance(value, str) and value.lower() in LEARNERS:
        return None
    if isinstance(value, str) and value.lower() == "sparse_adam":  # RecBole's name for torch's SparseAdam
        return "sparse_adam needs sparse gradients, which no model here makes (its embeddings are dense); use adam"
    hint = did_you_mean(value, LEARNERS) if isinstance(value, str) else ""
    return f"takes one of {', '.join(LEARNERS)} (the optimizer), not {value!r}" + (f" ({hint})" if hint else "")


# ``clip_grad_norm`` is passed as keyword arguments to torch's ``clip_grad_norm_``
CLIP_KEYS = ("max_norm", "norm_type", "error_if_nonfinite", "foreach")


def _clip_grad_norm_problem(value):
    if value is None or value == {}:
        return None  # no clipping
    example = "{max_norm: 5.0} (or leave it unset for no clipping)"
    if not isinstance(value, dict):
        return f"takes a mapping like {example}, not {value!r}"
    extra = [key for key in value if key not in CLIP_KEYS]
    if extra:
        return f"has no setting {extra[0]!r}; its settings are {', '.join(CLIP_KEYS)}"
    max_norm, norm_type = value.get("max_norm"), value.get("norm_type", 2.0)
    if not (_is_number(max_norm) and math.isfinite(max_norm) and max_norm > 0):
        return f"max_norm takes a number above 0 (0 would zero every gradient), as in {example}, not {max_norm!r}"
    if not (norm_type == "inf" or (_is_number(norm_type) and norm_type > 0)):
        return f"norm_type takes a number above 0 or inf (default 2.0), not {norm_type!r}"
    bad = [key for key in ("error_if_nonfinite", "foreach") if value.get(key) not in (True, False, None)]
    if bad:
        return f"{bad[0]} takes True or False, not {value[bad[0]]!r}"
    return None


def _intervals_problem(value, example="[5,inf)"):
    """RecBole's intervals (``[4,inf)``, ``(0,1];[3,4)``): it skips a malformed one with a warning, and an empty list
    of intervals then keeps no row, or, through ``~True``, drops one arbitrary row (``val_interval``)."""
    for part in str(value).split(";"):
        part = part.strip()
        ends = part[1:-1].split(",")
        if not (len(part) >= 2 and part[0] in "([" and part[-1] in ")]" and len(ends) == 2):
            shape = "brackets ( or [ and ) or ], two ends, ';' between"
            return f"takes intervals like {example!r} ({shape}), not {value!r}"
        try:
            low, high = float(ends[0]), float(ends[1])
        except ValueError:
            return f"takes intervals whose ends are numbers or inf, like {example!r}, not {value!r}"
        if math.isnan(low) or math.isnan(high) or low > high:
            return f"takes intervals whose left end is at most their right end, like {example!r}, not {value!r}"
    return None


def _inter_num_interval_problem(value):
    return _intervals_problem(value) if value is not None else None


def _val_interval_problem(value):
    """``val_interval``: a float field's intervals, or a token field's list of kept values."""
    if value is None:
        return None
    if not isinstance(value, dict):
        return f"takes a mapping of fields, like {{rating: '[4,inf)'}}, not {value!r}"
    for field, kept in value.items():
        if isinstance(kept, list):
            continue  # a token field's values to keep
        if not isinstance(kept, str):
            return (
                f"takes, for field {field!r}, intervals like '[4,inf)' (a float field) or a list of values to keep "
                f"(a token field), not {kept!r}"
            )
        problem = _intervals_problem(kept, "[4,inf)")
        if problem:
            return f"for field {field!r} {problem}"
    return None


# RecBole fills the keys of train_neg_sample_args it knows and keeps any other without a word
NEG_SAMPLE_KEYS = ("distribution", "sample_num", "alpha", "dynamic", "candidate_num")
NEG_SAMPLE_DISTRIBUTIONS = ("uniform", "popularity", "none")


def _train_neg_sample_args_problem(value):
    if value is None:
        return None  # no negatives (pointwise models)
    example = "{distribution: uniform, sample_num: 1} (or ~ for none)"
    if not isinstance(value, dict):
        return f"takes a mapping like {example}, not {value!r}"
    extra = [key for key in value if key not in NEG_SAMPLE_KEYS]
    if extra:
        hint = did_you_mean(str(extra[0]), NEG_SAMPLE_KEYS)
        return f"has no setting {extra[0]!r}; its settings are {', '.join(NEG_SAMPLE_KEYS)}" + (
            f" ({hint})" if hint else ""
        )
    distribution = value.get("distribution", "uniform")
    if distribution not in NEG_SAMPLE_DISTRIBUTIONS:
        return f"distribution takes one of {', '.join(NEG_SAMPLE_DISTRIBUTIONS)}, not {distribution!r}"
    return None


def _gpu_id_problem(value):
    # RecBole sets CUDA_VISIBLE_DEVICES to it: a word there hides every GPU, and the run goes to the CPU
    numbers = list(value) if isinstance(value, tuple) else [value]  # --gpu_id=0,1 reads as (0, 1), as RecBole's
    if numbers and all(_whole(n) and n >= 0 for n in numbers):
        return None
    if isinstance(value, str) and re.fullmatch(r"(\s*\d+\s*(,\s*\d+\s*)*)?", value):  # '' is RecBole's no GPU
        return None
    return f"takes GPU numbers separated by commas (e.g. 0 or 0,1, as nvidia-smi numbers them), not {value!r}"


SHAPE_CHECKS = {
    "train_neg_sample_args": _train_neg_sample_args_problem,
    "gpu_id": _gpu_id_problem,
    "val_interval": _val_interval_problem,
    "user_inter_num_interval": _inter_num_interval_problem,
    "item_inter_num_interval": _inter_num_interval_problem,
    "state": _state_problem,
    "learner": _learner_problem,
    "clip_grad_norm": _clip_grad_norm_problem,
    "topk": _topk_problem,
    "metrics": _metrics_problem,
    "valid_metric": _valid_metric_problem,
    "seed": _seed_problem,
    "eval_args": eval_args_problem,
}


def setting_type_error(key, value, default):
    """Why ``value`` cannot be ``key``'s setting, given its default; None when it can. Only shapes RecBole cannot
    use at all: text or a list where a number goes, a non-mapping where a mapping goes, top-k that are not
    whole numbers, metrics RecBole does not know (or of both kinds), a validation metric that is no metric, a seed
    numpy refuses, a split or evaluation mode RecBole has not (see :func:`eval_args_problem`)."""
    if value is None:
        if key not in REQUIRED:
            return None
        example = SHAPES.get(key, default if default is not None else recbole_defaults().get(key))
        return f"must be set (e.g. {key}: {example!r})"
    if key in SHAPE_CHECKS:
        return SHAPE_CHECKS[key](value)
    default = SHAPES.get(key, default)
    if isinstance(default, bool) and not _is_flag(value):
        return f"takes True or False (default {default}), not {value!r}"  # RecBole would read any text as True
    if _is_number(default) and not _is_number(value):
        return f"takes a number (default {default}), not {value!r}"
    if isinstance(default, dict) and not isinstance(value, dict):
        return f"takes a mapping like {default}, not {value!r}"
    return None


def _raise_type_error(key, problem):
    raise ValueError(f"setting {key} {problem}; fix it in your config file or on the command line (--{key}=...)")


def as_recbole_reads(config_dict):
    """``config_dict`` as RecBole's Config reads it: each string read as a literal (``"20"`` the number 20,
    ``"[10, 20]"`` a list), as its ``_convert_config_dict`` does (without ``eval``)."""
    from recbole_mgformer.safety.settings import literal_settings

    return literal_settings(dict(config_dict or {}))


def combination_problem(settings):
    """``(key, why)`` for settings that cannot work together, or None: value metrics (AUC, LogLoss, MAE, RMSE) score
    labeled pairs, so they need ``eval_args`` mode labeled, never full ranking."""
    metrics, eval_args = settings.get("metrics"), settings.get("eval_args")
    if metrics is None or not isinstance(eval_args, dict) or "mode" not in eval_args:
        return None
    metrics = metrics if isinstance(metrics, list) else [metrics]
    mode = eval_args["mode"]
    modes = set(mode.values()) if isinstance(mode, dict) else {mode}
    if metrics and all(is_value_metric(m) for m in metrics) and "full" in modes:
        return (
            "metrics",
            f"{metrics!r} are value metrics, which score labeled pairs, but eval_args mode is full (every item "
            "ranked); set eval_args mode: labeled, or use ranking metrics such as [Recall, NDCG]",
        )
    return None


def checked_run_inputs(config_file_list=None, config_dict=None):
    """``(config_file_list, config_dict)`` of a Python call as lists and mappings: one file may be given alone (a
    path, not a list of its characters); a ``config_dict`` that is no mapping (``"epochs=1"``) is named. A file's
    leading ``~`` is the home folder, as a shell reads it (``--config_files=~/my.yaml`` reaches us unexpanded)."""
    config_file_list, config_dict = _as_lists_and_mappings(config_file_list, config_dict)
    if config_file_list is not None:
        config_file_list = [os.path.expanduser(f) if str(f).startswith("~") else f for f in config_file_list]
    return config_file_list, config_dict


def _as_lists_and_mappings(config_file_list, config_dict):
    if isinstance(config_file_list, (str, os.PathLike)):
        config_file_list = [config_file_list]
    elif config_file_list is not None:
        try:
            config_file_list = list(config_file_list)
        except TypeError:
            config_file_list = [config_file_list]
        strays = [f for f in config_file_list if not isinstance(f, (str, os.PathLike))]
        if strays:
            raise ValueError(f"config_file_list takes paths of YAML files, e.g. ['my.yaml'], not {strays[0]!r}")
    if config_dict is not None and not isinstance(config_dict, Mapping):
        raise ValueError(
            f"config_dict takes a mapping of settings, e.g. {{'epochs': 10}}, not {config_dict!r}"
            + (" (on the command line: --key=value)" if isinstance(config_dict, str) else "")
        )
    return config_file_list, None if config_dict is None else plain_values(config_dict)


def plain_values(value):
    """``value`` with numpy's scalars as Python's and tuples as lists, all the way down: RecBole's settings are
    what YAML gives (``embedding_size: np.int64(8)`` failed the size check as "is 8", and no record could hold it)."""
    if isinstance(value, Mapping):
        return {key: plain_values(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain_values(item) for item in value]
    if type(value).__module__ == "numpy" and hasattr(value, "tolist"):  # a scalar or an array
        if getattr(value, "ndim", None) == 0 and value.dtype.kind == "f" and value.dtype.itemsize < 8:
            return float(str(value))  # np.float32(0.01) is 0.01 as written, not 0.009999999776
        return value.tolist()
    return value


# the folders a run reads and writes (RecBole's defaults), where a user may write ~ for the home folder: RecBole
# reads --checkpoint_dir=~/saved as a folder named "~" in the working folder, and a shell expands ~ only at a word's
# start, not after --key=
FOLDER_SETTINGS = {"data_path": "dataset/", "checkpoint_dir": "saved/"}


def user_setting_sources(config_file_list=None, config_dict=None):
    """``[(where, settings)]`` of each config file in order, then of ``config_dict``, each read once as RecBole will
    read it (a string of ``config_dict`` as a literal); the checks below take them."""
    sources = [(f"config file {path}", read_config_file(path)) for path in config_file_list or ()]
    return [*sources, ("config_dict", as_recbole_reads(config_dict))]


def _merged(sources):
    """The settings of ``sources`` as RecBole merges them: a later source wins."""
    settings = {}
    for _, source in sources:
        settings.update(source)
    return settings


def expand_home_folders(sources, config_dict=None):
    """``config_dict`` with each :data:`FOLDER_SETTINGS` key that starts with ``~``, in a config file or in
    ``config_dict`` (``sources``: :func:`user_setting_sources` of both), set to the folder it names under the home
    folder (``config_dict`` wins over the files, as in RecBole); an empty one, or one that is no path, is an error
    naming it (RecBole's traceback was a TypeError)."""
    settings = _merged(sources)
    expanded = {}
    for key, default in FOLDER_SETTINGS.items():
        if key not in settings:
            continue
        value = settings[key]
        if value is None or (isinstance(value, str) and not value.strip()):
            _raise_type_error(key, f"is empty; give a folder, e.g. --{key}={default} (RecBole's default)")
        if not isinstance(value, (str, os.PathLike)):
            _raise_type_error(key, f"is {value!r}, not a folder's path; give one as text, e.g. --{key}={default}")
        if str(value).startswith("~"):
            expanded[key] = os.path.expanduser(str(value))
    return {**(config_dict or {}), **expanded} if expanded else config_dict


def check_user_settings(sources):
    """The settings of ``sources`` (:func:`user_setting_sources`) whose wrong shape RecBole's Config itself fails on
    (topk, metrics, valid_metric, seed, eval_args), checked before it is built, and the combinations of them that
    cannot work."""
    settings = _merged(sources)
    for key, value in settings.items():
        problem = setting_type_error(key, value, None)
        if problem:
            _raise_type_error(key, problem)
    combination = combination_problem(settings)
    if combination:
        _raise_type_error(*combination)


def check_chosen_names(model, dataset, sources):
    """A run's model and dataset are its own arguments (``--model``, ``run_recommender``'s ``model``): RecBole takes
    them over a ``model:`` or ``dataset:`` in a config file or ``config_dict`` without a word, so a benchmark entry
    ``BPR[model=LightGCN]`` trained BPR under LightGCN's name. One that names another is an error (``sources``:
    :func:`user_setting_sources`)."""
    for where, settings in sources:
        for key, chosen in (("model", model), ("dataset", dataset)):
            given = settings.get(key, chosen)
            if key == "model" and str(given).lower() == str(chosen).lower():
                continue  # a model's name is read case aside (--model=mgformer)
            if given != chosen:
                raise ValueError(
                    f"{where} sets {key}: {given!r}, but this run's {key} is {chosen!r}: the {key} is chosen by "
                    f"--{key} (or run_recommender's {key}), never by a setting; remove {key} from {where}"
                )


def recbole_defaults():
    """RecBole's general settings (``recbole/properties/overall.yaml``), whose types are fixed for every model (a
    model's own options may take a number or a word, e.g. ``residual_scale: learned``)."""
    import recbole

    return read_config_file(Path(recbole.__file__).parent / "properties" / "overall.yaml")


# the runner's own switches (config_check.PROJECT_KEYS), on unless set to False: typed as RecBole's flags are
RUNNER_FLAGS = {"flush_subnormals": True, "keep_freed_memory": True}


def runner_flag(config, key):
    """A :data:`RUNNER_FLAGS` switch of ``config`` (None: no config): its default where unset, else its value."""
    value = None if config is None else config[key]
    return RUNNER_FLAGS[key] if value is None else bool(value)


def setting_defaults():
    """The settings whose types are fixed for every model: RecBole's general ones and :data:`RUNNER_FLAGS`."""
    return {**RUNNER_FLAGS, **recbole_defaults()}


def check_setting_types(config, model_defaults=None):
    """Every setting of a type RecBole would fail on deep in a run (``--learning_rate=abc``: a TypeError at the
    first step) is an error naming it, before any data is read. A model's own option whose default is a number
    may take a word (``residual_scale: learned``), never a list or a mapping (``embedding_size: [8]``)."""
    defaults = setting_defaults()
    model_defaults = {**config.internal_config_dict, **(model_defaults or {})}
    for key, value in config.final_config_dict.items():
        problem = setting_type_error(key, value, defaults.get(key))
        if not problem and key not in defaults and isinstance(value, (list, dict)):
            problem = setting_type_error(key, value, model_defaults.get(key))
        if not problem and value is None and key in config.external_config_dict:
            problem = _unset_number_problem(key, defaults.get(key, model_defaults.get(key)))
        if problem:
            _raise_type_error(key, problem)


def settle_flags(config):
    """A flag of RecBole's or the runner's given as 0 or 1 (a tuning draw, ``--reproducibility=0``), which
    :func:`check_setting_types` takes, set to False or True: the logged config then says what the run does."""
    defaults = setting_defaults()
    for key, value in config.final_config_dict.items():
        default = SHAPES.get(key, defaults.get(key))
        if isinstance(default, bool) and not isinstance(value, bool) and _is_flag(value):
            config.final_config_dict[key] = bool(value)


def _unset_number_problem(key, default):
    """A number setting the user left empty (``--epochs=``, ``learning_rate: ~``): RecBole and torch compare or
    multiply it deep in a run (``'<' not supported between 'NoneType' and 'int'``)."""
    if _is_number(default):
        return f"takes a number (default {default}), not an empty value (leave it out for the default)"
    return None


# a dataset's files (<name>.inter, the importer's temporaries beside them), RecBole's log (<Model>-<name>-<time>.log)
# and a benchmark's records add to its name
MAX_DATASET_NAME_BYTES = 128


def check_dataset_name(dataset):
    """A dataset is a folder name under ``data_path``; a name with a path in it would read (and log to) files
    outside it."""
    if not isinstance(dataset, str):
        raise ValueError(
            f"dataset {dataset!r} is not a dataset name: give the name of a folder under data_path as text, "
            "e.g. 'ml-100k'"
        )
    name = dataset
    if (
        not name.strip()
        or name in (".", "..")
        or "/" in name
        or "\\" in name
        or "\0" in name
        or os.path.isabs(name)
        or name != name.strip()
    ):
        raise ValueError(
            f"dataset {name!r} is not a dataset name: it must be the name of a folder under "
            "data_path, without '/', '..' or surrounding spaces (--dataset, --datasets); for files in "
            "/some/where/<name>/ pass --dataset=<name> --data_path=/some/where"
        )
    if len(name.encode()) > MAX_DATASET_NAME_BYTES:
        raise ValueError(
            f"dataset {name[:40]}...: its name is {len(name.encode())} bytes; its files, logs and runs are named after "
            f"it and a file name holds 255, so keep it to {MAX_DATASET_NAME_BYTES} bytes"
        )
    return name


def _nearest_existing(path):
    """``path`` itself or the nearest of its parents that exists (None: none does)."""
    return next((candidate for candidate in (path, *path.parents) if candidate.exists()), None)


def _check_parents(path, option):
    """The first existing folder above ``path`` must be a folder, not a file."""
    parent = _nearest_existing(Path(path).absolute().parent)
    if parent is not None and not parent.is_dir():
        raise FileExistsError(f"{option} {path}: {parent} is a file, not a folder; name a path in a folder")


def _check_can_create_in(folder, option, shown):
    """``folder`` (an existing folder) must accept a new file; ``shown`` is the user's path, for the message."""
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as error:
        raise PermissionError(
            f"{option} {shown}: cannot write in {folder} ({error.strerror or error}); choose a folder you can write to"
        ) from None


def refuse_existing(path, option, overwrite=False):
    """Stop before ``option`` (e.g. ``--output``) writes over an existing file (allowed with ``overwrite``) or
    a folder (never), or below a file."""
    path = Path(path)
    _check_parents(path, option)
    if path.is_dir():
        raise FileExistsError(f"{option} {path}: a folder is there, where this command writes a file; move it aside")
    if path.exists() and not overwrite:
        raise FileExistsError(
            f"{option} {path}: the file exists; choose another name, or pass --overwrite to replace it"
        )
    return path


def refuse_nonempty_folder(folder, option, overwrite=False, replaced=()):
    """Stop before ``option`` writes into a folder that holds files already (allowed with ``overwrite``: then only
    the files named in ``replaced`` are replaced) or onto a file."""
    folder = Path(folder)
    _check_parents(folder, option)
    if folder.exists() and not folder.is_dir():
        raise FileExistsError(f"{option} {folder}: a file is there, not a folder; name a new folder")
    if folder.is_dir() and any(folder.iterdir()) and not overwrite:
        raise FileExistsError(
            f"{option} {folder}: the folder is not empty; name a new or empty folder, or pass "
            f"--overwrite to replace {', '.join(replaced) or 'its files'}"
        )
    return folder


def check_writable(path, option):
    """Stop before the work starts when ``option``'s ``path`` (a file or folder to be written) could not be
    created: the first existing folder above it must accept a new file (a read-only or foreign folder fails
    here, not after a whole run)."""
    _check_parents(path, option)
    parent = _nearest_existing(Path(path).absolute().parent)
    if parent is not None:
        _check_can_create_in(parent, option, path)
    return Path(path)


def check_writable_folder(folder, option):
    """Stop before the work starts when ``option``'s ``folder`` (to be created if missing, then written in) could
    not take a new file: it, or the first existing folder above it, must be a folder that accepts one."""
    folder = Path(folder)
    nearest = _nearest_existing(folder.absolute())
    if nearest is not None:
        if not nearest.is_dir():
            raise FileExistsError(f"{option} {folder}: {nearest} is a file, not a folder; name a folder")
        _check_can_create_in(nearest, option, folder)
    return folder


def temporary_beside(path):
    """A name beside ``path`` that no other process (on this machine or one sharing the folder) will choose."""
    path = Path(path)
    return path.with_name(f".{path.name}.{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(4)}.tmp")


def claim(temporary, path, option, overwrite=False):
    """Move the finished ``temporary`` file to ``path`` in one step: with ``overwrite`` by an atomic rename, else
    by a hard link that fails when ``path`` exists, so two runs racing for one name never both say they wrote it
    (check-then-write would let the second silently replace the first). Where the filesystem has no hard links,
    an exclusive create claims the name first."""
    temporary, path = Path(temporary), Path(path)
    if overwrite:
        os.replace(temporary, path)
        return path
    try:
        try:
            os.link(temporary, path)
        except OSError as error:
            if error.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK):
                raise
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY))  # claimed; now fill it whole
            os.replace(temporary, path)
            return path
    except FileExistsError:
        raise FileExistsError(
            f"{option} {path}: the file exists (written by another run since this one started, or before); "
            "choose another name, or pass --overwrite to replace it"
        ) from None
    os.unlink(temporary)
    return path


def write_new_file(path, write, option="--output", overwrite=False):
    """Write ``path`` whole through ``write(temporary_path)``, then :func:`claim` it: a reader never sees half a
    file, a crash leaves none, and an existing file is replaced only with ``overwrite``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = temporary_beside(path)
    try:
        write(temporary)
        return claim(temporary, path, option, overwrite)
    finally:
        temporary.unlink(missing_ok=True)


def write_new_text(path, text, option="--output", overwrite=False):
    """:func:`write_new_file` of a UTF-8 text."""
    return write_new_file(path, lambda temporary: temporary.write_text(text, encoding="utf-8"), option, overwrite)


def _raised_here(error):
    """Whether ``error`` is a message for the user: raised by this package's own code, or a file error (naming its
    file) of a call this package made with a user's path; not one deep in a library (a bug, whose traceback is the
    useful report)."""
    frames = []
    traceback = error.__traceback__
    while traceback is not None:
        frames.append(Path(traceback.tb_frame.f_code.co_filename).resolve().is_relative_to(PACKAGE_DIR))
        traceback = traceback.tb_next
    if isinstance(error, OSError) and error.filename is not None:
        return any(frames)
    return bool(frames) and frames[-1]


@contextlib.contextmanager
def user_errors(errors=(ValueError, OSError, MemoryError)):
    """In a command's ``main``: an error this package raised on bad input ends the command with ``error: <message>``
    on stderr and exit status 2, without a traceback; any other error keeps its traceback."""
    try:
        yield
    except errors as error:
        if not _raised_here(error):
            raise
        print(f"error: {error}", file=sys.stderr)
        raise SystemExit(2) from None


@contextlib.contextmanager
def main_file_hidden_when_unreadable():
    """``multiprocessing``'s spawn re-runs the parent's ``__main__`` file in each child; a script read from standard
    input (``python - < x.py``: ``__file__`` is ``<stdin>``) has none, and the children fail. The workers this
    package spawns are importable functions, so the children need no ``__main__``: hide the name while they start."""
    main = sys.modules.get("__main__")
    name = getattr(main, "__file__", None)
    hide = name is not None and not os.path.isfile(name)
    if hide:
        del main.__file__
    try:
        yield
    finally:
        if hide:
            main.__file__ = name
