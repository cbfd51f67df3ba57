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

:func:`recbole_mgformer.register` applies all of it (the ``install_*`` functions, entries of
:data:`recbole_mgformer.integration.patches.PATCHES`), once per process, on every stack. By what each
guards: ``settings.py`` (string settings, YAML, RecBole's Config and HyperTuning's files), ``datasets.py`` (pickled
datasets and dataloaders), ``models.py`` (the files RecBole's models load); every name is importable from
``recbole_mgformer.safety``.
"""

from recbole_mgformer.safety.datasets import (
    PICKLE_PATH_SETTINGS,
    PICKLE_SETTINGS,
    PICKLE_WRITE_SETTINGS,
    create_dataset,
    dataset_class,
    drop_pickle_settings,
    install_data,
    load_split_dataloaders,
    pickle_settings,
    refuse_pickle_settings,
    save_split_dataloaders,
)
from recbole_mgformer.safety.models import (
    KD_DAGFM_TEACHERS,
    PRETRAINED_MODELS,
    anomaly_mode_kept,
    install_models,
    install_weights_only_pretraining,
)
from recbole_mgformer.safety.settings import (
    SafeLoader,
    UnsafeSettingError,
    check_literal_strings,
    install_config,
    install_hyper_tuning,
    literal_setting,
    literal_settings,
    load_yaml,
)

__all__ = [
    "KD_DAGFM_TEACHERS",
    "PICKLE_PATH_SETTINGS",
    "PICKLE_SETTINGS",
    "PICKLE_WRITE_SETTINGS",
    "PRETRAINED_MODELS",
    "SafeLoader",
    "UnsafeSettingError",
    "anomaly_mode_kept",
    "check_literal_strings",
    "create_dataset",
    "dataset_class",
    "drop_pickle_settings",
    "install_config",
    "install_data",
    "install_hyper_tuning",
    "install_models",
    "install_weights_only_pretraining",
    "literal_setting",
    "literal_settings",
    "load_split_dataloaders",
    "load_yaml",
    "pickle_settings",
    "refuse_pickle_settings",
    "save_split_dataloaders",
]
