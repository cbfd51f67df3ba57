"""Real datasets this project knows how to import from the shared data folder (``../shared/datasets``
next to the checkout, or ``$RECBOLE_MGFORMER_SHARED``), so that a benchmark finds them without a manual step;
and datasets that read another one's files under a protocol of their own (``dataset_source`` in
``properties/dataset/<name>.yaml``: ``ml-100k-seq`` reads ml-100k), copied under their name on first use,
since RecBole reads ``<data_path>/<dataset>/<dataset>.inter``."""

import os
import shutil
from logging import getLogger
from pathlib import Path

from recbole_mgformer.config.defaults import dataset_config_file
from recbole_mgformer.data.atomic import ATOMIC_SUFFIXES
from recbole_mgformer.data.importer import NPZ, import_merged, import_npz
from recbole_mgformer.safety.settings import load_plain_yaml

# name -> (source format, folder under datasets/, files merged in this order)
SOURCES = {
    "amazon-beauty": ("selfrec", "amazon-beauty", ("train.txt", "test.txt")),
    "amazon-beauty-loo": ("selfrec", "amazon-beauty", ("train.txt", "test.txt")),
}
# LightGCN's public splits: name -> (folder under datasets/, how validation is made: a share of each user's training
# items carved out with seed 0, or "test": the published protocol, which selects on the test set)
NPZ_SOURCES = {
    "gowalla": ("gowalla", 0.1),
    "gowalla-full": ("gowalla", "test"),
    "yelp2018": ("yelp2018", 0.1),
    "yelp2018-full": ("yelp2018", "test"),
}
NPZ_SEED = 0


def shared_datasets_dir():
    """``$RECBOLE_MGFORMER_SHARED/datasets``, else ``../shared/datasets`` beside the source checkout,
    else beside the working directory (for an installed package)."""
    if os.environ.get("RECBOLE_MGFORMER_SHARED"):
        return Path(os.environ["RECBOLE_MGFORMER_SHARED"]) / "datasets"
    beside_checkout = Path(__file__).resolve().parents[2].parent / "shared" / "datasets"
    if beside_checkout.is_dir():
        return beside_checkout
    return Path.cwd().resolve().parent / "shared" / "datasets"


def dataset_source(name):
    """The dataset whose atomic files ``name`` reads (``dataset_source`` in its config), else None."""
    path = dataset_config_file(name)
    source = (load_plain_yaml(Path(path).read_text()) or {}).get("dataset_source") if path else None
    if source is not None and (not isinstance(source, str) or source == name):
        raise ValueError(f"{path}: dataset_source must name another dataset, got {source!r}")
    return source


def bundled_ml_100k():
    """RecBole's own copy of ml-100k, which its Config reads whatever ``data_path`` says."""
    import recbole

    return Path(recbole.__file__).parent / "dataset_example" / "ml-100k"


def source_folder(name, data_path):
    """Where ``name`` is read: ``<data_path>/<name>``, except ml-100k where that folder holds no ``ml-100k.inter``:
    RecBole's own copy then (:func:`bundled_ml_100k`)."""
    folder = Path(data_path) / name
    if name == "ml-100k" and not (folder / "ml-100k.inter").is_file():
        return bundled_ml_100k()
    return folder


def copy_source(name, source, data_path):
    """``<data_path>/<name>/<name>.<suffix>``: the atomic files of ``source``, renamed, each written whole."""
    ensure_dataset(source, data_path)
    origin = source_folder(source, data_path)
    files = [origin / f"{source}.{suffix}" for suffix in ATOMIC_SUFFIXES if (origin / f"{source}.{suffix}").is_file()]
    if not files:
        raise FileNotFoundError(
            f"dataset {name!r} reads {source!r} (dataset_source in its config), but "
            f"{origin} holds no {source}.inter; import {source} first"
        )
    target = Path(data_path) / name
    target.mkdir(parents=True, exist_ok=True)
    for path in files:
        copy = target / f"{name}{path.name[len(source) :]}"
        partial = copy.with_name(f"{copy.name}.{os.getpid()}.tmp")  # several processes may copy at once
        shutil.copyfile(path, partial)
        partial.replace(copy)
    getLogger().info(f"copied {source}'s atomic files to {target} as {name}")
    return target / f"{name}.inter"


def written_on_first_use(name):
    """Whether :func:`ensure_dataset` writes ``name``'s files when they are missing (a known source, a pre-split
    one, a copy of another dataset), or RecBole reads its own copy (ml-100k)."""
    return name in SOURCES or name in NPZ_SOURCES or name == "ml-100k" or dataset_source(name) is not None


def ensure_dataset(name, data_path):
    """Import ``name`` into ``data_path`` from the shared folder if it is a known source and not there yet,
    or copy the files of its ``dataset_source``.

    Returns the atomic file's path (the test file of a pre-split dataset), or None for datasets this module does
    not know (left to RecBole).
    """
    target = Path(data_path) / name / f"{name}.inter"
    source = dataset_source(name)
    if source is not None:
        return target if target.is_file() else copy_source(name, source, data_path)
    if name in NPZ_SOURCES:
        return ensure_npz_dataset(name, data_path)
    if name not in SOURCES:
        return None
    fmt, folder, files = SOURCES[name]
    if target.is_file():
        return target
    source = shared_datasets_dir() / folder
    inputs = [source / f for f in files]
    _missing_sources(name, target.parent, folder, fmt, inputs)
    summary = import_merged(fmt, inputs, name, data_path, overwrite=True)  # a racing import writes the same file
    getLogger().info(f"imported {name}: {summary}")
    return target


def _missing_sources(name, where, folder, fmt, inputs):
    missing = [str(p) for p in inputs if not p.is_file()]
    if missing:
        raise FileNotFoundError(
            f"dataset {name!r} is not in {where} and its source files are missing: {', '.join(missing)}. "
            f"Put them there, set RECBOLE_MGFORMER_SHARED to the folder holding datasets/{folder}/, or import "
            f"them yourself with `python -m recbole_mgformer.data.importer --format {fmt} --name {name} ...`"
        )


def ensure_npz_dataset(name, data_path):
    """``<name>.train.inter`` (and ``.valid.inter`` where validation is carved) and ``.test.inter`` from the
    shared ``train.npz`` / ``test.npz``, unless the test file, written last, is there; returns its path."""
    folder, validation = NPZ_SOURCES[name]
    target = Path(data_path) / name / f"{name}.test.inter"
    if target.is_file():
        return target
    inputs = [shared_datasets_dir() / folder / f for f in ("train.npz", "test.npz")]
    _missing_sources(name, target.parent, folder, NPZ, inputs)
    # a racing import writes the same files; a half import of old (a test file claimed last, missing) is replaced
    summary = import_npz(*inputs, name, data_path, valid_share=validation, valid_seed=NPZ_SEED, overwrite=True)
    getLogger().info(f"imported {name}: {summary}")
    return target
