"""The one place that resolves a model name to its class and trainer: this project's models first, then RecBole's
built-ins. A pure lookup: importing or calling it patches nothing in RecBole (:func:`recbole_mgformer.register`
does, and every entry point calls it)."""

import importlib
import importlib.util
import pkgutil

from recbole.utils import ModelType
from recbole.utils import get_trainer as recbole_get_trainer

from recbole_mgformer.config.input_checks import did_you_mean
from recbole_mgformer.model.abstract_recommender import model_contract
from recbole_mgformer.safety.models import anomaly_mode_kept
from recbole_mgformer.training import trainer as trainers

# RecBole's model packages, searched in this order under RecBole's prefix and this project's (which has the first three)
MODEL_TYPES = (
    "general_recommender",
    "context_aware_recommender",
    "sequential_recommender",
    "knowledge_aware_recommender",
    "exlib_recommender",
)


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
            with anomaly_mode_kept():
                package = importlib.import_module(f"{package_prefix}.{model_type}")
        except ImportError:  # a type this package lacks (the project's), or whose libraries are absent
            continue
        for name in sorted({info.name for info in pkgutil.iter_modules(package.__path__)}):
            with anomaly_mode_kept():
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
            with anomaly_mode_kept():  # find_spec imports the parent package
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
    available = available_models()
    hint = did_you_mean(name, available)
    hint += " " if hint else ""
    raise ValueError(f"unknown model {name!r}; {hint}available models: {', '.join(available)}")


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
    flag = model_contract(cls).deterministic
    if flag is not None:
        return bool(flag)
    return fits_once(cls) and cls.__name__ not in SEEDED_TRADITIONAL


def get_trainer(model_type, model_name):
    """The trainer class for a model: the project's own for its model (CSA's), else this project's version of the
    trainer RecBole chooses (:data:`recbole_mgformer.training.trainer.TRAINERS`), with checkpoints that load under
    ``torch.load(weights_only=True)``."""
    own = trainers.MODEL_TRAINERS.get(model_name)
    return own if own is not None else trainers.project_trainer(recbole_get_trainer(model_type, model_name))


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
