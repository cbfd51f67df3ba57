"""Checks of RecBole atomic files before RecBole reads them.

RecBole's reader fills short rows with NaN and stops with a pandas message on long ones; a
wrong header type surfaces far from its cause. These checks name the file, the line and the fix.

They also hold the validator to what RecBole then reads: ``pandas.read_csv(sep=field_separator, dtype=str,
engine="python")`` with pandas' default missing values. An id that pandas takes for missing (``NA``, ``null``,
``None``, ``nan``, an empty field, ...) loses its row or, after another dropped row, binds the interaction to the
padding id; a field starting with a double quote opens a CSV quotation that joins separators and lines; a carriage
return ends a line; a repeated header column is read once; a multi-character separator is a regular expression.
Each is an error naming file, line, column and fix, so that the rows validated are the rows RecBole trains on.
"""

import codecs
import collections
import os
import re
import shlex
from logging import getLogger

from recbole_mgformer.config.defaults import properties_dir
from recbole_mgformer.config.input_checks import did_you_mean
from recbole_mgformer.data.tokens import NA_VALUES, PADDING_TOKEN

ATOMIC_TYPES = ("token", "token_seq", "float", "float_seq")
ATOMIC_SUFFIXES = ("inter", "user", "item", "kg", "link", "net")
# RecBole's settings naming the id fields of each kind of atomic file (None where a config does not set them)
ID_SETTINGS = {
    "inter": ("USER_ID_FIELD", "ITEM_ID_FIELD"),
    "user": ("USER_ID_FIELD",),
    "item": ("ITEM_ID_FIELD",),
    "kg": ("HEAD_ENTITY_ID_FIELD", "RELATION_ID_FIELD", "TAIL_ENTITY_ID_FIELD"),
    "link": ("ITEM_ID_FIELD", "ENTITY_ID_FIELD"),
    "net": ("SOURCE_ID_FIELD", "TARGET_ID_FIELD"),
}
REGEX_CHARACTERS = frozenset(".^$*+?{}[]\\|()")


AtomicStats = collections.namedtuple("AtomicStats", "rows repeated_pairs")


class AtomicFileError(ValueError):
    """A malformed RecBole atomic file."""


def check_separators(separator, seq_separator):
    """The separators RecBole's reader would use otherwise than they read: pandas takes a separator of several
    characters for a regular expression, a double quote for quoting, and a line break for the end of a row."""
    if not isinstance(separator, str) or not separator or any(c in separator for c in '\r\n"'):
        raise AtomicFileError(
            f"field_separator {separator!r} cannot separate columns: it must be one or more characters other than "
            "a line break or a double quote (e.g. a tab, the default)"
        )
    if len(separator) > 1 and REGEX_CHARACTERS & set(separator):
        raise AtomicFileError(
            f"field_separator {separator!r}: RecBole's reader (pandas) takes a separator of several characters for "
            "a regular expression, in which "
            + ", ".join(repr(c) for c in sorted(REGEX_CHARACTERS & set(separator)))
            + " match other text; use a single character (e.g. a tab) or characters without regular expression "
            "meaning, e.g. '::'"
        )
    if not isinstance(seq_separator, str) or not seq_separator:
        raise AtomicFileError(f"seq_separator {seq_separator!r} must be one or more characters, e.g. a space")


def _table_hint(fields, separator):
    """Where a one-column header holds a comma or semicolon: an atomic file with another separator (each part
    ``name:type``) wants ``field_separator``; a plain table, the importer."""
    other = next((c for c in (",", ";") if len(fields) == 1 and c in fields[0] and c != separator), None)
    if other is None:
        return ""
    if all(part.partition(":")[2] in ATOMIC_TYPES for part in fields[0].split(other)):
        return f"; the header is split by {other!r}: set field_separator: {other!r} (or --field_separator={other!r})"
    option = "" if other == "," else f" --separator '{other}'"
    return (
        f"; the header holds {other!r}, as a CSV does: turn a table into atomic files with python -m "
        f"recbole_mgformer.data.importer --format csv{option} (docs/your-data.md)"
    )


def _parse_header(path, line, separator):
    """The header's ``(names, types)``, with file, column and fix for a field that is not ``name:type``, a name
    RecBole's reader would read otherwise, or a name given twice."""
    fields = line.rstrip("\r\n").split(separator)
    names, types = [], []
    for column, field in enumerate(fields, start=1):
        name, _, field_type = field.partition(":")
        if '"' in field:
            raise AtomicFileError(
                f"{path}:1: column {column} header {field!r} holds a double quote, which RecBole's reader (pandas) "
                "takes for CSV quoting, so the column would not be found; remove the quotes from the header"
            )
        if not name or any(c.isspace() for c in name) or field_type not in ATOMIC_TYPES:
            raise AtomicFileError(
                f"{path}:1: column {column} header {field!r} must be 'name:type' with type one of "
                f"{', '.join(ATOMIC_TYPES)} (for example 'user_id:token'), columns separated by {separator!r}"
                + _table_hint(fields, separator)
            )
        if name in names:
            raise AtomicFileError(
                f"{path}:1: column {column} repeats the name {name!r} of column {names.index(name) + 1}; RecBole "
                "would read only one of them: give each column a name of its own (or remove the copy)"
            )
        names.append(name)
        types.append(field_type)
    return names, types


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


# how files that are not text begin, and how to get the text out: a byte error would name only a byte
COMPRESSED_STARTS = (  # (pattern of the first bytes, the format, its suffix, the command that decompresses it)
    (rb"\x1f\x8b", "gzip", ".gz", "gunzip -k"),
    (rb"BZh[1-9]1AY&SY", "bzip2", ".bz2", "bunzip2 -k"),
    (rb"\xfd7zXZ\x00", "xz", ".xz", "unxz -k"),
    (rb"\x28\xb5\x2f\xfd", "zstd", ".zst", "unzstd"),
)
OTHER_BINARY_STARTS = (  # (pattern, what the file is, the fix)
    (rb"PK\x03\x04", "a zip archive (an .xlsx workbook is one)", "unzip it, or save the sheet as CSV"),
    (rb"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "an Office file (.xls)", "save the sheet as CSV"),
)


def _decompress_command(path, suffix, command):
    """The command that leaves ``path``'s text beside it (its name less the suffix) or, without the suffix, at
    ``path`` itself (the tools take only names with it)."""
    name, renamed = shlex.quote(str(path)), shlex.quote(f"{path}{suffix}")
    if str(path).endswith(suffix):
        return f"{command} {name}"
    return f"mv {name} {renamed} && {command} {renamed}"


def _check_text(path):
    """A compressed file, an archive, a workbook or a Parquet file is named as such, with the way to its text (a
    pipe is not read ahead: its bytes would be gone)."""
    if not os.path.isfile(path):
        return
    with open(path, "rb") as handle:
        start = handle.read(16)
        handle.seek(max(handle.seek(0, os.SEEK_END) - 4, 0))
        end = handle.read()
    for pattern, kind, suffix, command in COMPRESSED_STARTS:
        if re.match(pattern, start, re.DOTALL):
            raise AtomicFileError(
                f"{path}: a {kind}-compressed file, not a text file; decompress it first "
                f"({_decompress_command(path, suffix, command)})"
            )
    for pattern, what, fix in OTHER_BINARY_STARTS:
        if re.match(pattern, start, re.DOTALL):
            raise AtomicFileError(f"{path}: {what}, not a text file; {fix}")
    if start.startswith(b"PAR1") and end == b"PAR1":  # Parquet: the magic at both ends
        raise AtomicFileError(
            f"{path}: a Parquet file, not a text file; import it with the importer's --format parquet "
            "(docs/your-data.md)"
        )


def input_path_problem(path):
    """Why ``path`` cannot be read as an input (a folder, or missing), or None: a file or a pipe (``/dev/stdin``)."""
    if os.path.isdir(path):
        return f"{path}: a folder, not a file; name the file in it"
    if not os.path.exists(path):
        return f"{path}: no such file"
    return None


LINE_END = re.compile(rb"(?<=\n)|(?<=\r)(?!\n)")  # after a line feed, or after a carriage return none follows


def _split_bare_cr(raw):
    """The lines of ``raw`` (bytes) once a bare ``\\r`` ends a line too: the byte 13 is a carriage return, never
    part of another character, in UTF-8 and the other encodings read byte by byte (as is the line feed, 10)."""
    return [line for line in LINE_END.split(raw) if line]


def decoded_lines(path, encoding=None, universal_newlines=False):
    """``(number, text)`` of each line of ``path`` read as ``encoding`` (RecBole's ``encoding`` option; UTF-8
    when unset, as RecBole's pandas reader), with file, line and fix on a byte that does not decode.

    Lines end at ``\\n`` (``\\r\\n`` included), so that the checks of an atomic file see a carriage return left
    inside a line; with ``universal_newlines`` a bare ``\\r`` ends a line too, as in files saved with old Mac line
    ends, which a user's source may be (the importer's): split before decoding, so a byte error names the line an
    editor shows. (UTF-16 and UTF-32 files are decoded as text, whose lines already end at either.)"""
    _check_text(path)
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
        except UnicodeError as error:  # a decode error, or the codec's own ("UTF-16 stream does not start with BOM")
            raise AtomicFileError(
                f"{path}: not {encoding} ({getattr(error, 'reason', error)}); set the encoding option to "
                "the file's encoding or convert the file to UTF-8"
            ) from None
        return
    with open(path, "rb") as handle:
        raws = (line for raw in handle for line in _split_bare_cr(raw)) if universal_newlines else handle
        for number, raw in enumerate(raws, start=1):
            try:
                yield number, raw.decode(encoding)
            except UnicodeDecodeError as error:
                raise AtomicFileError(
                    f"{path}:{number}: byte {error.start + 1} of the line ({raw[error.start : error.start + 1]!r}) "
                    f"is not {encoding}; set the encoding option to the file's encoding (e.g. "
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


def _check_line(path, number, line, values, separator, quoting):
    """What pandas' reader splits or joins otherwise than this line reads: a carriage return ends a row there, a
    line of separators alone is a row of missing values, and a field opening with a double quote is a CSV
    quotation that may run over separators and lines."""
    if "\r" in line:
        column = line[: line.index("\r")].count(separator) + 1
        raise AtomicFileError(
            f"{path}:{number}: column {column} holds a carriage return inside the line, where RecBole's reader "
            "(pandas) ends the row and starts another; remove it (lines may end with \\r\\n, never hold \\r)"
        )
    if len(values) > 1 and not any(values):
        raise AtomicFileError(
            f"{path}:{number}: the line holds only separators, which RecBole reads as a row of missing values "
            "(no user, no item); remove the line"
        )
    for column, value in enumerate(values, start=1):
        if quoting and value.startswith('"'):
            raise AtomicFileError(
                f"{path}:{number}: column {column} starts with a double quote ({value[:40]!r}), which RecBole's "
                "reader (pandas) takes for CSV quoting: the quotes vanish and separators and line breaks up to the "
                "next quote join into one value; remove the quotes from the value"
            )


def _check_floats(path, number, names, values, float_columns, float_seq_columns, seq_separator):
    """Every float field a finite number, or empty for a missing value (pandas' NaN, which RecBole fills); every
    float_seq field numbers separated by ``seq_separator``, or empty."""
    for i in float_columns + float_seq_columns:
        kind = "float" if i in float_columns else "float_seq"
        parts = [values[i]] if kind == "float" else values[i].split(seq_separator)
        for part in filter(None, parts):
            try:
                number_value = float(part)
            except ValueError:
                raise AtomicFileError(
                    f"{path}:{number}: column {i + 1} ({names[i]}) is declared {kind} in the header but holds "
                    f"{values[i]!r}; {_float_fix(kind, part, seq_separator)}"
                ) from None
            if number_value in (float("inf"), float("-inf")):
                raise AtomicFileError(
                    f"{path}:{number}: column {i + 1} ({names[i]}) holds {part!r}, which is not a finite number; "
                    "give a finite value, or leave the field empty for a missing value"
                )


def _float_fix(kind, part, seq_separator):
    """How to mend a float or float_seq field holding ``part``, which is not a number: the message names the type
    as the header declares it, and a sequence's form, since a float_seq value is read part by part."""
    if kind == "float":
        if part in NA_VALUES:
            return "leave the field empty for a missing value"
        return "declare it ':token' or fix the value"
    example = seq_separator.join(("0.5", "1", "2.5"))
    return (
        f"a float_seq value is numbers separated by seq_separator {seq_separator!r} (e.g. {example!r}), and "
        f"{part!r} is not a number; fix the value, leave the field empty for a missing value, or declare it "
        "':token_seq'"
    )


def _id_problem(value, is_sequence, seq_separator):
    """Why RecBole would not read ``value`` of an id column as the id(s) it shows, or None."""
    if value == "" and not is_sequence:
        return (
            "is empty: RecBole drops the row, or, once another row is dropped, binds the interaction to the "
            "padding id; fill in the id or remove the line"
        )
    if value in NA_VALUES and value:
        what = "an empty sequence" if is_sequence else "a missing id and drops the row"
        return (
            f"holds {value!r}, which RecBole's reader (pandas) takes for a missing value, so it reads {what}; "
            f"rename the token in the file (e.g. give every id a prefix: x_{value})"
        )
    tokens = value.split(seq_separator) if is_sequence else [value]
    if PADDING_TOKEN in tokens:
        return f"holds {PADDING_TOKEN!r}, RecBole's padding token, which would share the padding id; rename it"
    return None


def _check_ids(path, number, names, values, id_columns, seq_columns, seq_separator):
    for i in id_columns:
        problem = _id_problem(values[i], i in seq_columns, seq_separator)
        if problem:
            raise AtomicFileError(f"{path}:{number}: column {i + 1} ({names[i]}, an id) {problem}")


def _note_missing(path, number, names, values, columns, noted):
    """A feature token pandas takes for missing (``None`` as a category) is read as RecBole's missing value, the
    padding id, as an empty field is: legitimate, but said once a column, since the file says otherwise."""
    for i in columns:
        if values[i] in NA_VALUES and values[i] and i not in noted:
            noted.add(i)
            getLogger().warning(
                f"{path}:{number}: column {i + 1} ({names[i]}) holds {values[i]!r}, which RecBole reads as a missing "
                "value (as every empty field and pandas' other missing-value strings in that column); rename the "
                "token if it is a value of its own"
            )


def _check_header_line(path, header):
    if "\r" in header.rstrip("\r\n"):
        raise AtomicFileError(
            f"{path}:1: the header holds a carriage return inside the line (lines ending with \\r alone?), where "
            "RecBole's reader ends a line; save the file with \\n (or \\r\\n) line ends"
        )
    if not header.endswith("\n"):
        raise AtomicFileError(
            f"{path}:1: the file ends inside its header line (no line break after it, no rows): RecBole drops the "
            "header's last character; end the header with a line break and add the rows below it"
        )


def validate_atomic_file(
    path, separator="\t", seq_separator=" ", encoding=None, pair_fields=None, seen_pairs=None, id_fields=()
):
    """Raise :class:`AtomicFileError` at the first malformed line of a RecBole atomic file, or the first that
    RecBole's reader would read otherwise (ids it takes for missing, quotes, line breaks); returns its number of
    data rows and of rows whose ``pair_fields`` values (e.g. user and item) came before, in this file or in
    ``seen_pairs`` (a set, updated). The columns named in ``id_fields`` hold ids: never empty, never a string
    pandas reads as missing (``NA``, ``null``, ``None``, ``nan``, ...), never RecBole's padding token."""
    check_separators(separator, seq_separator)
    quoting = len(separator) == 1  # pandas' reader quotes with a one-character separator, not a regular expression
    lines = decoded_lines(path, encoding)
    number, header = next(lines, (1, ""))
    if not header.strip():
        raise AtomicFileError(
            f"{path}:1: the file is empty; the first line must be a header such as 'user_id:token<TAB>item_id:token'"
        )
    _check_header_line(path, header)
    names, types = _parse_header(path, header, separator)
    pair_columns = None
    if pair_fields and all(field in names for field in pair_fields):
        pair_columns = [names.index(field) for field in pair_fields]
    seen_pairs = set() if seen_pairs is None else seen_pairs
    token_columns = [i for i, t in enumerate(types) if t == "token"]
    token_seq_columns = [i for i, t in enumerate(types) if t == "token_seq"]
    float_columns = [i for i, t in enumerate(types) if t == "float"]
    float_seq_columns = [i for i, t in enumerate(types) if t == "float_seq"]
    id_columns = [i for i, name in enumerate(names) if name in set(id_fields) and types[i] in ("token", "token_seq")]
    feature_columns = [i for i in token_columns + token_seq_columns if i not in id_columns]
    rows = repeated = 0
    noted = set()
    for number, line in lines:
        line = line.rstrip("\r\n")
        if not line:
            continue
        _check_invisible(path, number, line, separator)
        values = line.split(separator)
        _check_line(path, number, line, values, separator, quoting)
        if len(values) != len(types):
            raise AtomicFileError(
                f"{path}:{number}: {len(values)} columns where the header has {len(types)}; "
                f"columns must be separated by {separator!r} (set field_separator if the file uses another)"
            )
        _check_floats(path, number, names, values, float_columns, float_seq_columns, seq_separator)
        _check_token_spacing(path, number, names, values, token_columns, token_seq_columns, seq_separator)
        _check_ids(path, number, names, values, id_columns, token_seq_columns, seq_separator)
        _note_missing(path, number, names, values, feature_columns, noted)
        rows += 1
        if pair_columns:
            pair = tuple(values[i] for i in pair_columns)
            repeated += pair in seen_pairs
            seen_pairs.add(pair)
    return AtomicStats(rows, repeated)


def starts_with_utf8_bom(path):
    with open(path, "rb") as handle:
        return handle.read(3) == codecs.BOM_UTF8


def header_fields(path, separator, encoding=None):
    """``{name: type}`` of an atomic file's header (validated first)."""
    _, header = next(decoded_lines(path, encoding), (1, ""))
    return dict(field.partition(":")[::2] for field in header.rstrip("\r\n").split(separator))


def _setting(config, key):
    try:
        return config[key]
    except KeyError:  # a plain mapping without the key (RecBole's Config gives None)
        return None


def id_fields(config, suffix):
    """The id columns RecBole remaps in a file of ``suffix``: its id settings, their aliases, and the item
    sequence of a sequential benchmark file (``item_id_list``)."""
    fields = [_setting(config, key) for key in ID_SETTINGS.get(suffix, ())]
    if suffix in ("inter", "user"):
        fields += list(_setting(config, "alias_of_user_id") or [])
    if suffix in ("inter", "item"):
        fields += list(_setting(config, "alias_of_item_id") or [])
    item = _setting(config, "ITEM_ID_FIELD")
    if suffix == "inter" and item:
        fields.append(f"{item}{_setting(config, 'LIST_SUFFIX') or '_list'}")
    return {field for field in fields if isinstance(field, str) and field}


def _read_by_recbole(config, suffix):
    """Whether RecBole loads any column of a ``suffix`` file: not when ``load_col`` lists other files only."""
    load_col = _setting(config, "load_col")
    return suffix == "inter" or not isinstance(load_col, dict) or suffix in load_col


def _time_ordered(config):
    eval_args = _setting(config, "eval_args")
    if not isinstance(eval_args, dict) or _setting(config, "benchmark_filename"):
        return False
    split = eval_args.get("split")
    return eval_args.get("order") == "TO" or (isinstance(split, dict) and "TS" in split)


def check_header_fields(config, path, suffix, fields):
    """The columns ``config`` needs from a ``suffix`` file are in its header (``fields``, ``{name: type}``): the id
    fields of an interaction file, every column ``load_col`` lists, and a float time field for a time order."""
    columns = ", ".join(fields)
    required = []
    if suffix == "inter":
        required = [(key, _setting(config, key)) for key in ("USER_ID_FIELD", "ITEM_ID_FIELD")]
    for key, field in required:
        if isinstance(field, str) and field not in fields:
            raise AtomicFileError(
                f"{path}:1: the header has no column {field!r}, the {key} (its columns: {columns}); name that column "
                f"'{field}:token' in the header, or set {key} to the name the file uses"
            )
        if isinstance(field, str) and fields[field] != "token":  # RecBole's remapping stopped in numpy's concatenate
            raise AtomicFileError(
                f"{path}:1: the {key} {field!r} is declared :{fields[field]}, but RecBole reads ids as tokens; "
                f"declare it '{field}:token' (numbers are fine as tokens)"
            )
    if suffix == "inter" and required[0][1] == required[1][1] and isinstance(required[0][1], str):
        raise AtomicFileError(
            f"{path}: USER_ID_FIELD and ITEM_ID_FIELD both name the column {required[0][1]!r}; set each to its own "
            "column (defaults user_id and item_id)"
        )
    load_col = _setting(config, "load_col")
    listed = load_col.get(suffix) if isinstance(load_col, dict) else None
    if isinstance(listed, (list, tuple)):
        missing = [field for field in listed if field not in fields]
        if missing:
            raise AtomicFileError(
                f"{path}:1: load_col lists {', '.join(map(repr, missing))} for .{suffix} files, but the header has no "
                f"such column (its columns: {columns}); RecBole would go on without it: add the column to the file "
                f"or remove it from load_col"
            )
    time_field = _setting(config, "TIME_FIELD")
    if suffix == "inter" and _time_ordered(config):
        if time_field not in fields:
            raise AtomicFileError(
                f"{path}:1: eval_args orders interactions by time (order: TO, or a TS split), but the header has no "
                f"column {time_field!r}, the TIME_FIELD (its columns: {columns}); add a timestamp:float column, set "
                "TIME_FIELD to the file's time column, or use order: RO"
            )
        if fields[time_field] != "float":
            raise AtomicFileError(
                f"{path}:1: the time field {time_field!r} is declared :{fields[time_field]}, so RecBole would order "
                f"interactions by token id, not by time; declare it '{time_field}:float'"
            )


def _dataset_names_near(data_path):
    """The datasets a misspelt name may have meant: the folders beside ``data_path`` and the datasets this project
    ships a protocol for (``properties/dataset/``, imported or copied on first use)."""
    parent = os.path.dirname(os.path.normpath(data_path))
    beside = [entry.name for entry in os.scandir(parent) if entry.is_dir()] if os.path.isdir(parent) else []
    shipped = [path.stem for path in (properties_dir() / "dataset").glob("*.yaml")]
    return sorted(set(beside) | set(shipped))


def check_dataset_folder(data_path, dataset):
    """``data_path`` (RecBole's: the folder of ``dataset``'s atomic files) exists, else a FileNotFoundError that
    names the datasets the name may have meant."""
    if not os.path.isdir(data_path):
        hint = did_you_mean(dataset, _dataset_names_near(data_path))
        hint = f"; {hint}" if hint else ""
        raise FileNotFoundError(
            f"dataset folder {data_path!r} does not exist: put the atomic files of {dataset!r} "
            f"({dataset}.inter, ...) there, or set data_path to the folder that holds the '{dataset}' folder{hint}"
        )


def validate_dataset_files(config):
    """Check every atomic file RecBole will read for ``config``'s dataset; returns the number of repeated
    (user, item) interactions over its interaction files."""
    data_path, dataset = config["data_path"], config["dataset"]
    check_dataset_folder(data_path, dataset)
    separator, seq_separator = config["field_separator"], config["seq_separator"]
    check_separators(separator, seq_separator)
    benchmarks = config["benchmark_filename"] or []
    names = [f"{dataset}.{suffix}" for suffix in ATOMIC_SUFFIXES]
    # a file read twice (benchmark_filename: [train, test, test], validation on the test set) is checked once: its
    # rows are not repeats of one another
    names += list(dict.fromkeys(f"{dataset}.{part}.inter" for part in benchmarks))
    present = [name for name in names if os.path.isfile(os.path.join(data_path, name))]
    absent = [f"{dataset}.{part}.inter" for part in benchmarks if f"{dataset}.{part}.inter" not in present]
    if absent and any(name.endswith(".inter") for name in present):
        raise FileNotFoundError(
            f"benchmark_filename {list(benchmarks)} reads {', '.join(absent)}, which {data_path!r} does not hold: put "
            f"the split's files there, or remove benchmark_filename to split {dataset}.inter"
        )
    if not any(name.endswith(".inter") for name in present):
        raise FileNotFoundError(
            f"no interaction file in {data_path!r}: expected {dataset}.inter"
            + (f" or {', '.join(n for n in names if n.endswith('.inter') and n.count('.') > 1)}" if benchmarks else "")
        )
    present = [name for name in present if _read_by_recbole(config, name.rsplit(".", 1)[1])]
    paths = [os.path.join(data_path, name) for name in present]
    if any(map(starts_with_utf8_bom, paths)) and codecs.lookup(config["encoding"] or "utf-8").name == "utf-8":
        config["encoding"] = "utf-8-sig"  # RecBole's reader would take the mark for part of the first column's name
        getLogger().info(f"{data_path}: a UTF-8 byte-order mark starts an atomic file; read as utf-8-sig")
    pairs, repeated = set(), 0
    for name in present:
        path = os.path.join(data_path, name)
        suffix = name.rsplit(".", 1)[1]
        is_inter = suffix == "inter"
        stats = validate_atomic_file(
            path,
            separator,
            seq_separator,
            config["encoding"],
            (config["USER_ID_FIELD"], config["ITEM_ID_FIELD"]) if is_inter else None,
            pairs,
            id_fields(config, suffix),
        )
        check_header_fields(config, path, suffix, header_fields(path, separator, config["encoding"]))
        if is_inter and stats.rows == 0:
            raise AtomicFileError(
                f"{path}: the file has a header but no interactions; add rows below the header "
                "(or check that the right file is in data_path)"
            )
        repeated += stats.repeated_pairs
    return repeated
