"""Real datasets this project knows how to import from the shared data folder (``../shared/datasets``
next to the checkout, or ``$RECBOLE_MGFORMER_SHARED``), so that a benchmark finds them without a manual step."""

import os
from logging import getLogger
from pathlib import Path

from recbole_mgformer.data.importer import import_merged

# name -> (source format, folder under datasets/, files merged in this order)
SOURCES = {
    "amazon-beauty": ("selfrec", "amazon-beauty", ("train.txt", "test.txt")),
    "amazon-beauty-loo": ("selfrec", "amazon-beauty", ("train.txt", "test.txt")),
}


def shared_datasets_dir():
    """``$RECBOLE_MGFORMER_SHARED/datasets``, else ``../shared/datasets`` beside the source checkout,
    else beside the working directory (for an installed package)."""
    if os.environ.get("RECBOLE_MGFORMER_SHARED"):
        return Path(os.environ["RECBOLE_MGFORMER_SHARED"]) / "datasets"
    beside_checkout = Path(__file__).resolve().parents[2].parent / "shared" / "datasets"
    if beside_checkout.is_dir():
        return beside_checkout
    return Path.cwd().resolve().parent / "shared" / "datasets"


def ensure_dataset(name, data_path):
    """Import ``name`` into ``data_path`` from the shared folder if it is a known source and not there yet.

    Returns the atomic file's path, or None for datasets this module does not know (left to RecBole).
    """
    if name not in SOURCES:
        return None
    fmt, folder, files = SOURCES[name]
    target = Path(data_path) / name / f"{name}.inter"
    if target.is_file():
        return target
    source = shared_datasets_dir() / folder
    inputs = [source / f for f in files]
    missing = [str(p) for p in inputs if not p.is_file()]
    if missing:
        raise FileNotFoundError(
            f"dataset {name!r} is not in {target.parent} and its source files are missing: {', '.join(missing)}. "
            f"Put them there, set RECBOLE_MGFORMER_SHARED to the folder holding datasets/{folder}/, or import "
            f"them yourself with `python -m recbole_mgformer.data.importer --format {fmt} --name {name} ...`"
        )
    summary = import_merged(fmt, inputs, name, data_path)
    getLogger().info(f"imported {name}: {summary}")
    return target
