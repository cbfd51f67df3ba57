"""A weights-only checkpoint back to its Config, data and model: RecBole's ``load_data_and_model`` for
checkpoints that hold only tensors and plain values (``torch.load(weights_only=True)``).

:mod:`recbole_mgformer.integration.plugin` installs :func:`load_data_and_model` as
``recbole.quick_start.load_data_and_model``.
"""

import os
import sys
from logging import getLogger

from recbole.config import Config
from recbole.data import data_preparation
from recbole.utils import init_seed

from recbole_mgformer.integration.compat import init_logger
from recbole_mgformer.integration.registry import get_model
from recbole_mgformer.model.precision import flush_subnormals
from recbole_mgformer.safety import create_dataset, drop_pickle_settings
from recbole_mgformer.training.checkpoint_files import check_model_state, load_checkpoint
from recbole_mgformer.training.vocabulary import check_dataset, check_training_split

# Keys the Config derives from the others (types, device, process rank, per-split sampling): recomputed, not read.
DERIVED_KEYS = frozenset(
    {
        "MODEL_TYPE",
        "MODEL_INPUT_TYPE",
        "eval_type",
        "valid_metric_bigger",
        "device",
        "single_spec",
        "local_rank",
        "valid_neg_sample_args",
        "test_neg_sample_args",
        "nproc",
        "world_size",
        "offset",
    }
)


class RecordedConfig(Config):
    """A Config rebuilt from recorded values. RecBole's Config parses every string of ``config_dict`` (command-line
    values; RecBole ``eval``s them, :mod:`recbole_mgformer.safety` reads them as literals) and reads ``sys.argv``;
    a checkpoint's strings are data, kept as they were recorded, so neither happens."""

    def _load_variable_config_dict(self, config_dict):
        return dict(config_dict or {})

    def _load_cmd_line(self):
        return {}


def recorded_settings(recorded, source="the checkpoint"):
    """The settings a checkpoint's ``config`` records, less the derived keys, as ``config_dict``. RecBole's
    saved-dataset and saved-dataloader settings are dropped (a warning names any that held a value): they name
    pickles, and a pickle runs code when it loads; the dataset is rebuilt from the atomic files."""
    settings = drop_pickle_settings({key: value for key, value in recorded.items() if key not in DERIVED_KEYS}, source)
    path, dataset = settings.get("data_path"), recorded["dataset"]
    if isinstance(path, str) and os.path.basename(os.path.normpath(path)) == dataset:
        settings["data_path"] = os.path.dirname(os.path.normpath(path))  # Config appends the dataset again
    negatives = settings.get("train_neg_sample_args")
    if isinstance(negatives, dict) and negatives.get("distribution") == "none":
        settings["train_neg_sample_args"] = None  # what the user wrote (CE-loss models require None)
    return settings


def config_from_checkpoint(recorded, config_dict=None, source="the checkpoint"):
    """A Config equal to the one that trained the checkpoint; ``config_dict`` overrides (e.g. ``data_path``).
    ``source`` (the checkpoint's file) names it in the warnings."""
    if not isinstance(recorded, dict) or "model" not in recorded or "dataset" not in recorded:
        raise ValueError(
            "the checkpoint's 'config' is not a recorded settings dict with 'model' and 'dataset'; "
            "it was not written by recbole_mgformer or by RecBole with recbole_mgformer imported"
        )
    settings = {**recorded_settings(recorded, source), **(config_dict or {})}
    saved_argv, sys.argv = sys.argv, sys.argv[:1]
    try:
        return RecordedConfig(model=get_model(recorded["model"]), dataset=recorded["dataset"], config_dict=settings)
    finally:
        sys.argv = saved_argv


def load_data_and_model(model_file, config_dict=None, log=True):
    """RecBole's ``load_data_and_model`` for weights-only checkpoints, with the same return value:
    ``(config, model, dataset, train_data, valid_data, test_data)``. ``config_dict`` overrides recorded
    settings (``{"data_path": ...}`` when the data moved); ``log=False`` skips RecBole's log file.

    The data must be the data the checkpoint trained on: users and items numbered alike
    (:func:`recbole_mgformer.training.vocabulary.check_dataset`) and the same training split; the weights must be those
    of the model the config names (:func:`recbole_mgformer.training.checkpoint_files.check_model_state`). Otherwise a
    ValueError names the difference. Call :func:`recbole_mgformer.register` first (``recommend`` does); registering
    installs this function as RecBole's own ``load_data_and_model``."""
    checkpoint = load_checkpoint(str(model_file))
    config = config_from_checkpoint(checkpoint["config"], config_dict, str(model_file))
    recorded_class, model_class = checkpoint.get("model_class"), get_model(config["model"])
    if recorded_class is not None and recorded_class != model_class.__name__:
        raise ValueError(
            f"{model_file} holds the weights of a {recorded_class} model, but its config names "
            f"{config['model']}: the file was edited or assembled from two runs; use the checkpoint "
            f"that {config['model']} wrote, or retrain"
        )
    init_seed(config["seed"], config["reproducibility"])
    flush_subnormals(config)
    if log:
        init_logger(config)
    logger = getLogger()
    logger.info(config)

    dataset = create_dataset(config)
    logger.info(dataset)
    check_dataset(checkpoint, dataset, model_file)
    train_data, valid_data, test_data = data_preparation(config, dataset)
    check_training_split(checkpoint, train_data._dataset, model_file)

    init_seed(config["seed"], config["reproducibility"])
    model = model_class(config, train_data._dataset).to(config["device"])
    check_model_state(model, checkpoint, model_file)
    model.load_state_dict(checkpoint["state_dict"])
    model.load_other_parameter(checkpoint.get("other_parameter"))
    return config, model, dataset, train_data, valid_data, test_data
