"""How dense each leaderboard dataset is, measured from its source files: users, items, interactions, interactions
per item and per user, and density (interactions / (users x items)), over every interaction of the dataset (train,
valid and test alike). The summary of ``results/README.md`` prints them beside the models' scores; it reads them
from ``results/data_properties.json``, which this module writes:

    python -m recbole_mgformer.benchmark.data_properties [--shared DIR] [--output results/data_properties.json]

The files are those the benchmark imports from (``../shared/datasets``, or ``$RECBOLE_MGFORMER_SHARED``): ml-100k's
atomic ``.inter`` file, Amazon Beauty's SELFRec ``train.txt`` and ``test.txt``, and LightGCN's Gowalla and Yelp2018
``train.npz`` and ``test.npz`` (their ``-full`` protocols use the same interactions). Reading them imports neither
torch nor RecBole."""

import argparse
import json
import sys
from pathlib import Path

from recbole_mgformer.config.input_checks import check_writable, user_errors, write_new_text

COMMAND = "python -m recbole_mgformer.benchmark.data_properties"
DEFAULT_OUTPUT = Path("results") / "data_properties.json"

# dataset -> (format, its files under the shared datasets folder)
SOURCES = {
    "ml-100k": ("atomic", ("ml-100k/ml-100k.inter",)),
    "amazon-beauty": ("selfrec", ("amazon-beauty/train.txt", "amazon-beauty/test.txt")),
    "gowalla": ("npz", ("gowalla/train.npz", "gowalla/test.npz")),
    "yelp2018": ("npz", ("yelp2018/train.npz", "yelp2018/test.npz")),
}


def _atomic_pairs(path):
    """``(user, item)`` of a RecBole atomic ``.inter`` file (a header naming ``user_id`` and ``item_id``)."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    header = [field.split(":")[0] for field in lines[0].split("\t")]
    if "user_id" not in header or "item_id" not in header:
        raise ValueError(f"{path}:1: expected a header with user_id and item_id, got {lines[0]!r}")
    user, item = header.index("user_id"), header.index("item_id")
    pairs = []
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) <= max(user, item):
            raise ValueError(f"{path}:{number}: expected {len(header)} tab-separated fields, got {line[:80]!r}")
        pairs.append((fields[user], fields[item]))
    return pairs


def _selfrec_pairs(path):
    from recbole_mgformer.data.importer import read_source

    return read_source(path, "selfrec")[0]


def _npz_pairs(path):
    from recbole_mgformer.data.npz_splits import load_npz

    coo = load_npz(path).tocoo()
    return list(zip(coo.row.tolist(), coo.col.tolist()))


READERS = {"atomic": _atomic_pairs, "selfrec": _selfrec_pairs, "npz": _npz_pairs}


def properties_of(pairs):
    """The counts and ratios of one dataset's ``(user, item)`` interactions (a repeated pair counts each time, as
    RecBole keeps it)."""
    users = len({user for user, _ in pairs})
    items = len({item for _, item in pairs})
    interactions = len(pairs)
    return {
        "users": users,
        "items": items,
        "interactions": interactions,
        "interactions_per_item": round(interactions / items, 2),
        "interactions_per_user": round(interactions / users, 2),
        "density": round(interactions / (users * items), 6),
    }


def measure(shared):
    """``{dataset: {"files": [...], users, items, ...}}`` for every dataset of :data:`SOURCES` under ``shared``."""
    measured = {}
    for dataset, (fmt, files) in SOURCES.items():
        paths = [Path(shared) / name for name in files]
        missing = [str(path) for path in paths if not path.is_file()]
        if missing:
            raise ValueError(
                f"{dataset}: missing {', '.join(missing)}; give the folder holding the shared datasets with --shared"
            )
        pairs = [pair for path in paths for pair in READERS[fmt](path)]
        measured[dataset] = {"files": list(files), **properties_of(pairs)}
    return measured


def document(measured):
    return {
        "command": COMMAND,
        "note": "every interaction of each dataset (train, valid and test); density = interactions / (users x items)",
        "datasets": measured,
    }


def read_properties(path):
    """The ``datasets`` mapping of a written file; empty when there is none (a results folder elsewhere)."""
    path = Path(path)
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text())
    except ValueError as error:
        raise ValueError(f"{path}: not readable JSON ({error}); rerun `{COMMAND}` to write it again") from None
    datasets = data.get("datasets") if isinstance(data, dict) else None
    if not isinstance(datasets, dict):
        raise ValueError(f"{path}: expected {{'datasets': {{name: {{...}}}}}}; rerun `{COMMAND}` to write it again")
    return datasets


def main(argv=None):
    with user_errors():
        return _main(argv)


def _main(argv):
    from recbole_mgformer.data.sources import shared_datasets_dir

    parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__.splitlines()[0])
    parser.add_argument("--shared", default=None, help="the shared datasets folder (default ../shared/datasets)")
    parser.add_argument("--output", default=str(DEFAULT_OUTPUT), help="the JSON to write (replaced)")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    check_writable(args.output, "--output")
    measured = measure(args.shared or shared_datasets_dir())
    write_new_text(args.output, json.dumps(document(measured), indent=2) + "\n", option="--output", overwrite=True)
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
