"""Checks of what a user points the commands at, before RecBole or the filesystem meets it: config files (each a
YAML mapping, read as RecBole reads it), dataset names (a folder under ``data_path``, never a path out of it) and
output paths (never silently replacing a file or a non-empty folder). Each failure names the file, line or option
and the fix."""

import contextlib
import numbers
import os
import sys
from pathlib import Path

import yaml

PACKAGE_DIR = Path(__file__).resolve().parent


class ConfigFileError(ValueError):
    """A config file that is missing, not UTF-8, not YAML, or not a mapping of settings."""


def _yaml_loader():
    from recbole.config import Config

    return Config._build_yaml_loader(None)  # RecBole's: numbers like 1e-3 are floats


def _where(path, mark):
    return f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(path)


def _duplicate_key(path, node):
    """The first key a top-level mapping repeats (YAML keeps the last silently), as an error naming both lines."""
    if not isinstance(node, yaml.MappingNode):
        return None
    seen = {}
    for key, _ in node.value:
        if isinstance(key, yaml.ScalarNode):
            if key.value in seen:
                return ConfigFileError(
                    f"{_where(path, key.start_mark)}: key {key.value!r} is set twice (also on line "
                    f"{seen[key.value] + 1}); YAML would keep the last silently: keep one"
                )
            seen[key.value] = key.start_mark.line
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
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = raw[: error.start].count(b"\n") + 1
        raise ConfigFileError(
            f"{path}:{line}: byte {raw[error.start : error.start + 1]!r} is not UTF-8; save the config file as UTF-8"
        ) from None
    loader = _yaml_loader()
    try:
        node = yaml.compose(text, Loader=loader)
        settings = yaml.load(text, Loader=loader)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        problem = getattr(error, "problem", None) or str(error)
        hint = (
            "indent with spaces: YAML does not allow tabs"
            if "\\t" in problem or "\t" in problem
            else "fix the YAML syntax (lines of 'key: value')"
        )
        raise ConfigFileError(f"{_where(path, mark)}: not valid YAML ({problem}); {hint}") from None
    if settings is None:
        return {}
    if not isinstance(settings, dict):
        raise ConfigFileError(
            f"{path}: a config file must be a mapping of settings (lines of 'key: value', e.g. "
            f"'epochs: 10'), not a YAML {type(settings).__name__}"
        )
    duplicate = _duplicate_key(path, node)
    if duplicate is not None:
        raise duplicate
    return settings


def _is_number(value):
    return isinstance(value, numbers.Real) and not isinstance(value, bool)  # numpy's scalars too (a tuning draw)


SHAPES = {"eval_args": {"split": {"RS": [0.8, 0.1, 0.1]}, "order": "RO", "group_by": "user", "mode": "full"}}


def setting_type_error(key, value, default):
    """Why ``value`` cannot be ``key``'s setting, given its default; None when it can. Only shapes RecBole cannot
    use at all: text or a list where a number goes, a non-mapping where a mapping goes, top-k that are not
    whole numbers, metrics RecBole does not know."""
    if value is None:
        return None
    if key == "topk":
        values = value if isinstance(value, list) else [value]
        if not values or not all(isinstance(k, numbers.Integral) and not isinstance(k, bool) and k > 0 for k in values):
            return f"takes whole numbers above 0 (e.g. [10, 20]), not {value!r}"
        return None
    if key == "metrics":
        from recbole.evaluator.register import metrics_dict

        unknown = [m for m in (value if isinstance(value, list) else [value]) if str(m).lower() not in metrics_dict]
        if unknown:
            return f"names {', '.join(map(repr, unknown))}, not among RecBole's metrics ({', '.join(metrics_dict)})"
        return None
    default = SHAPES.get(key, default)
    if _is_number(default) and not _is_number(value):
        return f"takes a number (default {default}), not {value!r}"
    if isinstance(default, dict) and not isinstance(value, dict):
        return f"takes a mapping like {default}, not {value!r}"
    return None


def _raise_type_error(key, problem):
    raise ValueError(f"setting {key} {problem}; fix it in your config file or on the command line (--{key}=...)")


def check_user_settings(config_file_list=None, config_dict=None):
    """The settings whose wrong shape RecBole's Config itself fails on (topk, metrics, eval_args), checked before
    it is built."""
    settings = {}
    for path in config_file_list or ():
        settings.update(read_config_file(path))
    settings.update(config_dict or {})
    for key, value in settings.items():
        problem = setting_type_error(key, value, None)
        if problem:
            _raise_type_error(key, problem)


def recbole_defaults():
    """RecBole's general settings (``recbole/properties/overall.yaml``), whose types are fixed for every model (a
    model's own options may take a number or a word, e.g. ``residual_scale: learned``)."""
    import recbole

    return read_config_file(Path(recbole.__file__).parent / "properties" / "overall.yaml")


def check_setting_types(config, model_defaults=None):
    """Every setting of a type RecBole would fail on deep in a run (``--learning_rate=abc``: a TypeError at the
    first step) is an error naming it, before any data is read. A model's own option whose default is a number
    may take a word (``residual_scale: learned``), never a list or a mapping (``embedding_size: [8]``)."""
    defaults = recbole_defaults()
    model_defaults = {**config.internal_config_dict, **(model_defaults or {})}
    for key, value in config.final_config_dict.items():
        problem = setting_type_error(key, value, defaults.get(key))
        if not problem and key not in defaults and isinstance(value, (list, dict)):
            problem = setting_type_error(key, value, model_defaults.get(key))
        if problem:
            _raise_type_error(key, problem)


def check_dataset_name(dataset):
    """A dataset is a folder name under ``data_path``; a name with a path in it would read (and log to) files
    outside it."""
    name = str(dataset)
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
    return name


def _check_parents(path, option):
    """The first existing folder above ``path`` must be a folder, not a file."""
    for parent in Path(path).absolute().parents:
        if parent.exists():
            if not parent.is_dir():
                raise FileExistsError(f"{option} {path}: {parent} is a file, not a folder; name a path in a folder")
            return


def refuse_existing(path, option, overwrite=False):
    """Stop before ``option`` (e.g. ``--output``) writes over an existing file (allowed with ``overwrite``) or
    a folder (never), or below a file."""
    path = Path(path)
    _check_parents(path, option)
    if path.is_dir():
        raise FileExistsError(f"{option} {path}: a folder is there; name a file inside it, e.g. {path / 'top.csv'}")
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
def user_errors(errors=(ValueError, OSError)):
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
