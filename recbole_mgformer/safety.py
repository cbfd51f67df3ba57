"""Nothing a user loads runs code: settings are read as literals, YAML with a safe loader, datasets from atomic files.

RecBole 1.2.1 runs code from three kinds of files a user may receive:

- settings: ``Config._convert_config_dict`` (recbole/config/configurator.py:131) ``eval``s every string of a
  ``config_dict`` and of the command line, so ``--learning_rate="__import__('os').system('...') or 0.01"``, a
  tuning space's value or a config file's string passed on as a setting ran; :func:`literal_setting` reads them
  as literals instead, and refuses what only Python would compute;
- YAML: its loader is ``yaml.FullLoader`` (configurator.py:107, which builds Python objects from tags), and it
  adds its float resolver to that class for the whole process; :class:`SafeLoader` is PyYAML's safe loader with
  RecBole's float resolver (``1e-3`` a float), for RecBole's Config and this project alike;
- pickles: ``create_dataset`` (recbole/data/utils.py:60) unpickles ``dataset_save_path``, or any file at its
  default ``<checkpoint_dir>/<dataset>-<DatasetClass>.pth``, and ``data_preparation`` unpickles
  ``dataloaders_save_path`` (or ``<checkpoint_dir>/<dataset>-for-<model>-dataloader.pth``). Here datasets and
  splits are always built from the atomic files; the settings that name or write those pickles are refused
  (:func:`refuse_pickle_settings`), and a pickle lying at a default path is never opened.

Also closed, where RecBole's own code reaches them: ``HyperTuning``'s parameter files (hyper_tuning.py:239
``eval`` of a ``choice`` line), KD_DAGFM's ``teacher`` (kd_dagfm.py:44 ``eval`` of the setting), LDiffRec's
``item_emb.npy`` (ldiffrec.py:232, ``numpy.load(allow_pickle=True)``) and the pretrained files six models
``torch.load`` without ``weights_only`` (:data:`PRETRAINED_MODELS`).

:func:`install` applies all of it, once per process, on every stack; :func:`recbole_mgformer.plugin.register`
calls it (``import recbole_mgformer`` does).
"""

import ast
import contextlib
import functools
import importlib
import re
import sys
import unittest.mock
from logging import getLogger

import numpy
import yaml

# RecBole's settings that name or write pickled datasets and dataloaders.
PICKLE_PATH_SETTINGS = ("dataset_save_path", "dataloaders_save_path")
PICKLE_WRITE_SETTINGS = ("save_dataset", "save_dataloaders")
PICKLE_SETTINGS = PICKLE_PATH_SETTINGS + PICKLE_WRITE_SETTINGS
KD_DAGFM_TEACHERS = ("CrossNet", "CIN")  # the teacher networks kd_dagfm.py defines
_installed = []


class UnsafeSettingError(ValueError):
    """A setting that only running code (Python, or an unpickled file) could honour."""


# ------------------------------------------------------------------------------------------------ YAML


class SafeLoader(yaml.SafeLoader):
    """PyYAML's safe loader (no Python objects from tags) with RecBole's float resolver: ``1e-3`` is a float,
    as in RecBole's config files, where YAML 1.1 alone would read a string."""


SafeLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(
        r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
        |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
        |\.[0-9_]+(?:[eE][-+][0-9]+)?
        |[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*
        |[-+]?\.(?:inf|Inf|INF)
        |\.(?:nan|NaN|NAN))$""",
        re.X,
    ),
    list("-+0123456789."),
)


def load_yaml(text):
    """A YAML document (text or a file object) as RecBole reads its config files, but with the safe loader."""
    return yaml.load(text, Loader=SafeLoader)


# ------------------------------------------------------------------------------------------------ literal settings

_CODE_NODES = (
    ast.Call,
    ast.Lambda,
    ast.NamedExpr,
    ast.ListComp,
    ast.SetComp,
    ast.DictComp,
    ast.GeneratorExp,
    ast.Await,
    ast.Yield,
    ast.YieldFrom,
    ast.FormattedValue,
    ast.Starred,
)
_VALUE_TYPES = (str, int, float, list, tuple, dict, bool)  # what RecBole kept of an eval (no sets, bytes, complex)


def _refusal(key, text, why):
    return UnsafeSettingError(
        f"setting {key}: {text!r} {why}; settings are read as values (a number, true/false, None, a word or path, "
        f"a list or dict of them), never run as Python. Write the value itself, e.g. --{key}=0.01, "
        f"--{key}=[64,64] or `{key}: relu` in a config file"
    )


def literal_setting(key, text):
    """RecBole's reading of a string setting (``eval``, then the string itself where that fails), without ``eval``.

    A Python literal becomes its value (``"0.01"``, ``"[64, 64]"``, ``"{'RS': [0.8, 0.1, 0.1]}"``, ``"None"``,
    ``"8,2"`` a tuple), ``true``/``false`` in any case a bool, and words, paths and metric names (``none``,
    ``amazon-beauty``, ``saved/model.pth``, ``NDCG@20``) stay strings, as under RecBole. What only running
    Python gives (a call, a lambda, a comprehension, arithmetic such as ``1/3``) raises UnsafeSettingError."""
    try:
        value = ast.literal_eval(text)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        pass
    else:
        return value if value is None or isinstance(value, _VALUE_TYPES) else text
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        tree = None  # not Python: a word or path as it is
    if tree is not None:
        nodes = list(ast.walk(tree))
        if any(isinstance(node, _CODE_NODES) for node in nodes):
            raise _refusal(key, text, "is code (it calls a function or builds a value by running Python)")
        if not any(isinstance(node, ast.Name) for node in nodes):  # '1/3', '2**10', "'a' * 3": arithmetic
            raise _refusal(key, text, "is an expression RecBole would have computed; write its value instead")
    lowered = text.lower()
    return True if lowered == "true" else False if lowered == "false" else text


def literal_settings(settings):
    """``settings`` with every string value read by :func:`literal_setting` (RecBole's ``_convert_config_dict``)."""
    for key, value in settings.items():
        if isinstance(value, str):
            settings[key] = literal_setting(key, value)
    return settings


def check_literal_strings(settings, source):
    """Refuse strings that are code in settings read as they are (a config file's values): they are not run here,
    but would be the moment they pass through a ``config_dict`` (a search's best configuration, a retrain)."""
    for key, value in (settings or {}).items():
        if isinstance(value, str):
            try:
                literal_setting(key, value)
            except UnsafeSettingError as error:
                raise UnsafeSettingError(f"{source}: {error}") from None


# ------------------------------------------------------------------------------------------------ pickles


def pickle_settings(settings):
    """The settings of ``settings`` (a dict or Config) that would name or write a pickle: ``{key: value}``."""

    def get(key):
        try:
            return settings[key]
        except KeyError:
            return None

    found = {key: get(key) for key in PICKLE_PATH_SETTINGS if get(key) not in (None, "")}
    found.update({key: get(key) for key in PICKLE_WRITE_SETTINGS if get(key) not in (None, False)})
    return found


def refuse_pickle_settings(config):
    """UnsafeSettingError naming each setting of ``config`` that would load or write a pickled dataset or
    dataloaders: a pickle runs code when it loads, so this project builds every dataset from the atomic files."""
    found = pickle_settings(config)
    if found:
        listed = ", ".join(f"{key}={value!r}" for key, value in found.items())
        raise UnsafeSettingError(
            f"{listed}: RecBole saves and loads datasets and dataloaders as pickles, and loading a pickle runs "
            "whatever code it holds; recbole_mgformer always builds them from the atomic files (.inter, .user, "
            f".item). Remove {', '.join(found)} from your settings and config files"
        )


def drop_pickle_settings(settings, source):
    """``settings`` (a recorded config) without the settings that name or write pickles; a warning names any that
    held a value. The user's own settings are not dropped but refused (:func:`refuse_pickle_settings`)."""
    found = pickle_settings(settings)
    if found:
        getLogger().warning(
            f"{source}: ignored the recorded {', '.join(f'{k}={v!r}' for k, v in found.items())}: "
            "recbole_mgformer never loads pickled datasets or dataloaders; the dataset is rebuilt "
            "from the atomic files"
        )
    return {key: value for key, value in settings.items() if key not in PICKLE_SETTINGS}


def dataset_class(config):
    """RecBole's choice of Dataset class for ``config`` (recbole/data/utils.py ``create_dataset``)."""
    from recbole.utils import ModelType

    module = importlib.import_module("recbole.data.dataset")
    own = getattr(module, config["model"] + "Dataset", None)
    if own is not None:
        return own
    by_type = {ModelType.SEQUENTIAL: "SequentialDataset", ModelType.KNOWLEDGE: "KnowledgeBasedDataset"}
    return getattr(module, by_type.get(config["MODEL_TYPE"], "Dataset"))


def create_dataset(config):
    """RecBole's ``create_dataset`` that always builds the dataset from the atomic files: no ``dataset_save_path``,
    no default ``<checkpoint_dir>/<dataset>-<DatasetClass>.pth`` is ever opened, and nothing is pickled."""
    refuse_pickle_settings(config)
    return dataset_class(config)(config)


def load_split_dataloaders(config):
    """RecBole's reader of pickled split dataloaders, which ``data_preparation`` asks first: never any here."""
    refuse_pickle_settings(config)
    return None


def save_split_dataloaders(config, dataloaders):
    refuse_pickle_settings(config)  # reached only with save_dataloaders set, which this refuses


def _refuse_dataset_save(self):
    refuse_pickle_settings(self.config)
    raise UnsafeSettingError(
        "Dataset.save pickles the dataset, and loading a pickle runs code; "
        "recbole_mgformer builds datasets from the atomic files"
    )


def _replace_everywhere(originals, replacements):
    """Every module attribute that holds one of ``originals`` (RecBole's function, imported by name into
    recbole.data, recbole.quick_start and others) now holds its replacement, and so will later imports."""
    for module in list(sys.modules.values()):
        try:
            namespace = vars(module)
        except TypeError:  # not a module (a placeholder some packages put in sys.modules)
            continue
        for name, value in list(namespace.items()):
            for original, replacement in zip(originals, replacements):
                if value is original:
                    namespace[name] = replacement


# ------------------------------------------------------------------------------------------------ RecBole's Config


def _install_config():
    from recbole.config import Config

    load_files = Config._load_config_files

    def _build_yaml_loader(self=None):
        return SafeLoader

    def _convert_config_dict(self, config_dict):
        return literal_settings(config_dict)

    def _load_config_files(self, file_list):
        settings = {}
        for path in file_list or []:
            loaded = load_files(self, [path])
            check_literal_strings(loaded, f"config file {path}")
            settings.update(loaded)
        return settings

    Config._build_yaml_loader = _build_yaml_loader
    Config._convert_config_dict = _convert_config_dict
    Config._load_config_files = _load_config_files


def _install_data():
    import recbole.data.utils as data_utils
    from recbole.data.dataset import Dataset

    names = ("create_dataset", "load_split_dataloaders", "save_split_dataloaders")
    originals = [getattr(data_utils, name) for name in names]
    replacements = [create_dataset, load_split_dataloaders, save_split_dataloaders]
    _replace_everywhere(originals, replacements)  # data_preparation reads the two loaders from data_utils
    Dataset.save = _refuse_dataset_save


def _literal_choice(text):
    try:
        return ast.literal_eval(text)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        raise UnsafeSettingError(
            f"HyperTuning parameter file: choice {text!r} is not a list of values, e.g. "
            "[0.01,0.001]; the file's values are read, never run as Python"
        ) from None


def _install_hyper_tuning():
    """``HyperTuning._build_space_from_file`` evals each ``choice`` line's values: a literal reading instead."""
    from recbole.trainer import hyper_tuning

    build = hyper_tuning.HyperTuning._build_space_from_file

    def _build_space_from_file(file):
        with _patched_builtin_eval(_literal_choice, hyper_tuning):
            return build(file)

    hyper_tuning.HyperTuning._build_space_from_file = staticmethod(_build_space_from_file)


@contextlib.contextmanager
def _patched_builtin_eval(function, module):
    """``eval`` inside ``module``'s functions is ``function`` (a module global shadows the builtin)."""
    missing = object()
    saved = module.__dict__.get("eval", missing)
    module.eval = function
    try:
        yield
    finally:
        if saved is missing:
            del module.eval
        else:
            module.eval = saved


def _install_models():
    """KD_DAGFM evals its ``teacher`` setting, LDiffRec unpickles its dataset's ``item_emb.npy``."""
    from recbole.model.context_aware_recommender import kd_dagfm
    from recbole.model.general_recommender import ldiffrec

    kd_init = kd_dagfm.KD_DAGFM.__init__

    def teacher_network(name):
        if name not in KD_DAGFM_TEACHERS:
            raise UnsafeSettingError(
                f"setting teacher: {name!r} is not one of KD_DAGFM's teacher networks ({', '.join(KD_DAGFM_TEACHERS)})"
            )
        return getattr(kd_dagfm, name)

    @functools.wraps(kd_init)
    def kd_dagfm_init(self, config, dataset):
        with _patched_builtin_eval(teacher_network, kd_dagfm):
            kd_init(self, config, dataset)

    kd_dagfm.KD_DAGFM.__init__ = kd_dagfm_init

    ld_init = ldiffrec.LDiffRec.__init__
    numpy_load = numpy.load

    def load_without_pickles(file, *args, **kwargs):
        try:
            return numpy_load(file, *args, **{**kwargs, "allow_pickle": False})
        except ValueError as error:
            if "allow_pickle" not in str(error):
                raise
            raise UnsafeSettingError(
                f"{file} holds pickled objects, and loading a pickle runs code; LDiffRec's "
                "item embeddings must be a plain numeric array (numpy.save of a float "
                "array)"
            ) from None

    @functools.wraps(ld_init)
    def ldiffrec_init(self, config, dataset):
        saved, ldiffrec.np = ldiffrec.np, _NumpyWithoutPickles(load_without_pickles)
        try:
            ld_init(self, config, dataset)
        finally:
            ldiffrec.np = saved

    ldiffrec.LDiffRec.__init__ = ldiffrec_init


class _NumpyWithoutPickles:
    """numpy, with a ``load`` that refuses pickled arrays (for one module's global ``np``)."""

    def __init__(self, load):
        self.load = load

    def __getattr__(self, name):
        return getattr(numpy, name)


# RecBole models that torch.load a pretrained model named by a setting, in __init__: module, class.
PRETRAINED_MODELS = (
    ("general_recommender.convncf", "ConvNCF"),
    ("general_recommender.nais", "NAIS"),
    ("general_recommender.ract", "RaCT"),
    ("general_recommender.neumf", "NeuMF"),
    ("sequential_recommender.s3rec", "S3Rec"),
    ("context_aware_recommender.kd_dagfm", "KD_DAGFM"),
)


def _install_weights_only_pretraining():
    """ConvNCF, NAIS, RaCT, NeuMF, S3Rec and KD_DAGFM ``torch.load`` a pretrained file without ``weights_only``
    (convncf.py:82, nais.py:127, ract.py:75/84, neumf.py:84, s3rec.py:120, kd_dagfm.py:56): torch before 2.6 (or
    ``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD``) unpickles it. Their construction loads weights only."""
    import torch

    from recbole_mgformer.registry import _anomaly_mode_kept

    torch_load = torch.load

    def load_weights_only(*args, **kwargs):
        return torch_load(*args, **{**kwargs, "weights_only": True})

    for module_name, class_name in PRETRAINED_MODELS:
        with _anomaly_mode_kept():
            cls = getattr(importlib.import_module(f"recbole.model.{module_name}"), class_name)
        init = cls.__init__

        def weights_only_init(self, *args, _init=init, **kwargs):
            with unittest.mock.patch.object(torch, "load", load_weights_only):
                _init(self, *args, **kwargs)

        cls.__init__ = functools.wraps(init)(weights_only_init)


def install():
    """Apply everything above, once per process."""
    if _installed:
        return
    _install_config()
    _install_data()
    _install_hyper_tuning()
    _install_models()
    _install_weights_only_pretraining()
    _installed.append(True)
