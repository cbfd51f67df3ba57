"""The one place that resolves a model name to its class and trainer:
this project's models first, then RecBole's built-ins.

Importing it registers the models with RecBole (:func:`recbole_mgformer.integration.plugin.register`, at the end of this
module, which registration imports back): every path that trains, tunes or loads a model resolves names here, so
RecBole is repaired and made safe before it runs, while ``import recbole_mgformer`` alone stays free of torch."""

import contextlib
import importlib
import pkgutil

import torch
from recbole.utils import ModelType
from recbole.utils import get_trainer as recbole_get_trainer

import recbole_mgformer.training.trainer as project_trainers

# RecBole's model packages, searched in this order under RecBole's prefix and this project's (which has the first three)
MODEL_TYPES = (
    "general_recommender",
    "context_aware_recommender",
    "sequential_recommender",
    "knowledge_aware_recommender",
    "exlib_recommender",
)


@contextlib.contextmanager
def _anomaly_mode_kept():
    """Undo one side effect of importing RecBole's models: ``sine.py``, imported with any of RecBole's
    sequential models, switches autograd anomaly detection on for the whole process: every forward op then
    records its stack and every backward op checks its gradient for NaN, which slowed SASRec's training
    step on ml-100k about 1.7 times here."""
    anomaly, check_nan = torch.is_anomaly_enabled(), torch.is_anomaly_check_nan_enabled()
    try:
        yield
    finally:
        torch.set_anomaly_enabled(anomaly, check_nan)


def model_class(module, name):
    """The class in ``module`` named ``name`` in any case (a model module holds its model under the module's name:
    ``lightgcn`` -> ``LightGCN``), else None."""
    return next(
        (
            value
            for attribute, value in vars(module).items()
            if attribute.lower() == name.lower() and isinstance(value, type)
        ),
        None,
    )


def model_modules(package_prefix):
    """``[(model type, module name, module, class)]`` for every model module under ``<package_prefix>.<type>``."""
    found = []
    for model_type in MODEL_TYPES:
        try:
            with _anomaly_mode_kept():
                package = importlib.import_module(f"{package_prefix}.{model_type}")
        except ImportError:  # a type this package lacks (the project's), or whose libraries are absent
            continue
        for name in sorted({info.name for info in pkgutil.iter_modules(package.__path__)}):
            with _anomaly_mode_kept():
                module = importlib.import_module(f"{package.__name__}.{name}")
            cls = model_class(module, name)
            if cls is not None:
                found.append((model_type, name, module, cls))
    return found


def _models_in(package_prefix):
    """``{lower name: class}`` for every model module under ``<package_prefix>.<type>``."""
    models = {}
    for _, name, _, cls in model_modules(package_prefix):
        models.setdefault(name, cls)
    return models


def project_models():
    return _models_in("recbole_mgformer.model")


def available_models():
    """Sorted names of every model the runner can train."""
    names = {cls.__name__ for cls in project_models().values()}
    names |= {cls.__name__ for cls in _models_in("recbole.model").values()}
    return sorted(names, key=str.lower)


def _find_module(package_prefix, name):
    for model_type in MODEL_TYPES:
        path = f"{package_prefix}.{model_type}.{name.lower()}"
        try:
            with _anomaly_mode_kept():  # find_spec imports the parent package
                if importlib.util.find_spec(path) is not None:
                    return importlib.import_module(path)
        except ModuleNotFoundError:
            continue
    return None


def get_model(name):
    """The model class for ``name`` (case-insensitive), or a ValueError listing the available ones."""
    if isinstance(name, type):
        return name  # a model class already
    if not isinstance(name, str):
        raise ValueError(f"model {name!r} is not a model name; give one such as 'MGFormer', or a model class")
    for prefix in ("recbole_mgformer.model", "recbole.model"):
        module = _find_module(prefix, name)
        cls = None if module is None else model_class(module, name)
        if cls is not None:
            return cls
    raise ValueError(f"unknown model {name!r}; available models: {', '.join(available_models())}")


# RecBole's traditional models that draw random numbers (Random scores at random; ADMMSLIM adds noise to its scores)
SEEDED_TRADITIONAL = frozenset({"Random", "ADMMSLIM"})


def fits_once(model):
    """Is ``model`` (a class or a name) fit once, RecBole's traditional path (EASE, ItemKNN and SLIMElastic in their
    constructors; Pop counts in its one epoch)? Its trainer runs one epoch whatever ``epochs`` says, and a search's
    trial is one fit."""
    return getattr(get_model(model), "type", None) == ModelType.TRADITIONAL


def is_deterministic(model):
    """Does ``model`` (a class or a name) give the same model whatever the seed, so that one seed is the whole
    row of a board? A class says so itself with a ``deterministic`` attribute; else every traditional model
    (:func:`fits_once`) but those that draw random numbers (``SEEDED_TRADITIONAL``)."""
    cls = get_model(model)
    flag = getattr(cls, "deterministic", None)
    if flag is not None:
        return bool(flag)
    return fits_once(cls) and cls.__name__ not in SEEDED_TRADITIONAL


def get_trainer(model_type, model_name):
    """The trainer class for a model (a project trainer first, then RecBole's choice),
    with checkpoints that load under ``torch.load(weights_only=True)``."""
    try:
        base = getattr(project_trainers, model_name + "Trainer")
    except AttributeError:
        base = recbole_get_trainer(model_type, model_name)
    return project_trainers.safe_trainer_class(base)


def _register():
    from recbole_mgformer.integration.plugin import register

    register()


_register()

__all__ = [
    "available_models",
    "fits_once",
    "get_model",
    "get_trainer",
    "is_deterministic",
    "model_class",
    "model_modules",
    "project_models",
]
