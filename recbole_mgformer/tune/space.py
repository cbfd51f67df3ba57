"""Search spaces: a YAML mapping of config keys to one distribution each, checked before any trial starts,
and turned into Ray Tune's ``param_space``."""

import math
import numbers
from pathlib import Path
from types import SimpleNamespace

from recbole_mgformer.config.config_check import BOUNDS, check_sizes, known_keys
from recbole_mgformer.config.defaults import model_defaults, properties_dir
from recbole_mgformer.config.input_checks import (
    ConfigFileError,
    check_setting_types,
    did_you_mean,
    parse_settings_text,
    utf8_text,
)
from recbole_mgformer.integration.registry import get_model
from recbole_mgformer.safety import UnsafeSettingError, literal_setting

DISTRIBUTIONS = {
    "choice": "a non-empty list of values, e.g. {choice: [32, 64, 128]}",
    "grid": "a non-empty list of values, e.g. {grid: [1, 2, 3]}",
    "uniform": "[low, high] numbers with low < high, e.g. {uniform: [0.0, 0.5]}",
    "loguniform": "[low, high] numbers with 0 < low < high, e.g. {loguniform: [0.1, 5.0]}",
    "randint": "[low, high] integers with low < high (high excluded), e.g. {randint: [1, 5]}",
}
SEARCHES = ("random", "grid", "hyperopt")


class TuneSetupError(ValueError):
    """A search that cannot start: a bad space, search algorithm, resource request or experiment folder."""


def _shortened(value, limit=80):
    """``repr(value)``, cut to ``limit`` characters: a file that is not a space can be long."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def space_file(model, dataset=None):
    """The space shipped for ``model``: the dataset's own (``properties/hyper/<dataset>/<Model>.yaml``, where a
    dataset needs a region the common space does not reach), else ``properties/hyper/<Model>.yaml``."""
    hyper = properties_dir() / "hyper"
    own = hyper / str(dataset) / f"{model}.yaml" if dataset else None
    return own if own is not None and own.is_file() else hyper / f"{model}.yaml"


def load_space(space, model, dataset=None):
    """``space`` (a path, a mapping, or None for the file shipped for ``model`` on ``dataset``) -> (mapping, where
    it came from)."""
    if isinstance(space, dict):
        return space, "the space"
    path = Path(space) if space is not None else space_file(model, dataset)
    if path.is_dir():
        raise TuneSetupError(f"search space {path} is a folder; name a YAML file in it (--space my/space.yaml)")
    if not path.is_file():
        shipped = sorted(p.stem for p in (properties_dir() / "hyper").glob("*.yaml"))
        raise TuneSetupError(
            f"search space {path} does not exist; --space takes a YAML file's path (write one as "
            "`key: {choice: [...]}` per line); without --space, a model's shipped space is searched: "
            f"{', '.join(shipped)} (properties/hyper/<model>.yaml)"
        )
    try:
        raw = parse_settings_text(utf8_text(path, "search space"), path)  # 1e-4 a float, as in RecBole's files
    except ConfigFileError as error:
        raise TuneSetupError(f"search space {error}") from None
    return raw, str(path)


def _is_number(value):
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _bounds_ok(name, args):
    if not (isinstance(args, list) and len(args) == 2 and all(_is_number(a) for a in args)):
        return False
    if not all(math.isfinite(a) for a in args) or not args[0] < args[1]:  # .inf, .nan: no distribution
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
        raise TuneSetupError(
            f"{source} must be a non-empty mapping of config keys to distributions, "
            f"e.g. `embedding_size: {{choice: [32, 64]}}`; got {_shortened(raw)}"
        )
    parsed = {}
    for key, spec in raw.items():
        if not isinstance(spec, dict) or len(spec) != 1:
            raise TuneSetupError(
                f"{source}: {key} must be one distribution, e.g. `{key}: {{choice: [...]}}`, "
                f"got {spec!r}; distributions: {allowed} (fix a value with --{key}=... instead)"
            )
        ((name, args),) = spec.items()
        if name not in DISTRIBUTIONS:
            raise TuneSetupError(f"{source}: {key} uses unknown distribution {name!r}; choose one of {allowed}")
        ok = (isinstance(args, list) and len(args) > 0) if name in ("choice", "grid") else _bounds_ok(name, args)
        if not ok:
            raise TuneSetupError(
                f"{source}: {key}: {name} takes {DISTRIBUTIONS[name]}; got {args!r}"
                + ("; the bounds must be finite numbers" if _non_finite(args) else "")
            )
        if name in ("choice", "grid"):
            _check_values(key, args, source)
        parsed[str(key)] = (name, list(args))
    return parsed


def _non_finite(args):
    return isinstance(args, list) and any(_is_number(a) and not math.isfinite(a) for a in args)


# Mappings Ray's variant generator resolves again after drawing them: ``{eval: "..."}`` is run as Python,
# ``{grid_search: [...]}`` expands into trials. A listed value is a setting, never one of these.
RAY_FORMS = ("eval", "grid_search")


def _ray_form(value):
    """The Ray form (``eval``/``grid_search``) a listed value or any value nested in it takes, or None."""
    if isinstance(value, dict):
        if len(value) == 1 and next(iter(value)) in RAY_FORMS:
            return next(iter(value))
        return next((form for item in value.values() if (form := _ray_form(item))), None)
    if isinstance(value, (list, tuple)):
        return next((form for item in value if (form := _ray_form(item))), None)
    return None


def _check_values(key, values, source):
    """A listed value becomes a trial's setting: a string is read as RecBole reads settings, and refused where it
    is code (:func:`recbole_mgformer.safety.literal_setting`); a number must be finite; a mapping Ray would
    resolve again (:data:`RAY_FORMS`: ``{eval: ...}`` runs Python) is refused."""
    for value in values:
        form = _ray_form(value)
        if form is not None:
            raise TuneSetupError(
                f"{source}: {key}: a listed value holds a mapping with the single key {form!r}, which Ray Tune "
                f"would {'run as Python' if form == 'eval' else 'expand into more trials'}; list plain values"
            )
        if isinstance(value, str):
            try:
                literal_setting(key, value)
            except UnsafeSettingError as error:
                raise TuneSetupError(f"{source}: {error}") from None
        elif _is_number(value) and not math.isfinite(value):
            raise TuneSetupError(f"{source}: {key}: {value!r} is not a finite number; list finite values")


# what a search runs on and where it writes, not hyperparameters: a trial would train --model on --dataset whatever it
# drew, and the search's table would rank the draws as if they differed
NOT_SEARCHED = {
    "model": "is the search's --model, not a hyperparameter (search each model with a command of its own)",
    "dataset": "is the search's --dataset, not a hyperparameter",
    "data_path": "is where the data lives (--data_path), not a hyperparameter",
    "checkpoint_dir": "is where the trials write, not a hyperparameter",
}


def check_keys(parsed, config, model, source="the space"):
    """Every searched key must be a key the run reads (or one of ``extra_config_keys``), and every value the space can
    draw one the run takes (:func:`check_draws`): a typo or a value out of bounds fails before any trial starts, not
    in each trial that draws it."""
    known = known_keys(config, get_model(model))  # as build_config checks the fixed settings
    for key in parsed:
        if key in NOT_SEARCHED:
            raise TuneSetupError(f"{source}: {key} {NOT_SEARCHED[key]}; remove it from the space")
        if key not in known:
            hint = did_you_mean(key, known, cutoff=0.6) or (
                f"see properties/model/{model}.yaml and RecBole's defaults for the keys {model} has"
            )
            raise TuneSetupError(f"{source}: {model} has no config key {key!r}; {hint}")
    # the defaults build_config types a run's settings by: RecBole's own (its model YAML's) < the project's YAML
    check_draws(parsed, {**config.internal_config_dict, **model_defaults(model)}, source)


FLOAT_RANGES = ("uniform", "loguniform")


def drawn_extremes(name, args):
    """The values that stand for all a distribution ``(name, args)`` draws, as a trial receives them: each listed
    value; a range's two ends (every bound a run checks is a floor or a ceiling) of the type the range draws
    (uniform and loguniform draw floats, never rounded: an int setting gets 16.0; randint draws integers, its high
    excluded), and a float range's middle (a flag takes 0 and 1, never what lies between)."""
    if name in ("choice", "grid"):
        return list(args)
    low, high = args
    if name == "randint":
        return [low, high - 1]
    return [float(low), float(high), (low + high) / 2]


def run_problem(key, value, model_settings):
    """Why a trial's run would refuse ``key: value`` (its searched values are its ``config_dict``), by the checks a
    single run makes on its built config: :func:`check_setting_types` (against RecBole's general defaults and
    ``model_settings``, the model's) and :func:`check_sizes` (:data:`BOUNDS`); None when the run takes it."""
    settings = SimpleNamespace(
        final_config_dict={key: value}, external_config_dict={key: value}, internal_config_dict={}
    )
    try:
        check_setting_types(settings, model_settings)
    except ValueError as error:  # "setting <key> <problem>; fix it in your config file ...": the space is fixed here
        return str(error).partition("; fix it in your config file")[0]
    try:
        check_sizes(settings)
    except ValueError:
        _, _, _, allowed, example = BOUNDS[key]
        return f"setting {key} must be {allowed} (e.g. {example})"
    return None


def check_draws(parsed, model_settings, source="the space"):
    """Every value the space can draw (:func:`drawn_extremes`) must be one a single run takes (:func:`run_problem`):
    else each trial that draws it fails alone, after Ray has started, and the search spends its budget on them."""
    for key, (name, args) in parsed.items():
        for value in drawn_extremes(name, args):
            read = literal_setting(key, value) if isinstance(value, str) else value  # as a trial's config reads it
            problem = run_problem(key, read, model_settings)
            if problem and name in ("choice", "grid"):
                raise TuneSetupError(
                    f"{source}: {key}: the listed value {value!r}: {problem}; "
                    f"remove it from {key}'s {name} list or replace it with a value the setting takes"
                )
            if problem:
                raise TuneSetupError(
                    f"{source}: {key}: {{{name}: {args}}} draws {value!r}: {problem}; "
                    + _range_fix(key, name, args, value, model_settings)
                )


def _range_fix(key, name, args, value, model_settings):
    """How to fix a range that draws a value the run refuses: a float range over whole numbers searches them with
    randint (the whole number passes where its float did not), any other keeps within what the setting takes."""
    if name in FLOAT_RANGES and value == int(value) and run_problem(key, int(value), model_settings) is None:
        low, high = math.ceil(args[0]), math.floor(args[1])
        randint = f"{{randint: [{low}, {high + 1}]}} (high excluded) or " if low <= high else ""
        return (
            f"{name} draws fractional numbers, never rounded, and {key} takes whole numbers: search them with "
            f"{randint}{{choice: [...]}}"
        )
    return f"draw only values setting {key} takes: keep the whole range within them, or list them with choice"


def ray_space(parsed, search):
    """``{key: (distribution, arguments)}`` -> Ray Tune's param_space for ``search``."""
    from ray import tune

    if search not in SEARCHES:
        raise TuneSetupError(f"unknown search {search!r}; choose one of {', '.join(SEARCHES)}")
    space = {}
    for key, (name, args) in parsed.items():
        if search == "grid" and name not in ("choice", "grid"):
            raise TuneSetupError(
                f"--search grid needs finite values, but {key} is {name}; "
                f"write it as {{grid: [...]}} or use --search random"
            )
        if search == "hyperopt" and name == "grid":
            raise TuneSetupError(f"--search hyperopt cannot enumerate {key}: {{grid: ...}}; write {{choice: ...}}")
        if name == "grid" or search == "grid":
            space[key] = tune.grid_search(args)
        elif name == "choice":
            space[key] = tune.choice(args)
        else:
            space[key] = getattr(tune, name)(*args)
    return space


def in_space(value, name, args):
    """Whether ``value`` is one a distribution ``(name, args)`` can draw."""
    if name in ("choice", "grid"):
        return any(value == listed and type(value) is type(listed) or _same_number(value, listed) for listed in args)
    if not _is_number(value):
        return False
    if name == "randint":
        return isinstance(value, numbers.Integral) and args[0] <= value < args[1]
    return args[0] <= value <= args[1]


def _same_number(a, b):
    return _is_number(a) and _is_number(b) and a == b


def default_point(parsed, config, model, search, source="the space"):
    """The first trial of a search that starts from the model's defaults: ``config``'s value of every searched key
    (``config`` built as a plain run builds it: RecBole's defaults < the model's YAML < the dataset's < the config
    files < the fixed settings), and the keys whose default lies outside the space. A TuneSetupError names a key
    with no default, or a default the search algorithm cannot take."""
    if search == "grid":
        raise TuneSetupError(
            "--defaults-first needs --search random or hyperopt: a grid search already runs every "
            "combination, and Ray's grid search would run the defaults in place of the whole grid"
        )
    point, outside = {}, []
    for key, (name, args) in parsed.items():
        if key not in config.final_config_dict:
            raise TuneSetupError(
                f"{source}: {model} has no default for {key!r} (neither RecBole's defaults nor "
                f"properties/model/{model}.yaml set it), so its defaults cannot be the first trial; "
                f"set {key} in a --config_files file, or drop --defaults-first"
            )
        value = config[key]
        if search == "hyperopt" and isinstance(value, (list, dict)):
            raise TuneSetupError(
                f"{source}: {model}'s default {key}={value!r} is a list, which Ray's hyperopt search "
                "cannot take as a first point (it looks a category up by literal value); use "
                "--search random, or drop --defaults-first"
            )
        if not in_space(value, name, args):
            if search == "hyperopt":
                raise TuneSetupError(
                    f"{source}: {model}'s default {key}={value!r} lies outside {key}: "
                    f"{{{name}: {args}}}, and --search hyperopt cannot start from a point outside "
                    f"its space; add {value!r} to the space, use --search random, or drop "
                    "--defaults-first"
                )
            outside.append(key)
        point[key] = value
    return point, outside
