"""RecBole's own entry points for this project's models: the hooks :func:`recbole_mgformer.register` installs
(:data:`recbole_mgformer.integration.patches.PATCHES` lists them with RecBole's repairs and safety patches). Once
registered, with no RecBole file edited:

- ``recbole.utils.get_model("MGFormer")`` finds MGFormer, SimGCL, XSimGCL, DirectAU, the training-free filters
  (GFCF, BSPM, TurboCF, ChebyCF), EAGPS and CSA: RecBole's ``get_model`` asks
  ``importlib.util.find_spec("recbole.model.<type>.<name>")``, which answers from ``sys.modules``, so each
  project model module is aliased there under RecBole's name (before RecBole's search reaches
  ``exlib_recommender``, which would import lightgbm and xgboost): :func:`alias_model_modules`;
- RecBole's ``Config`` also loads the project's ``properties/model/<Name>.yaml`` defaults, so
  ``run_recbole(model="MGFormer")`` and ``HyperTuning`` train with the same defaults as ``run_recommender``:
  :func:`install_model_defaults`;
- ``recbole.utils.get_trainer`` finds the project's trainers (CSA's step decay): :func:`install_trainers`;
- ``recbole.quick_start.load_data_and_model`` reads weights-only checkpoints (this project's, and RecBole's
  own trainers' after :mod:`recbole_mgformer.integration.compat`): RecBole's version expects a pickled Config, which
  ``torch.load(weights_only=True)`` refuses. It is installed when ``recbole.quick_start`` is first imported
  (that module imports Ray, which training does not need): :func:`install_checkpoint_loader`.
"""

import importlib
import importlib.abc
import importlib.machinery
import sys
from logging import getLogger

from recbole_mgformer.integration.registry import model_class, model_modules
from recbole_mgformer.model.abstract_recommender import model_contract
from recbole_mgformer.safety.models import anomaly_mode_kept


def alias_model_modules():
    """Each project model module also under RecBole's name, ``recbole.model.<type>.<name>``."""
    for model_type, name, module, _ in model_modules("recbole_mgformer.model"):
        alias = f"recbole.model.{model_type}.{name}"
        builtin = sys.modules.get(alias, module)
        if builtin is not module:
            if not _refines(module, builtin, name):  # SGL refines RecBole's own: RecBole's entry points keep theirs
                getLogger().warning(f"recbole_mgformer: RecBole already has {alias}; its model keeps that name")
            continue
        with anomaly_mode_kept():  # RecBole's sequential package switches anomaly detection on
            recbole_package = importlib.import_module(f"recbole.model.{model_type}")
        sys.modules[alias] = module
        setattr(recbole_package, name, module)


def _refines(module, builtin, name):
    """Is the project's model in ``module`` a deliberate, faster version of RecBole's model of the same name (it
    subclasses it, as SGL does, or says so with ``REFINES_RECBOLE``, as LightGCN does, whose graph base class
    cannot run RecBole's constructor) rather than a collision by accident?"""
    project, recbole = model_class(module, name), model_class(builtin, name)
    if project is None or recbole is None:
        return False
    return issubclass(project, recbole) or model_contract(project).REFINES_RECBOLE


def install_trainers():
    """``recbole.utils.get_trainer`` looks up ``recbole.trainer.<Model>Trainer``: the project's models' own."""
    import recbole.trainer

    from recbole_mgformer.training.trainer import MODEL_TRAINERS

    for model, trainer in MODEL_TRAINERS.items():
        if not hasattr(recbole.trainer, f"{model}Trainer"):
            setattr(recbole.trainer, f"{model}Trainer", trainer)


def install_model_defaults():
    """RecBole's Config reads model defaults only from its own properties/model/; the project's models
    keep theirs in properties/model/<Name>.yaml, loaded here after RecBole's internal defaults (so the
    user's config files, dict and command line still win, as with ``run_recommender``)."""
    from recbole.config import Config

    from recbole_mgformer.config.defaults import model_config_file

    load_internal = Config._load_internal_config_dict

    def _load_internal_config_dict(self, model, model_class, dataset):
        load_internal(self, model, model_class, dataset)
        if getattr(model_class, "__module__", "").startswith("recbole_mgformer."):
            path = model_config_file(model_class.__name__)
            if path:
                self._update_internal_config_dict(path)

    Config._load_internal_config_dict = _load_internal_config_dict


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs ``callback(module)`` right after ``name`` executes, before anything imports names from it."""

    def __init__(self, name, callback):
        self.name, self.callback = name, callback

    def find_spec(self, fullname, path, target=None):
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return spec
        exec_module, callback = spec.loader.exec_module, self.callback

        def exec_then_patch(module):
            exec_module(module)
            callback(module)

        spec.loader.exec_module = exec_then_patch
        return spec


def _after_import(name, callback):
    if name in sys.modules:
        callback(sys.modules[name])
    else:
        sys.meta_path.insert(0, _AfterImport(name, callback))


def _install_loader(quick_start_module):
    from recbole_mgformer.integration.checkpoints import load_data_and_model

    quick_start_module.load_data_and_model = load_data_and_model
    package = sys.modules.get("recbole.quick_start")
    if package is not None and hasattr(package, "load_data_and_model"):
        package.load_data_and_model = load_data_and_model


def install_checkpoint_loader():
    """RecBole's ``load_data_and_model`` is :func:`recbole_mgformer.integration.checkpoints.load_data_and_model`,
    installed as ``recbole.quick_start`` is imported (now, if it is already)."""
    _after_import("recbole.quick_start.quick_start", _install_loader)
