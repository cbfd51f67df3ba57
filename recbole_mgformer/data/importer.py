"""Turn interaction files into RecBole atomic files.

    python -m recbole_mgformer.data.importer --format csv --name mine --output dataset interactions.csv
    python -m recbole_mgformer.data.importer --format selfrec --name amazon-beauty --output dataset \\
        ../shared/datasets/amazon-beauty/train.txt ../shared/datasets/amazon-beauty/test.txt
    python -m recbole_mgformer.data.importer --format pairs --name mine --output dataset \\
        --train train.tsv --valid valid.tsv --test test.tsv
    python -m recbole_mgformer.data.importer --format npz --name gowalla --output dataset \\
        --train ../shared/datasets/gowalla/train.npz --test ../shared/datasets/gowalla/test.npz --valid-share 0.1

Formats:
  csv, tsv, parquet  a table with a header (Parquet needs pyarrow): the user and item columns (--user, --item; by
            default user/user_id/..., item/item_id/...), a rating (--rating) and a time (--time: Unix times or ISO
            dates) where found, every other column kept with its type inferred; --user-features and
            --item-features add .user and .item tables (docs/your-data.md)
  selfrec   ``uid:i1 i2 i3``   (SELFRec), one record per line (blank lines are skipped)
  lightgcn  ``u i1 i2 i3``     (LightGCN, NGCF)
  pairs     ``user item``      (tab or spaces)
  npz       a scipy sparse users x items matrix per split (LightGCN's public splits as Turbo-CF ships them):
            ``--train`` and ``--test`` matrices, the validation set carved from the training one
            (``--valid-share``, ``--valid-seed``: ``npz_splits.carve_validation``), or ``--valid-share test``: the
            test set again, for numbers that select on test as the published tables do; row and column indices
            are the user and item tokens

The line formats given input files write one ``<name>.inter`` for RecBole to split, with a ``timestamp`` column
that is each interaction's position in its user's history across the files in the order given (these formats
carry no times; SELFRec's and LightGCN's files list each user's items chronologically). Given
``--train/--valid/--test`` they write ``<name>.train.inter``, ``.valid.inter`` and ``.test.inter`` for RecBole's
``benchmark_filename``. Ids stay tokens, exactly as written; an id RecBole would read otherwise (NA, null, an empty
field, ...) stops the import with its file, line and column, as does a malformed line. Repeated pairs and users
listed without items are kept or reported, never dropped silently.

Every format takes one path (:func:`import_dataset`): the dataset name and every target file are checked, and the
folder's writability, before any input is read; all files are written to temporaries and claimed together at the
end, so a failed import leaves nothing behind and an existing dataset is replaced only with ``--overwrite``.
"""

import argparse
import dataclasses
import sys
from pathlib import Path

from recbole_mgformer.config.defaults import dataset_config_file
from recbole_mgformer.config.input_checks import (
    check_dataset_name,
    check_writable,
    claim,
    refuse_existing,
    temporary_beside,
)
from recbole_mgformer.data.atomic import decoded_lines, input_path_problem
from recbole_mgformer.data.tabular import (
    FIELDS,
    TABULAR_FORMATS,
    TYPES,
    TableOptions,
    config_text,
    interaction_columns,
    read_table,
    side_columns,
)
from recbole_mgformer.data.tokens import token_problem

FORMATS = ("selfrec", "lightgcn", "pairs")  # one record a line
NPZ = "npz"
SPLITS = ("train", "valid", "test")
WHAT = "import into"  # how a refused target file is introduced in errors


class SourceFormatError(ValueError):
    """A line that does not follow the declared source format."""


@dataclasses.dataclass
class ImportSummary:
    interactions: int = 0
    users: int = 0
    items: int = 0
    repeated_pairs: int = 0  # kept: the runner decides what repeats mean
    users_without_items: int = 0  # listed in the source with no item: nothing to write for them
    files: list = dataclasses.field(default_factory=list)
    notes: list = dataclasses.field(default_factory=list)  # how columns were read, one line each
    presplit: bool = False  # benchmark files, whose repeats the runner cannot remove

    def __str__(self):
        lines = [
            f"{self.interactions} interactions, {self.users} users, {self.items} items -> "
            + ", ".join(map(str, self.files))
        ]
        if self.repeated_pairs:
            lines.append(
                f"{self.repeated_pairs} repeated (user, item) pairs kept as separate interactions; " + self._repeats()
            )
        if self.users_without_items:
            lines.append(f"{self.users_without_items} users listed without items (no interaction to write)")
        return "\n".join(lines + self.notes)

    def _repeats(self):
        if self.presplit:
            return (
                "the runner stops on them in pre-split files (RecBole cannot drop their rows): remove them from the "
                "sources, or set rm_dup_inter: ~ to keep them"
            )
        return (
            "the runner removes repeats when it trains (rm_dup_inter: first keeps the first of each), except for "
            "sequential models, which read them as re-consumptions; rm_dup_inter: ~ keeps them"
        )


@dataclasses.dataclass
class ImportPlan:
    """What an import will write (``targets``, file names in the dataset folder, claimed in this order) and how:
    ``build()`` reads the inputs and returns ``([(file name, write(path)), ...], summary)``."""

    targets: list
    build: object
    sources: tuple = ()  # the input files, named when they hold nothing to import


# ------------------------------------------------------------------------------------------------ the one path


def import_dataset(name, output, plan, overwrite=False):
    """Every import: :func:`guard_import` before any input is read, then the plan's files written whole and
    claimed together (:func:`write_dataset`)."""
    folder = guard_import(name, output, plan.targets, overwrite)
    for source in plan.sources:
        check_input(source)
    files, summary = plan.build()
    if not summary.interactions:  # RecBole would fail on it later, far from the cause
        named = ", ".join(map(str, plan.sources)) or "the input"
        raise SourceFormatError(
            f"{named}: no interaction to import (a header or blank lines only, or users listed without items); "
            "check that you passed the right file"
        )
    if [file for file, _ in files] != list(plan.targets):
        raise AssertionError(f"an import planned {plan.targets} but built {[file for file, _ in files]}")
    summary.files = write_dataset(folder, files, overwrite)
    summary.notes += [_settings_note(name, output, path) for path in summary.files if path.suffix == ".yaml"]
    summary.notes += _files_kept_note(folder, name, plan.targets)
    return summary


# what RecBole and the runner read of a dataset's folder: its atomic files (a split's too) and its settings
READ_SUFFIXES = (".inter", ".user", ".item", ".kg", ".link", ".net", ".yaml")


def _files_kept_note(folder, name, written):
    """The dataset's files in ``folder`` that this import did not write, named ([] when none): left by an earlier
    import, a ``<name>.yaml`` there is read by the runner and may name a ``.user`` or split file that no longer
    matches the interactions."""
    kept = sorted(
        path.name
        for path in Path(folder).iterdir()
        if path.name.startswith(f"{name}.") and path.suffix in READ_SUFFIXES and path.name not in written
    )
    if not kept:
        return []
    return [
        f"kept in {folder}, not written by this import: {', '.join(kept)}; the runner reads {name}.yaml there and "
        "the files its settings name, so remove any left by an earlier import"
    ]


def _settings_note(name, output, path):
    """Where the runner finds the settings written by ``--write-config``."""
    shipped = dataset_config_file(name)
    if shipped:
        return (
            f"settings: {path}; the project ships {shipped} for the name {name!r}, which the runner reads instead: "
            f"pass --config_files={path} to apply these"
        )
    return f"settings: {path}, read by the runner for --dataset={name} --data_path={output} (edit it to change them)"


def check_input(path):
    """An input is a file, or a pipe (``/dev/stdin``) that the line formats and tables read once; a missing path or
    a folder is named before any input is read."""
    if problem := input_path_problem(path):
        raise SourceFormatError(problem)


def guard_import(name, output, targets, overwrite=False):
    """The dataset folder ``<output>/<name>``, once ``name`` is a plain folder name, no target file is there
    (unless ``overwrite``) and the folder can be written to."""
    try:
        check_dataset_name(name)
    except ValueError as error:
        raise ValueError(f"--name: {error}") from None
    folder = Path(output) / name
    for target in targets:
        refuse_existing(folder / target, WHAT, overwrite)
    check_writable(folder / targets[0], "--output")
    return folder


def write_dataset(folder, files, overwrite=False):
    """Write each ``(file name, write(path))`` of ``files`` to a temporary beside its target, then claim them all in
    order (:func:`input_checks.claim`: a file that appeared meanwhile, another import's, is never replaced unless
    ``overwrite``). On any failure the files claimed so far, the temporaries and the folders this call created
    are removed: an import leaves all its files or none. Returns the paths written."""
    created, temporaries, claimed, finished = [], [], [], False
    try:
        _create_folders(folder, created)
        for file, write in files:
            temporaries.append(temporary_beside(folder / file))
            write(temporaries[-1])
        for (file, _), temporary in zip(files, temporaries):
            claimed.append(claim(temporary, folder / file, WHAT, overwrite))
        finished = True
        return claimed
    finally:
        for temporary in temporaries:
            temporary.unlink(missing_ok=True)
        if not finished:
            for path in claimed:
                path.unlink(missing_ok=True)
            for path in reversed(created):
                try:
                    path.rmdir()
                except OSError:  # not empty: another import writes there too
                    break


def _create_folders(folder, created):
    """Create ``folder`` and the missing folders above it, appending to ``created`` those this call made (another
    import may make one at the same moment: then it is not ours to remove)."""
    missing = []
    for path in (folder, *folder.parents):
        if path.is_dir():
            break
        missing.append(path)
    for path in reversed(missing):
        try:
            path.mkdir()
        except FileExistsError:
            continue
        created.append(path)


def _writer(write_rows, *args):
    return lambda path: write_rows(path, *args)


def _text_writer(text):
    return lambda path: Path(path).write_text(text, encoding="utf-8")


# ------------------------------------------------------------------------------------------------ line formats


def _check_tokens(user, items, where):
    problem = token_problem(user)
    if problem:
        raise SourceFormatError(f"{where}: the user {problem}")
    for position, item in enumerate(items, start=1):
        problem = token_problem(item)
        if problem:
            raise SourceFormatError(f"{where}: item {position} of the line {problem}")


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
            f"{line[:80]!r}; convert extra columns away or use another format (--format csv or tsv reads a table "
            "with a header and keeps its other columns)"
        )
    return fields[0], fields[1:]


def read_source(path, fmt, encoding="utf-8"):
    """``[(user, item), ...]`` in file order, and the number of users listed without items; a byte that is not
    ``encoding``, a malformed line or an id RecBole would read otherwise stops the import with the file and line."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    pairs, empty_users = [], 0
    for number, line in decoded_lines(path, encoding, universal_newlines=True):  # old Mac files end lines in \r
        if number == 1:
            line = line.removeprefix("\ufeff")  # a byte-order mark
        if not line.strip():
            continue
        where = f"{path}:{number}"
        user, items = _parse_line(fmt, line.rstrip("\r\n"), where)
        _check_tokens(user, items, where)
        if not items:
            empty_users += 1
        pairs.extend((user, item) for item in items)
    return pairs, empty_users


def _write_rows(path, rows, with_position):
    header = "user_id:token\titem_id:token" + ("\ttimestamp:float" if with_position else "")
    with open(path, "w", encoding="utf-8", newline="\n") as handle:
        handle.write(header + "\n")
        for row in rows:
            handle.write("\t".join(map(str, row)) + "\n")


def _summarise(summary, pairs):
    summary.interactions += len(pairs)
    summary.users = len({u for u, _ in pairs})
    summary.items = len({i for _, i in pairs})
    summary.repeated_pairs = len(pairs) - len(set(pairs))


def merged_plan(fmt, inputs, name, encoding="utf-8", write_config=False):
    """One ``<name>.inter`` from ``inputs`` (read as ``encoding``, written as UTF-8), with per-user positions as
    ``timestamp``; with ``write_config``, ``<name>.yaml`` beside it."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    targets = [f"{name}.inter"] + ([f"{name}.yaml"] if write_config else [])

    def build():
        summary, pairs = ImportSummary(), []
        for path in inputs:
            source, empty = read_source(path, fmt, encoding)
            pairs += source
            summary.users_without_items += empty
        positions, rows = {}, []
        for user, item in pairs:
            positions[user] = positions.get(user, -1) + 1
            rows.append((user, item, positions[user]))
        _summarise(summary, pairs)
        files = [(targets[0], _writer(_write_rows, rows, True))]
        if write_config:
            text = config_text(name, {"inter": ["user_id", "item_id", "timestamp"]}, time_kind="positions")
            files.append((targets[1], _text_writer(text)))
        return files, summary

    return ImportPlan(targets, build, tuple(inputs))


def import_merged(fmt, inputs, name, output, encoding="utf-8", overwrite=False, write_config=False):
    """:func:`merged_plan`, imported into ``<output>/<name>``."""
    return import_dataset(name, output, merged_plan(fmt, inputs, name, encoding, write_config), overwrite)


def _split_files(name, split_pairs, summary):
    """``<name>.<split>.inter`` for each (split, pairs) in order (test last: its file marks a finished import)."""
    files, everything = [], []
    for split, pairs in split_pairs:
        files.append((f"{name}.{split}.inter", _writer(_write_rows, pairs, False)))
        everything += pairs
    _summarise(summary, everything)
    summary.presplit = True
    return files, summary


def presplit_plan(fmt, splits, name, encoding="utf-8"):
    """``<name>.train.inter`` / ``.valid.inter`` / ``.test.inter`` from ``{"train": path, ...}``."""
    missing = [s for s in SPLITS if not splits.get(s)]
    if missing:
        raise ValueError(
            f"pre-split import needs --train, --valid and --test (RecBole's benchmark_filename reads "
            f"all three); missing: {', '.join('--' + s for s in missing)}"
        )

    def build():
        summary = ImportSummary()

        def pairs_of(split):
            pairs, empty = read_source(splits[split], fmt, encoding)
            summary.users_without_items += empty
            return pairs

        return _split_files(name, [(s, pairs_of(s)) for s in SPLITS], summary)

    return ImportPlan([f"{name}.{s}.inter" for s in SPLITS], build, tuple(splits[s] for s in SPLITS))


def import_presplit(fmt, splits, name, output, encoding="utf-8", overwrite=False):
    return import_dataset(name, output, presplit_plan(fmt, splits, name, encoding), overwrite)


def npz_plan(train, test, name, valid_share=0.1, valid_seed=0):
    """``<name>.train.inter`` / ``.valid.inter`` / ``.test.inter`` from two sparse ``.npz`` matrices (users x
    items, one entry per interaction): the test matrix exactly, the validation set carved from the training one
    (``npz_splits.carve_validation``), or, with ``valid_share="test"``, no validation file: the dataset's config then
    reads the test file as its validation set (``benchmark_filename: [train, test, test]``)."""
    splits = [s for s in SPLITS if s != "valid" or valid_share != "test"]

    def build():
        from recbole_mgformer.data.npz_splits import carve_validation, load_npz, pairs_of  # scipy: only here

        train_matrix, test_matrix = load_npz(train), load_npz(test)
        if train_matrix.shape != test_matrix.shape:
            raise ValueError(
                f"{train} is {train_matrix.shape[0]} x {train_matrix.shape[1]} but {test} is "
                f"{test_matrix.shape[0]} x {test_matrix.shape[1]}: the splits must share their users and "
                "items (row = user, column = item)"
            )
        matrices = {"train": train_matrix, "test": test_matrix}
        if valid_share != "test":
            matrices["train"], matrices["valid"] = carve_validation(train_matrix, float(valid_share), valid_seed)
        return _split_files(name, [(s, pairs_of(matrices[s])) for s in splits], ImportSummary())

    return ImportPlan([f"{name}.{s}.inter" for s in splits], build, (train, test))


def import_npz(train, test, name, output, valid_share=0.1, valid_seed=0, overwrite=False):
    return import_dataset(name, output, npz_plan(train, test, name, valid_share, valid_seed), overwrite)


# ------------------------------------------------------------------------------------------------ tables


def table_plan(
    fmt, source, name, options=None, user_features=None, item_features=None, encoding="utf-8", write_config=False
):
    """``<name>.inter`` from a table (:mod:`recbole_mgformer.data.tabular`), ``<name>.user`` / ``<name>.item`` from
    the side tables given, and with ``write_config`` ``<name>.yaml`` with the general protocol and these columns."""
    options = options or TableOptions()
    sides = {suffix: path for suffix, path in (("user", user_features), ("item", item_features)) if path}
    targets = [f"{name}.inter"] + [f"{name}.{suffix}" for suffix in sides] + ([f"{name}.yaml"] if write_config else [])

    def build():
        table = read_table(source, fmt, encoding, options.separator)
        inter = interaction_columns(table, options)
        users, items = inter.columns[0], inter.columns[1]
        pairs = list(zip(users, items))
        summary = ImportSummary(notes=inter.notes)
        _summarise(summary, pairs)
        files, load_col, seen = [(targets[0], inter.write)], {"inter": inter.names}, set(table.header)
        taken = set(inter.names)  # RecBole joins the side tables' columns to the interactions: one name, one column
        for suffix, path in sides.items():
            side_table = read_table(path, fmt, encoding, options.separator)
            seen |= set(side_table.header)
            side = side_columns(side_table, options, suffix, set(users if suffix == "user" else items), taken)
            taken |= set(side.names)
            summary.notes += side.notes
            files.append((f"{name}.{suffix}", side.write))
            load_col[suffix] = side.names
        _check_column_types(options, seen)
        if write_config:
            time_kind = "times" if FIELDS["time"] in inter.names else None
            text = config_text(name, load_col, time_kind, rating=FIELDS["rating"] in inter.names)
            files.append((f"{name}.yaml", _text_writer(text)))
        return files, summary

    return ImportPlan(targets, build, (source,))


def _check_column_types(options, seen):
    unknown = sorted(set(options.column_types) - seen)
    if unknown:
        raise ValueError(
            f"--column-type names {', '.join(map(repr, unknown))}, which no table has; the headers hold {sorted(seen)}"
        )


def import_table(
    fmt,
    source,
    name,
    output,
    options=None,
    user_features=None,
    item_features=None,
    encoding="utf-8",
    overwrite=False,
    write_config=False,
):
    """:func:`table_plan`, imported into ``<output>/<name>``."""
    plan = table_plan(fmt, source, name, options, user_features, item_features, encoding, write_config)
    return import_dataset(name, output, plan, overwrite)


# ------------------------------------------------------------------------------------------------ command line


def _parser():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--format", required=True, choices=TABULAR_FORMATS + FORMATS + (NPZ,))
    parser.add_argument("--name", required=True, help="dataset name: files go to OUTPUT/NAME/NAME.*")
    parser.add_argument("--output", default="dataset", help="RecBole's data_path (default: dataset)")
    parser.add_argument(
        "--encoding",
        default="utf-8",
        help="encoding of the input files (default utf-8, e.g. latin-1); the atomic files are written as UTF-8",
    )
    parser.add_argument("--overwrite", action="store_true", help="replace the dataset's files if they exist")
    parser.add_argument("inputs", nargs="*", help="files merged, in this order, into one NAME.inter (a table: one)")
    for split in SPLITS:
        parser.add_argument(f"--{split}", help=f"the {split} file of a pre-split dataset")
    parser.add_argument(
        "--valid-share",
        default="0.1",
        help="npz: the share of each user's training items carved out as validation (default "
        "0.1), or 'test': validate on the test set, as the published numbers select",
    )
    parser.add_argument("--valid-seed", type=int, default=0, help="npz: seed of the validation draw (default 0)")
    table = parser.add_argument_group("tables (--format csv, tsv, parquet)")
    for role, default in (
        ("user", "user, user_id, ..."),
        ("item", "item, item_id, ..."),
        ("rating", "rating"),
        ("time", "timestamp, time, ts, ..."),
    ):
        table.add_argument(f"--{role}", metavar="COLUMN", help=f"the {role} column (default: {default}, any case)")
    table.add_argument(
        "--separator",
        metavar="SEP",
        help="csv, tsv: the field separator, one character (default ',' for csv, a tab for tsv; e.g. ';')",
    )
    table.add_argument("--seq-separator", metavar="SEP", help="columns holding SEP are token sequences (token_seq)")
    table.add_argument(
        "--column-type",
        action="append",
        default=[],
        metavar="COLUMN=TYPE",
        help=f"read COLUMN as TYPE ({', '.join(TYPES)}) instead of the inferred type; repeatable",
    )
    table.add_argument("--strip-spaces", action="store_true", help="remove the spaces around every value")
    table.add_argument("--user-features", metavar="FILE", help="a table of users (one row each), written as NAME.user")
    table.add_argument("--item-features", metavar="FILE", help="a table of items (one row each), written as NAME.item")
    parser.add_argument(
        "--write-config",
        action="store_true",
        help="also write NAME.yaml beside the data: the general protocol and the columns found (docs/your-data.md)",
    )
    return parser


TABLE_ONLY = (
    "user",
    "item",
    "rating",
    "time",
    "separator",
    "seq_separator",
    "column_type",
    "strip_spaces",
    "user_features",
    "item_features",
)


def _plan(parser, args):
    """The :class:`ImportPlan` the command line asks for; a combination of options that cannot work is a usage
    error (exit status 2)."""
    splits = {s: getattr(args, s) for s in SPLITS}
    if args.format not in TABULAR_FORMATS:
        given = [f"--{o.replace('_', '-')}" for o in TABLE_ONLY if getattr(args, o) not in (None, False, [])]
        if given:
            parser.error(
                f"{' and '.join(given)} {'applies' if len(given) == 1 else 'apply'} to tables (--format csv, tsv or "
                f"parquet), not --format {args.format}: drop {'it' if len(given) == 1 else 'them'}"
            )
    if args.format in TABULAR_FORMATS:
        if len(args.inputs) != 1 or any(splits.values()):
            parser.error(f"--format {args.format} imports one table of interactions (RecBole splits it); give one file")
        options = TableOptions(
            user=args.user,
            item=args.item,
            time=args.time,
            rating=args.rating,
            seq_separator=args.seq_separator,
            separator=args.separator,
            column_types=_column_types(parser, args.column_type),
            strip_spaces=args.strip_spaces,
        )
        return table_plan(
            args.format,
            args.inputs[0],
            args.name,
            options,
            args.user_features,
            args.item_features,
            args.encoding,
            args.write_config,
        )
    if args.format == NPZ:
        if args.inputs or args.valid or not (args.train and args.test) or args.write_config:
            parser.error(
                "--format npz takes --train and --test matrices (the validation set is carved: --valid-share), "
                "and writes benchmark files, whose settings are benchmark_filename (no --write-config)"
            )
        return npz_plan(args.train, args.test, args.name, _valid_share(parser, args.valid_share), args.valid_seed)
    if args.inputs and any(splits.values()):
        parser.error("give either input files to merge or --train/--valid/--test, not both")
    if not args.inputs and not any(splits.values()):
        parser.error("give input files to merge, or --train, --valid and --test")
    if args.inputs:
        return merged_plan(args.format, args.inputs, args.name, args.encoding, args.write_config)
    if args.write_config:
        parser.error(
            "--write-config writes the settings of one NAME.inter; pre-split files are read with benchmark_filename"
        )
    return presplit_plan(args.format, splits, args.name, args.encoding)


def _valid_share(parser, share):
    if share == "test":
        return share
    try:
        return float(share)
    except ValueError:
        parser.error(f"--valid-share {share!r}: give a share such as 0.1, or 'test'")


def _column_types(parser, given):
    types = {}
    for item in given:
        column, equals, kind = item.rpartition("=")
        if not equals or not column or kind not in TYPES:
            parser.error(f"--column-type {item!r}: give COLUMN=TYPE with TYPE one of {', '.join(TYPES)}")
        types[column] = kind
    return types


def main(argv=None):
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        plan = _plan(parser, args)
        summary = import_dataset(args.name, args.output, plan, args.overwrite)
    except (ValueError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
