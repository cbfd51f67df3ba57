"""Where the YAML defaults live: ``properties/`` of a source checkout, or the copy shipped
inside the installed package (``recbole_mgformer/properties``)."""

import copy
import functools
from pathlib import Path

from recbole_mgformer.safety.settings import load_yaml

_PACKAGE_DIR = Path(__file__).resolve().parents[1]


def properties_dir():
    installed = _PACKAGE_DIR / "properties"
    if installed.is_dir():
        return installed
    source = _PACKAGE_DIR.parent / "properties"
    if source.is_dir():
        return source
    raise FileNotFoundError(
        f"recbole_mgformer's properties/ folder is missing (looked in {installed} and {source}); "
        "reinstall the package with `pip install .`"
    )


def model_config_file(model_name):
    """``properties/model/<Name>.yaml`` if the project ships defaults for that model, else None."""
    path = properties_dir() / "model" / f"{model_name}.yaml"
    return str(path) if path.is_file() else None


def model_defaults(model_name):
    """The settings of ``properties/model/<Name>.yaml`` ({} where the project ships none), read once a process: a
    model's build consults them, and a benchmark builds many."""
    return copy.deepcopy(_read_model_defaults(model_name))


@functools.lru_cache(maxsize=None)
def _read_model_defaults(model_name):
    path = model_config_file(model_name)
    if path is None:
        return {}
    with open(path) as file:
        return load_yaml(file) or {}


def dataset_config_file(dataset_name):
    """``properties/dataset/<name>.yaml`` if the project ships a config for that dataset, else None."""
    path = properties_dir() / "dataset" / f"{dataset_name}.yaml"
    return str(path) if path.is_file() else None


def dataset_config_beside_data(dataset_name, data_path):
    """``<data_path>/<name>/<name>.yaml``, the settings written beside a dataset's atomic files (the importer's
    ``--write-config``), if that file exists, else None."""
    path = Path(data_path) / dataset_name / f"{dataset_name}.yaml"
    return str(path) if path.is_file() else None


def general_protocol_file():
    """``properties/protocol/general.yaml``: the project's general protocol (random 8:1:1 split per user, full
    ranking, Recall and NDCG@20), for a dataset of a general model that has no YAML of its own."""
    return str(properties_dir() / "protocol" / "general.yaml")


def tuned_dir():
    """``properties/benchmark``: per-dataset tuned settings, one folder per dataset."""
    return properties_dir() / "benchmark"


def benchmark_config_file(model_name, dataset_name, folder=None):
    """``<folder>/<dataset>/<Name>.yaml`` (``folder``: :func:`tuned_dir`): a model's hyperparameters tuned for one
    leaderboard dataset, applied by the benchmark, ``run.py`` and ``run_recommender`` under the user's own
    settings, else None. ``Name`` is a model's name or a variant's file stem (``mgformer-attention-false``)."""
    path = Path(folder or tuned_dir()) / dataset_name / f"{model_name}.yaml"
    return str(path) if path.is_file() else None
