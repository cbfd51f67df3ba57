"""Checks of RecBole atomic files before RecBole reads them.

RecBole's reader fills short rows with NaN and stops with a pandas message on long ones; a
wrong header type surfaces far from its cause. These checks name the file, the line and the fix.
"""

import codecs
import collections
import os
from logging import getLogger

ATOMIC_TYPES = ("token", "token_seq", "float", "float_seq")
ATOMIC_SUFFIXES = ("inter", "user", "item", "kg", "link", "net")


AtomicStats = collections.namedtuple("AtomicStats", "rows repeated_pairs")


class AtomicFileError(ValueError):
    """A malformed RecBole atomic file."""


def _parse_header(path, line, separator):
    fields = line.rstrip("\r\n").split(separator)
    types = []
    for column, field in enumerate(fields, start=1):
        name, _, field_type = field.partition(":")
        if not name or any(c.isspace() for c in name) or field_type not in ATOMIC_TYPES:
            raise AtomicFileError(
                f"{path}:1: column {column} header {field!r} must be 'name:type' with type one of "
                f"{', '.join(ATOMIC_TYPES)} (for example 'user_id:token'), columns separated by {separator!r}"
            )
        types.append(field_type)
    return types


INVISIBLE = {"\ufeff": "a byte-order mark (U+FEFF), as when files saved with one are concatenated", "\0": "a NUL byte"}


def _check_invisible(path, number, line, separator):
    """A character that prints as nothing makes a token that looks like another one (U+FEFF then 196 prints as
    user 196 but is a user of its own)."""
    for char, what in INVISIBLE.items():
        if char in line:
            column = line[: line.index(char)].count(separator) + 1
            raise AtomicFileError(
                f"{path}:{number}: column {column} holds {what}; remove it (a byte-order mark may only start the file)"
            )


def decoded_lines(path, encoding=None):
    """``(number, text)`` of each line of ``path`` read as ``encoding`` (RecBole's ``encoding`` option; UTF-8
    when unset, as RecBole's pandas reader), with file, line and fix on a byte that does not decode."""
    encoding = encoding or "utf-8"
    try:
        codec = codecs.lookup(encoding).name
    except LookupError:
        raise AtomicFileError(
            f"unknown encoding {encoding!r}; set encoding to a Python codec name such as utf-8 or latin-1"
        ) from None
    if codec.startswith(("utf-16", "utf-32")):  # lines are not byte-delimited: decode as text
        try:
            with open(path, encoding=encoding) as handle:
                yield from enumerate(handle, start=1)
        except UnicodeDecodeError as error:
            raise AtomicFileError(
                f"{path}: not {encoding} ({error.reason}); set RecBole's encoding option to "
                "the file's encoding or convert the file to UTF-8"
            ) from None
        return
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, start=1):
            try:
                yield number, raw.decode(encoding)
            except UnicodeDecodeError as error:
                raise AtomicFileError(
                    f"{path}:{number}: byte {error.start + 1} of the line ({raw[error.start : error.start + 1]!r}) "
                    f"is not {encoding}; set RecBole's encoding option to the file's encoding (e.g. "
                    f"--encoding=latin-1 or `encoding: latin-1` in a config file) or convert the file to UTF-8"
                ) from None


def _check_token_spacing(path, number, names, values, token_columns, token_seq_columns, seq_separator):
    """Whitespace around a token makes another token (' 196' is not '196': another user), so it is an error."""
    for i in token_columns + token_seq_columns:
        parts = [values[i]] if i in token_columns else values[i].split(seq_separator)
        padded = next((part for part in parts if part and part != part.strip()), None)
        if padded is not None:
            raise AtomicFileError(
                f"{path}:{number}: column {i + 1} ({names[i]}) holds {padded!r}, with whitespace around the token: "
                f"RecBole would read it as a token apart from {padded.strip()!r} (another user or item); remove the "
                "spaces around the values of that line (and of any other line that has them)"
            )


def validate_atomic_file(path, separator="\t", seq_separator=" ", encoding=None, pair_fields=None, seen_pairs=None):
    """Raise :class:`AtomicFileError` at the first malformed line of a RecBole atomic file; returns its number
    of data rows and of rows whose ``pair_fields`` values (e.g. user and item) came before, in this file or in
    ``seen_pairs`` (a set, updated)."""
    lines = decoded_lines(path, encoding)
    number, header = next(lines, (1, ""))
    if not header.strip():
        raise AtomicFileError(
            f"{path}:1: the file is empty; the first line must be a header such as 'user_id:token<TAB>item_id:token'"
        )
    types = _parse_header(path, header, separator)
    names = [field.partition(":")[0] for field in header.rstrip("\r\n").split(separator)]
    pair_columns = None
    if pair_fields and all(field in names for field in pair_fields):
        pair_columns = [names.index(field) for field in pair_fields]
    seen_pairs = set() if seen_pairs is None else seen_pairs
    token_columns = [i for i, t in enumerate(types) if t == "token"]
    token_seq_columns = [i for i, t in enumerate(types) if t == "token_seq"]
    float_columns = [i for i, t in enumerate(types) if t == "float"]
    float_seq_columns = [i for i, t in enumerate(types) if t == "float_seq"]
    rows = repeated = 0
    for number, line in lines:
        line = line.rstrip("\r\n")
        if not line:
            continue
        _check_invisible(path, number, line, separator)
        values = line.split(separator)
        if len(values) != len(types):
            raise AtomicFileError(
                f"{path}:{number}: {len(values)} columns where the header has {len(types)}; "
                f"columns must be separated by {separator!r} (set field_separator if the file uses another)"
            )
        try:
            for i in float_columns:
                if values[i]:
                    float(values[i])
            for i in float_seq_columns:
                for part in values[i].split(seq_separator):
                    if part:
                        float(part)
        except ValueError:
            raise AtomicFileError(
                f"{path}:{number}: column {i + 1} is declared float in the header but holds {values[i]!r}; "
                "declare it ':token' or fix the value"
            ) from None
        _check_token_spacing(path, number, names, values, token_columns, token_seq_columns, seq_separator)
        rows += 1
        if pair_columns:
            pair = tuple(values[i] for i in pair_columns)
            repeated += pair in seen_pairs
            seen_pairs.add(pair)
    return AtomicStats(rows, repeated)


def starts_with_utf8_bom(path):
    with open(path, "rb") as handle:
        return handle.read(3) == codecs.BOM_UTF8


def validate_dataset_files(config):
    """Check every atomic file RecBole will read for ``config``'s dataset; returns the number of repeated
    (user, item) interactions over its interaction files."""
    data_path, dataset = config["data_path"], config["dataset"]
    if not os.path.isdir(data_path):
        raise FileNotFoundError(
            f"dataset folder {data_path!r} does not exist: put the atomic files of {dataset!r} "
            f"({dataset}.inter, ...) there, or set data_path to the folder that holds the '{dataset}' folder"
        )
    benchmarks = config["benchmark_filename"] or []
    names = [f"{dataset}.{suffix}" for suffix in ATOMIC_SUFFIXES]
    # a file read twice (benchmark_filename: [train, test, test], validation on the test set) is checked once: its
    # rows are not repeats of one another
    names += list(dict.fromkeys(f"{dataset}.{part}.inter" for part in benchmarks))
    present = [name for name in names if os.path.isfile(os.path.join(data_path, name))]
    if not any(name.endswith(".inter") for name in present):
        raise FileNotFoundError(
            f"no interaction file in {data_path!r}: expected {dataset}.inter"
            + (f" or {', '.join(n for n in names if n.endswith('.inter') and n.count('.') > 1)}" if benchmarks else "")
        )
    paths = [os.path.join(data_path, name) for name in present]
    if any(map(starts_with_utf8_bom, paths)) and codecs.lookup(config["encoding"] or "utf-8").name == "utf-8":
        config["encoding"] = "utf-8-sig"  # RecBole's reader would take the mark for part of the first column's name
        getLogger().info(f"{data_path}: a UTF-8 byte-order mark starts an atomic file; read as utf-8-sig")
    pairs, repeated = set(), 0
    for name in present:
        path = os.path.join(data_path, name)
        is_inter = name.endswith(".inter")
        stats = validate_atomic_file(
            path,
            config["field_separator"],
            config["seq_separator"],
            config["encoding"],
            (config["USER_ID_FIELD"], config["ITEM_ID_FIELD"]) if is_inter else None,
            pairs,
        )
        if is_inter and stats.rows == 0:
            raise AtomicFileError(
                f"{path}: the file has a header but no interactions; add rows below the header "
                "(or check that the right file is in data_path)"
            )
        repeated += stats.repeated_pairs
    return repeated
