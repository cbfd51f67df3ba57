"""Datasets are built from the atomic files: RecBole's pickled datasets and dataloaders are never loaded nor written.

``create_dataset`` (recbole/data/utils.py:60) unpickles ``dataset_save_path``, or any file at its default
``<checkpoint_dir>/<dataset>-<DatasetClass>.pth``, and ``data_preparation`` unpickles ``dataloaders_save_path``;
the settings that name or write those pickles are refused, and a pickle lying at a default path is never opened.
"""

import importlib
import sys
from logging import getLogger

from recbole_mgformer.safety.settings import UnsafeSettingError

# RecBole's settings that name or write pickled datasets and dataloaders.
PICKLE_PATH_SETTINGS = ("dataset_save_path", "dataloaders_save_path")
PICKLE_WRITE_SETTINGS = ("save_dataset", "save_dataloaders")
PICKLE_SETTINGS = PICKLE_PATH_SETTINGS + PICKLE_WRITE_SETTINGS


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


def install_data():
    """RecBole's dataset and dataloader readers and writers, wherever imported, replaced by those above."""
    import recbole.data.utils as data_utils
    from recbole.data.dataset import Dataset

    names = ("create_dataset", "load_split_dataloaders", "save_split_dataloaders")
    originals = [getattr(data_utils, name) for name in names]
    replacements = [create_dataset, load_split_dataloaders, save_split_dataloaders]
    _replace_everywhere(originals, replacements)  # data_preparation reads the two loaders from data_utils
    Dataset.save = _refuse_dataset_save
