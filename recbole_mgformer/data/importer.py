"""Turn common public interaction formats into RecBole atomic files.

    python -m recbole_mgformer.data.importer --format selfrec --name amazon-beauty --output dataset \\
        ../shared/datasets/amazon-beauty/train.txt ../shared/datasets/amazon-beauty/test.txt
    python -m recbole_mgformer.data.importer --format pairs --name mine --output dataset \\
        --train train.tsv --valid valid.tsv --test test.tsv
    python -m recbole_mgformer.data.importer --format npz --name gowalla --output dataset \\
        --train ../shared/datasets/gowalla/train.npz --test ../shared/datasets/gowalla/test.npz --valid-share 0.1

Formats, one record per line (blank lines are skipped):
  selfrec   ``uid:i1 i2 i3``   (SELFRec)
  lightgcn  ``u i1 i2 i3``     (LightGCN, NGCF)
  pairs     ``user item``      (tab or spaces)
  npz       a scipy sparse users x items matrix per split (LightGCN's public splits as Turbo-CF ships them):
            ``--train`` and ``--test`` matrices, the validation set carved from the training one
            (``--valid-share``, ``--valid-seed``: ``npz_splits.carve_validation``), or ``--valid test``: the test set
            again, for numbers that select on test as the published tables do; row and column indices are the
            user and item tokens

Given input files, it writes one ``<name>.inter`` for RecBole to split, with a ``timestamp`` column that is
each interaction's position in its user's history across the files in the order given (these formats carry
no times; SELFRec's and LightGCN's files list each user's items chronologically). Given ``--train/--valid/--test``
it writes ``<name>.train.inter``, ``.valid.inter`` and ``.test.inter`` for RecBole's ``benchmark_filename``.
Ids stay tokens, exactly as written. A malformed line stops the import with its file and line number;
repeated pairs and users listed without items are kept or reported, never dropped silently.
"""

import argparse
import dataclasses
import os
import sys
from pathlib import Path

from recbole_mgformer.data.atomic import decoded_lines
from recbole_mgformer.input_checks import check_dataset_name, refuse_existing

FORMATS = ("selfrec", "lightgcn", "pairs")  # one record a line
NPZ = "npz"
SPLITS = ("train", "valid", "test")


class SourceFormatError(ValueError):
    """A line that does not follow the declared source format."""


@dataclasses.dataclass
class ImportSummary:
    interactions: int = 0
    users: int = 0
    items: int = 0
    repeated_pairs: int = 0  # kept: RecBole decides what repeats mean
    users_without_items: int = 0  # listed in the source with no item: nothing to write for them
    files: list = dataclasses.field(default_factory=list)

    def __str__(self):
        lines = [
            f"{self.interactions} interactions, {self.users} users, {self.items} items -> "
            + ", ".join(map(str, self.files))
        ]
        if self.repeated_pairs:
            lines.append(f"{self.repeated_pairs} repeated (user, item) pairs kept as separate interactions")
        if self.users_without_items:
            lines.append(f"{self.users_without_items} users listed without items (no interaction to write)")
        return "\n".join(lines)


def _parse_line(fmt, line, where):
    """``(user, [items])`` of one non-blank line."""
    if fmt == "selfrec":
        user, colon, rest = line.partition(":")
        if not colon or not user.strip() or any(c.isspace() for c in user.strip()):
            raise SourceFormatError(f"{where}: expected 'user:item item ...' (selfrec format), got {line[:80]!r}")
        return user.strip(), rest.split()
    fields = line.split()
    if fmt == "lightgcn":
        return fields[0], fields[1:]
    if len(fields) != 2:
        raise SourceFormatError(
            f"{where}: expected 2 columns 'user item' (pairs format), got {len(fields)}: "
            f"{line[:80]!r}; convert extra columns away or use another format"
        )
    return fields[0], fields[1:]


def read_source(path, fmt, encoding="utf-8"):
    """``[(user, item), ...]`` in file order, and the number of users listed without items; a byte that is not
    ``encoding`` stops the import with the file and line."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    pairs, empty_users = [], 0
    for number, line in decoded_lines(path, encoding):
        if not line.strip():
            continue
        user, items = _parse_line(fmt, line.rstrip("\r\n"), f"{path}:{number}")
        if not items:
            empty_users += 1
        pairs.extend((user, item) for item in items)
    return pairs, empty_users


def _write(path, rows, with_position):
    header = "user_id:token\titem_id:token" + ("\ttimestamp:float" if with_position else "")
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")  # unique: two importers may race
    with open(temporary, "w", encoding="utf-8") as handle:
        handle.write(header + "\n")
        for row in rows:
            handle.write("\t".join(map(str, row)) + "\n")
    os.replace(temporary, path)  # a reader never sees half a file


def _summarise(summary, pairs):
    summary.interactions += len(pairs)
    summary.users = len({u for u, _ in pairs})
    summary.items = len({i for _, i in pairs})
    summary.repeated_pairs = len(pairs) - len(set(pairs))


def import_merged(fmt, inputs, name, output, encoding="utf-8"):
    """One ``<output>/<name>/<name>.inter`` from ``inputs`` (read as ``encoding``, written as UTF-8), with
    per-user positions as ``timestamp``."""
    folder = Path(output) / name
    folder.mkdir(parents=True, exist_ok=True)
    summary, pairs = ImportSummary(), []
    for path in inputs:
        source, empty = read_source(path, fmt, encoding)
        pairs += source
        summary.users_without_items += empty
    positions, rows = {}, []
    for user, item in pairs:
        positions[user] = positions.get(user, -1) + 1
        rows.append((user, item, positions[user]))
    target = folder / f"{name}.inter"
    _write(target, rows, with_position=True)
    _summarise(summary, pairs)
    summary.files = [target]
    return summary


def import_presplit(fmt, splits, name, output, encoding="utf-8"):
    """``<name>.train.inter`` / ``.valid.inter`` / ``.test.inter`` from ``{"train": path, ...}``."""
    missing = [s for s in SPLITS if not splits.get(s)]
    if missing:
        raise ValueError(
            f"pre-split import needs --train, --valid and --test (RecBole's benchmark_filename reads "
            f"all three); missing: {', '.join('--' + s for s in missing)}"
        )
    summary = ImportSummary()

    def pairs_of(split):
        pairs, empty = read_source(splits[split], fmt, encoding)
        summary.users_without_items += empty
        return pairs

    return _write_splits(Path(output) / name, name, ((s, pairs_of(s)) for s in SPLITS), summary)


def _write_splits(folder, name, split_pairs, summary):
    """``<name>.<split>.inter`` for each (split, pairs) in order (test last: its file marks a finished import)."""
    folder.mkdir(parents=True, exist_ok=True)
    everything = []
    for split, pairs in split_pairs:
        target = folder / f"{name}.{split}.inter"
        _write(target, pairs, with_position=False)
        summary.files.append(target)
        everything += pairs
    _summarise(summary, everything)
    return summary


def import_npz(train, test, name, output, valid_share=0.1, valid_seed=0):
    """``<name>.train.inter`` / ``.valid.inter`` / ``.test.inter`` from two sparse ``.npz`` matrices (users x
    items, one entry per interaction): the test matrix exactly, the validation set carved from the training one
    (``npz_splits.carve_validation``), or, with ``valid_share="test"``, no validation file: the dataset's config then
    reads the test file as its validation set (``benchmark_filename: [train, test, test]``)."""
    from recbole_mgformer.data.npz_splits import carve_validation, load_npz, pairs_of  # scipy: only for matrices

    train_matrix, test_matrix = load_npz(train), load_npz(test)
    if train_matrix.shape != test_matrix.shape:
        raise ValueError(
            f"{train} is {train_matrix.shape[0]} x {train_matrix.shape[1]} but {test} is "
            f"{test_matrix.shape[0]} x {test_matrix.shape[1]}: the splits must share their users and "
            "items (row = user, column = item)"
        )
    splits = {"train": train_matrix, "test": test_matrix}
    if valid_share != "test":
        splits["train"], splits["valid"] = carve_validation(train_matrix, float(valid_share), valid_seed)
    return _write_splits(
        Path(output) / name, name, ((s, pairs_of(splits[s])) for s in SPLITS if s in splits), ImportSummary()
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--format", required=True, choices=FORMATS + (NPZ,))
    parser.add_argument("--name", required=True, help="dataset name: files go to OUTPUT/NAME/NAME.*.inter")
    parser.add_argument("--output", default="dataset", help="RecBole's data_path (default: dataset)")
    parser.add_argument(
        "--encoding",
        default="utf-8",
        help="encoding of the input files (default utf-8, e.g. latin-1); the atomic files are written as UTF-8",
    )
    parser.add_argument("--overwrite", action="store_true", help="replace the dataset's files if they exist")
    parser.add_argument("inputs", nargs="*", help="files merged, in this order, into one NAME.inter")
    for split in SPLITS:
        parser.add_argument(f"--{split}", help=f"the {split} file of a pre-split dataset")
    parser.add_argument(
        "--valid-share",
        default="0.1",
        help="npz: the share of each user's training items carved out as validation (default "
        "0.1), or 'test': validate on the test set, as the published numbers select",
    )
    parser.add_argument("--valid-seed", type=int, default=0, help="npz: seed of the validation draw (default 0)")
    args = parser.parse_args(argv)
    if args.format == NPZ:
        return _main_npz(parser, args)
    splits = {s: getattr(args, s) for s in SPLITS}
    if args.inputs and any(splits.values()):
        parser.error("give either input files to merge or --train/--valid/--test, not both")
    if not args.inputs and not any(splits.values()):
        parser.error("give input files to merge, or --train, --valid and --test")
    try:
        check_dataset_name(args.name)
        targets = [f"{args.name}.inter"] if args.inputs else [f"{args.name}.{split}.inter" for split in SPLITS]
        for target in targets:
            refuse_existing(Path(args.output) / args.name / target, "import into", args.overwrite)
        if args.inputs:
            summary = import_merged(args.format, args.inputs, args.name, args.output, args.encoding)
        else:
            summary = import_presplit(args.format, splits, args.name, args.output, args.encoding)
    except (SourceFormatError, ValueError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(summary)
    return 0


def _main_npz(parser, args):
    if args.inputs or args.valid or not (args.train and args.test):
        parser.error("--format npz takes --train and --test matrices (the validation set is carved: --valid-share)")
    share = args.valid_share
    if share != "test":
        try:
            share = float(share)
        except ValueError:
            parser.error(f"--valid-share {share!r}: give a share such as 0.1, or 'test'")
    try:
        summary = import_npz(args.train, args.test, args.name, args.output, share, args.valid_seed)
    except (ValueError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
