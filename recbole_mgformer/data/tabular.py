"""Tabular sources for the importer: a CSV, TSV or Parquet file with a header, read as it is written (every value
a string, nothing taken for missing), checked, and turned into the columns of a RecBole atomic file.

The user and item columns become ``user_id`` / ``item_id`` tokens, the rating ``rating:float``, the time
``timestamp:float`` (numbers kept as written, ISO dates turned into Unix seconds); every other column is kept with a
type inferred from its values (``float`` when every value is a number a float keeps exactly, ``token_seq`` when
``--seq-separator`` is given and the column holds it, ``token`` otherwise), each decision a line of the summary.
Ids RecBole would read otherwise (``tokens.token_problem``) stop the import with file, line and column; the values of
other columns that an atomic file cannot hold (tabs, line breaks) are cleaned, and counted.

CSV and TSV are read with Python's ``csv`` module rather than ``pandas.read_csv``: pandas fills a short row with
empty values without a word and counts records, not lines, in its errors; the ``csv`` reader gives each record's
fields as written and the line it starts on. Lines may end in ``\\n``, ``\\r\\n`` or a bare ``\\r`` (old Mac files), as
the ``csv`` module reads them from a file opened with ``newline=''``. Parquet is read with pandas and pyarrow.
"""

import csv
import dataclasses
import datetime
import os
import re

from recbole_mgformer.data.atomic import decoded_lines, input_path_problem
from recbole_mgformer.data.tokens import INVISIBLE, NA_VALUES, SPLITTING, token_problem

TABULAR_FORMATS = ("csv", "tsv", "parquet")
DELIMITERS = {"csv": ",", "tsv": "\t"}
ROLES = ("user", "item", "rating", "time")
FIELDS = {"user": "user_id", "item": "item_id", "rating": "rating", "time": "timestamp"}  # RecBole's default names
OPTIONS = {role: f"--{role}" for role in ROLES}
ALIASES = {  # header names (any case) taken for a role when its option is not given
    "user": ("user", "user_id", "userid", "uid"),
    "item": ("item", "item_id", "itemid", "iid"),
    "rating": ("rating", "ratings"),
    "time": ("timestamp", "time", "ts", "datetime", "date"),
}
TYPES = ("token", "token_seq", "float")
NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")  # what pandas and float() both read as a number
RECBOLE_SEQ_SEPARATOR = " "  # RecBole's default seq_separator: token_seq values are written with it
UNITS = (  # (below this size, unit, per second): a time's unit guessed from its median number
    (1e11, "seconds", 1),
    (1e14, "milliseconds", 1e3),
    (1e17, "microseconds", 1e6),
    (float("inf"), "nanoseconds", 1e9),
)


class TabularError(ValueError):
    """A tabular source the importer cannot turn into atomic files as they are."""


@dataclasses.dataclass(frozen=True)
class TableOptions:
    """The command line's choices for tabular sources: columns by role, type overrides, cleaning."""

    user: str = None
    item: str = None
    time: str = None
    rating: str = None
    seq_separator: str = None
    separator: str = None  # the field separator of csv / tsv (``--separator``; default ',' and tab)
    column_types: dict = dataclasses.field(default_factory=dict)  # header name -> token, token_seq or float
    strip_spaces: bool = False


@dataclasses.dataclass
class Table:
    """A source as read: its header and one list of strings per column."""

    path: str
    header: list
    columns: list
    lines: list = None  # the line each row starts on (CSV, TSV); None: Parquet, whose rows are counted
    header_line: int = 1

    @property
    def rows(self):
        return len(self.columns[0]) if self.columns else 0

    def where(self, row, column=None):
        place = f"{self.path}:{self.lines[row]}" if self.lines is not None else f"{self.path}: row {row + 1}"
        return place + ("" if column is None else f": column {column + 1} ({self.header[column]!r})")

    def header_where(self, column=None):
        place = f"{self.path}:{self.header_line}" if self.lines is not None else f"{self.path}: header"
        return place + ("" if column is None else f": column {column + 1}")


@dataclasses.dataclass
class AtomicColumns:
    """The columns of one atomic file to write: ``name:type`` fields and their values, and what was decided."""

    fields: list = dataclasses.field(default_factory=list)
    columns: list = dataclasses.field(default_factory=list)
    notes: list = dataclasses.field(default_factory=list)

    @property
    def names(self):
        return [field.partition(":")[0] for field in self.fields]

    def add(self, name, kind, values):
        self.fields.append(f"{name}:{kind}")
        self.columns.append(values)

    def write(self, path):
        with open(path, "w", encoding="utf-8", newline="\n") as handle:
            handle.write("\t".join(self.fields) + "\n")
            for row in zip(*self.columns):
                handle.write("\t".join(row) + "\n")


# ------------------------------------------------------------------------------------------------ reading


def read_table(path, fmt, encoding="utf-8", separator=None):
    """The :class:`Table` of ``path`` in format ``fmt`` (csv, tsv or parquet); ``separator`` replaces the field
    separator of csv (',') and tsv (tab), e.g. ';' for a CSV saved by a spreadsheet in a comma-decimal locale."""
    if fmt not in TABULAR_FORMATS:
        raise ValueError(f"unknown tabular format {fmt!r}; choose one of {', '.join(TABULAR_FORMATS)}")
    check_separator(separator, fmt)
    if problem := input_path_problem(path):
        raise TabularError(problem)
    if fmt == "parquet" and not os.path.isfile(path):  # pyarrow reads the footer first: a pipe cannot seek
        raise TabularError(f"{path}: not a file (a pipe?); --format parquet reads a saved file: save it, then import")
    delimiter = separator or DELIMITERS.get(fmt)
    table = _read_parquet(path) if fmt == "parquet" else _read_delimited(path, fmt, delimiter, encoding)
    _check_header(table, fmt, delimiter)
    return table


def check_separator(separator, fmt):
    """A field separator must be one character the CSV reader can split on, and only csv / tsv have one."""
    if separator is None:
        return
    if fmt not in DELIMITERS:
        raise TabularError(f"--separator applies to --format csv or tsv, not --format {fmt}")
    if len(separator) != 1 or separator in '"\r\n' or separator.isalnum() or separator == " ":
        raise TabularError(
            f"--separator {separator!r}: give one character that is not a letter, digit, space, quote or line "
            "break, such as ';' or '|' (a tab: --format tsv)"
        )


def _read_delimited(path, fmt, delimiter, encoding):
    """The table of a CSV or TSV file; its lines are split as ``open(path, newline='')`` splits them, at ``\\n``,
    ``\\r\\n`` or a bare ``\\r``, which the ``csv`` reader wants (a bare ``\\r`` left inside a line is its "new-line
    character seen in unquoted field"), and numbered as split, so that an error names the line an editor shows."""
    lines = decoded_lines(path, encoding, universal_newlines=True)
    reader = csv.reader((text for _, text in lines), delimiter=delimiter, strict=True)
    header, header_line, rows, starts, start = None, 1, [], [], 1
    while True:
        try:
            record = next(reader)
        except StopIteration:
            break
        except csv.Error as error:
            raise TabularError(
                f"{path}:{start}: {error}; a field holding the separator {delimiter!r}, a quote or a line break "
                'must be quoted whole, with its quotes doubled (e.g. "a ""b"", c")'
            ) from None
        if record:  # a blank line
            if header is None:
                header, header_line = record, start
            elif len(record) != len(header):
                # a header of one column: the file's separator is another character; say which, not "quote a field"
                _check_columns_separated(Table(str(path), header, [[]], [], header_line), fmt, delimiter)
                raise TabularError(
                    f"{path}:{start}: {len(record)} fields where the header (line {header_line}) has {len(header)}; "
                    f"quote a field that holds the separator {delimiter!r}, and give every row all the columns"
                )
            else:
                rows.append(record)
                starts.append(start)
        start = reader.line_num + 1
    if header is None:
        raise TabularError(f"{path}: the file is empty; the first line must be a header such as 'user,item'")
    if header[0].startswith("\ufeff"):  # a byte-order mark
        header[0] = header[0][1:]
    columns = [list(column) for column in zip(*rows)] if rows else [[] for _ in header]
    return Table(str(path), header, columns, starts, header_line)


def _read_parquet(path):
    try:
        import pyarrow  # noqa: F401  (pandas reads Parquet through it)
    except ImportError:
        raise TabularError(
            "--format parquet reads files with pyarrow, which is not installed: pip install pyarrow "
            "(or pip install 'recbole-mgformer[parquet]')"
        ) from None
    import pandas as pd

    try:
        frame = pd.read_parquet(path, engine="pyarrow", dtype_backend="numpy_nullable")
    except Exception as error:  # pyarrow's own errors (ArrowInvalid, ...) for a file that is not Parquet
        raise TabularError(f"{path}: not a Parquet file pyarrow can read ({error})") from None
    header = [str(name) for name in frame.columns]
    columns = []
    for j, name in enumerate(header):
        values = frame.iloc[:, j].tolist()
        columns.append([_parquet_text(value, path, name) for value in values])
    return Table(str(path), header, columns, None)


def _parquet_text(value, path, name):
    """A Parquet value as the text a CSV would hold: missing as '', dates in ISO form, numbers as Python writes them."""
    import numpy as np
    import pandas as pd

    if isinstance(value, (list, tuple, dict, np.ndarray)):
        raise TabularError(
            f"{path}: column {name!r} holds lists or records; flatten it (e.g. join a list with '|' and pass "
            "--seq-separator '|') or drop the column"
        )
    if value is None or value is pd.NaT or value is pd.NA or (isinstance(value, float) and value != value):
        return ""
    if isinstance(value, (datetime.datetime, datetime.date)):
        return value.isoformat()
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            raise TabularError(f"{path}: column {name!r} holds bytes that are not UTF-8 text") from None
    if isinstance(value, float):
        return repr(value)
    return str(value)


def _check_header(table, fmt, delimiter):
    seen = {}
    for column, name in enumerate(table.header):
        if not name.strip():
            raise TabularError(
                f"{table.header_where(column)}: the column has no name in the header; name it (a pandas index "
                "saved by to_csv has none: save with index=False)"
            )
        if name in seen:
            raise TabularError(
                f"{table.header_where(column)}: the header repeats the name {name!r} of column {seen[name] + 1}; "
                "name each column once (rename one of them)"
            )
        seen[name] = column
    if fmt in DELIMITERS:
        _check_columns_separated(table, fmt, delimiter)


def _check_columns_separated(table, fmt, delimiter):
    """A header of one column means the file is not separated by ``delimiter``: name the separator it holds."""
    if len(table.header) != 1:
        return
    other = next((d for d in (",", "\t", ";", "|") if d in table.header[0] and d != delimiter), None)
    hint = f" it holds {other!r}: is that the file's separator (--separator {other!r})?" if other else ""
    raise TabularError(
        f"{table.header_where()}: the header has one column, {table.header[0][:60]!r}; a table needs a user and "
        f"an item column, separated by {delimiter!r} (--format {fmt});{hint} --format csv reads commas, "
        "--format tsv tabs, --separator any other character"
    )


def strip_spaces(table):
    """Remove the whitespace around every value (``--strip-spaces``); returns how many values changed."""
    changed = 0
    for column in table.columns:
        for row, value in enumerate(column):
            if value != value.strip():
                column[row] = value.strip()
                changed += 1
    return changed


# ------------------------------------------------------------------------------------------------ roles


def find_columns(table, options, roles=ROLES):
    """``{role: column index}`` of the roles found: named by their option, else by a header name among their aliases
    (any case); the user and item must be there, two candidates for one role are an error."""
    found = {}
    for role in roles:
        chosen = getattr(options, role)
        if chosen is not None:
            found[role] = _chosen_column(table, role, chosen)
            continue
        matches = [j for j, name in enumerate(table.header) if name.strip().lower() in ALIASES[role]]
        if len(matches) > 1:
            names = " and ".join(repr(table.header[j]) for j in matches)
            raise TabularError(
                f"{table.header_where()}: columns {names} could each be the {role} column; choose one with "
                f"{OPTIONS[role]} COLUMN"
            )
        if matches:
            found[role] = matches[0]
        elif role in ("user", "item"):
            raise TabularError(
                f"{table.header_where()}: no {role} column among {table.header}: looked for "
                f"{', '.join(ALIASES[role])} (any case); the first line must be a header naming the columns, and "
                f"{OPTIONS[role]} COLUMN names the {role} column"
            )
    taken = {}
    for role, column in found.items():
        if column in taken:
            raise TabularError(
                f"{table.header_where(column)}: {table.header[column]!r} cannot be both the {taken[column]} and the "
                f"{role} column; choose another with {OPTIONS[role]}"
            )
        taken[column] = role
    return found


def _chosen_column(table, role, name):
    if name in table.header:
        return table.header.index(name)
    near = [h for h in table.header if h.strip().lower() == name.strip().lower()]
    raise TabularError(
        f"{table.header_where()}: no column {name!r} ({OPTIONS[role]}) among {table.header}"
        + (f"; did you mean {near[0]!r}?" if near else "")
    )


def check_ids(table, columns):
    """Every value of the id ``columns`` (``{column: what}``, e.g. ``{0: "user id"}``) an id RecBole reads back as
    written (``tokens.token_problem``); the first that is not, row by row, stops the import."""
    for row, values in enumerate(zip(*(table.columns[column] for column in columns))):
        for (column, what), value in zip(columns.items(), values):
            problem = token_problem(value)
            if problem:
                raise TabularError(f"{table.where(row, column)}: the {what} {problem}")


def rating_values(table, column):
    values = [value.strip() for value in table.columns[column]]
    for row, value in enumerate(values):
        if not NUMBER.fullmatch(value):
            raise TabularError(
                f"{table.where(row, column)}: the rating {value!r} is not a number; give every row a numeric rating "
                "(4, 4.5), or name another column with --rating"
            )
    return values


def time_values(table, column):
    """The column's times as Unix timestamps, and the line saying how they were read: numbers are kept as written
    (their unit guessed from their size and printed), ISO dates become Unix seconds (UTC where they name no zone)."""
    values = [value.strip() for value in table.columns[column]]
    for row, value in enumerate(values):
        if value in NA_VALUES:
            raise TabularError(
                f"{table.where(row, column)}: the time is {value!r}, a missing value; give every row its time "
                "(Unix seconds or an ISO date), or remove the row"
            )
    source = f"column {table.header[column]!r} -> timestamp:float"
    if all(NUMBER.fullmatch(value) for value in values):
        return values, f"{source}: numbers kept as written, {_unit_of([float(v) for v in values])}"
    return _iso_seconds(table, column, values, source)


def _unit_of(numbers):
    if not numbers:
        return "no rows"
    ordered = sorted(numbers)
    median = abs(ordered[len(ordered) // 2])
    _, unit, per_second = next(u for u in UNITS if median < u[0])
    try:
        first, last = (_date(ordered[0] / per_second), _date(ordered[-1] / per_second))
    except (OverflowError, OSError, ValueError):
        return f"{unit} by their size, though not dates Python can show"
    if unit == "seconds" and ordered[-1] < 1e8:
        return (
            f"too small for Unix seconds ({first} to {last}): read as an order, which is what RecBole sorts by "
            "(order: TO)"
        )
    return f"Unix {unit} by their size ({first} to {last})"


def _date(seconds):
    return datetime.datetime.fromtimestamp(seconds, tz=datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def _iso_seconds(table, column, values, source):
    micro = _iso_microseconds(table, column, values)
    written = [str(us // 10**6) if us % 10**6 == 0 else repr(us / 10**6) for us in micro]
    first, last = _utc_text(min(micro)), _utc_text(max(micro))
    return written, (
        f"{source}: ISO dates ({first} to {last} UTC) written as Unix seconds; a date without a zone is read as UTC"
    )


EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
NOT_A_TIME = -(2**63)  # what numpy holds for NaT, a value pandas could not read as a time
# the microseconds since 1970 of Python's first and last datetimes (UTC): pandas 3 reads years 0 and below too
FIRST_US, LAST_US = (
    (moment.replace(tzinfo=datetime.timezone.utc) - EPOCH) // datetime.timedelta(microseconds=1)
    for moment in (datetime.datetime.min, datetime.datetime.max)
)
ZONED = re.compile(r"[T ]\d[\d:.,]*(?:[zZ]|[+-]\d\d(?::?\d\d)?)$")  # a time with its zone: T22:13:20+01:00, T22Z


def _iso_microseconds(table, column, values):
    """Each ISO date of ``values`` as whole microseconds since 1970-01-01 UTC (earlier dates negative; a date
    without a zone read as UTC); the first value that is not one stops the import. pandas parses the column at once
    but holds its times as nanoseconds in 64 bits, from 1677-09-21 to 2262-04-11 only: a valid date beyond, such as
    0001-01-01 or 9999-12-31, is read by :func:`_outside_pandas` instead."""
    micro = _pandas_microseconds(values)
    for row, us in enumerate(micro):
        if us != NOT_A_TIME:
            continue
        try:
            micro[row] = _outside_pandas(values[row])
        except OverflowError:
            raise TabularError(
                f"{table.where(row, column)}: the time {values[row]!r} falls outside the years 1 to 9999 once "
                "turned to UTC, which no timestamp here can hold; check the date and its zone"
            ) from None
        if micro[row] is None:
            raise TabularError(
                f"{table.where(row, column)}: the time {values[row]!r} is neither a number nor an ISO date; write "
                "times as Unix seconds (1700000000) or ISO dates (2023-11-14, 2023-11-14T22:13:20, +01:00 for a zone), "
                "all rows alike, or name another column with --time"
            )
    return micro


def _pandas_microseconds(values):
    """The microseconds since 1970 UTC of each value pandas reads as an ISO date of the years 1 to 9999, floored
    whatever unit pandas chose, NOT_A_TIME for the others. The values with a zone and those without are parsed
    apart: given both, pandas (2.3, format ISO8601) reads a time without a zone that follows one with a zone in that
    zone, not in UTC."""
    import numpy as np
    import pandas as pd

    series = pd.Series(values, dtype=object)
    zoned = series.str.contains(ZONED).to_numpy(dtype=bool)
    micro = np.empty(len(values), dtype="int64")
    for part in (zoned, ~zoned):
        parsed = pd.to_datetime(series[part], format="ISO8601", utc=True, errors="coerce")
        micro[part] = parsed.dt.tz_localize(None).to_numpy(dtype="datetime64[us]").view("int64")
    micro[(micro < FIRST_US) | (micro > LAST_US)] = NOT_A_TIME  # NaT is below; Python's datetime decides those
    return micro.tolist()


def _outside_pandas(value):
    """Microseconds since 1970 UTC of an ISO date that pandas cannot hold (before 1677 or after 2262 in pandas 2;
    before the year 1 or after 9999 in pandas 3), read by Python's ``datetime`` (years 1 to 9999); None for a value
    Python does not read either (not an ISO date, or not a real day such as 2023-02-30), or one pandas reads alone
    but not in its column (refused rather than guessed). OverflowError where its UTC time leaves the years 1 to 9999
    (0001-01-01T00:00+01:00)."""
    if _pandas_microseconds([value])[0] != NOT_A_TIME:
        return None
    try:  # Python before 3.11 reads no 'Z' for UTC
        moment = datetime.datetime.fromisoformat(re.sub("[zZ]$", "+00:00", value))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.timezone.utc)
    return (moment.astimezone(datetime.timezone.utc) - EPOCH) // datetime.timedelta(microseconds=1)


def _utc_text(micro):
    """``micro`` (microseconds since 1970 UTC) as 'YYYY-MM-DD HH:MM:SS', the year in four digits (``strftime``
    writes year 1 as '1' on Linux)."""
    moment = EPOCH + datetime.timedelta(microseconds=micro)
    return moment.replace(tzinfo=None).isoformat(sep=" ", timespec="seconds")


# ------------------------------------------------------------------------------------------------ other columns


def field_name(name):
    """``name`` as a RecBole field: no whitespace, colon or quote (the header is ``name:type``, split on ':')."""
    return re.sub(r"[^\w.\-]", "_", name.strip())


def infer_type(values, seq_separator=None):
    """``(type, why)`` for a column's values (missing ones aside)."""
    present = [value.strip() for value in values if value.strip() not in NA_VALUES]
    if not present:
        return "token", "no values"
    if seq_separator and any(seq_separator in value for value in present):
        return "token_seq", f"values hold the separator {seq_separator!r}"
    text = next((value for value in present if not NUMBER.fullmatch(value)), None)
    if text is not None:
        return "token", f"values such as {text[:40]!r} are not numbers"
    changed = next((value for value in present if _changed_by_float(value)), None)
    if changed is not None:
        return "token", (
            f"numbers such as {changed!r} that a float would change (a leading zero or over 15 digits); "
            "--column-type NAME=float reads them as numbers"
        )
    return "float", "every value is a number"


def _changed_by_float(number):
    mantissa = re.split("[eE]", number.lstrip("+-"))[0]
    digits = mantissa.replace(".", "").lstrip("0")
    return bool(re.match(r"0\d", mantissa)) or len(digits) > 15


def extra_column(table, column, name, options):
    """``(type, values, note)`` of a column that is not an id, rating or time, written as field ``name``."""
    header = table.header[column]
    kind, why = options.column_types.get(header), "as --column-type asks"
    if kind is None:
        kind, why = infer_type(table.columns[column], options.seq_separator)
    if kind == "float":
        values, counts = _float_values(table, column)
    else:
        values, counts = _token_values(table, column, kind, options.seq_separator or RECBOLE_SEQ_SEPARATOR)
    done = "".join(f"; {n} {what}" for what, n in counts.items() if n)
    return kind, values, f"column {header!r} -> {name}:{kind} ({why}{done})"


MISSING = "values pandas reads as missing (NA, null, ...) written empty"
CLEANED = "values cleaned (spaces around, tabs, line breaks or invisible characters removed)"
QUOTED = "values opening with a double quote, which RecBole's reader takes for CSV quoting, written with single quotes"


def _float_values(table, column):
    values, missing = [], 0
    for row, value in enumerate(table.columns[column]):
        value = value.strip()
        if value in NA_VALUES:
            values.append("")
            missing += value != ""
        elif NUMBER.fullmatch(value):
            values.append(value)
        else:
            raise TabularError(
                f"{table.where(row, column)}: {value[:40]!r} is not a number, but the column is read as float "
                "(--column-type); fix the value or read the column as token"
            )
    return values, {MISSING: missing}


def _token_values(table, column, kind, separator):
    """Token (or token_seq) values an atomic file holds as they are: tabs and line breaks become spaces, spaces
    around a value go, a missing value (pandas' NA strings) is written empty, and the double quotes of a value that
    opens with one become single quotes (RecBole's reader would take it for CSV quoting)."""
    values, counts = [], {CLEANED: 0, MISSING: 0, QUOTED: 0}
    for row, raw in enumerate(table.columns[column]):
        value = _clean(raw)
        counts[CLEANED] += value != raw
        if kind == "token_seq":
            value = _sequence(table, row, column, value, separator)
        if value in NA_VALUES:
            counts[MISSING] += value != ""
            value = ""
        if value.startswith('"'):
            value = value.replace('"', "'")
            counts[QUOTED] += 1
        values.append(value)
    return values, counts


def _clean(value):
    for char in SPLITTING:
        value = value.replace(char, " ")
    for char in INVISIBLE:
        value = value.replace(char, "")
    return value.strip()


def _sequence(table, row, column, value, separator):
    parts = [part.strip() for part in value.split(separator)]
    for part in parts:
        if any(char.isspace() for char in part):
            raise TabularError(
                f"{table.where(row, column)}: {part[:40]!r}, one token of the sequence, holds a space, which RecBole "
                f"splits sequences on; remove it, or read the column whole with --column-type "
                f"{table.header[column]}=token"
            )
    return RECBOLE_SEQ_SEPARATOR.join(part for part in parts if part)


# ------------------------------------------------------------------------------------------------ atomic files


def interaction_columns(table, options):
    """The ``.inter`` columns of ``table``: ``user_id``, ``item_id``, ``rating`` and ``timestamp`` where found, then
    every other column."""
    atomic = _prepared(table, options)
    roles = find_columns(table, options)
    _check_role_types(table, options, roles)
    check_ids(table, {roles["user"]: "user id", roles["item"]: "item id"})
    atomic.add(FIELDS["user"], "token", table.columns[roles["user"]])
    atomic.add(FIELDS["item"], "token", table.columns[roles["item"]])
    for role in ("user", "item"):
        atomic.notes.append(f"column {table.header[roles[role]]!r} -> {FIELDS[role]}:token")
    if "rating" in roles:
        atomic.add(FIELDS["rating"], "float", rating_values(table, roles["rating"]))
        atomic.notes.append(f"column {table.header[roles['rating']]!r} -> rating:float")
    if "time" in roles:
        values, note = time_values(table, roles["time"])
        atomic.add(FIELDS["time"], "float", values)
        atomic.notes.append(note)
    _add_extras(table, options, atomic, set(roles.values()), set(atomic.names))
    return atomic


ROLE_TYPES = {"user": "token", "item": "token", "rating": "float", "time": "float"}


def _check_role_types(table, options, roles):
    """``--column-type`` sets the extra columns' types; the user, item, rating and time columns have RecBole's own,
    and one asked otherwise was ignored without a word."""
    for role, column in roles.items():
        header = table.header[column]
        asked = options.column_types.get(header)
        if asked is not None and asked != ROLE_TYPES[role]:
            raise ValueError(
                f"--column-type {header}={asked}: {header!r} is the {role} column, which RecBole reads as "
                f"{ROLE_TYPES[role]}; --column-type sets the other columns' types"
            )


def side_columns(table, options, role, known_ids, taken_names):
    """The ``.user`` or ``.item`` columns of a side table (``role``: user or item): its id column, found as the
    interactions' is, one row per id, then every other column (names apart from ``taken_names``, the .inter's)."""
    atomic = _prepared(table, options)
    column = find_columns(table, options, roles=(role,))[role]
    check_ids(table, {column: f"{role} id"})
    ids = table.columns[column]
    first_row = {}
    for row, value in enumerate(ids):
        if value in first_row:
            raise TabularError(
                f"{table.where(row, column)}: {role} {value!r} again (first on {table.where(first_row[value])}); "
                f"a {role} table holds one row per {role}: merge or remove the repeated rows"
            )
        first_row[value] = row
    atomic.add(FIELDS[role], "token", ids)
    atomic.notes.append(f"column {table.header[column]!r} -> {FIELDS[role]}:token")
    _add_extras(table, options, atomic, {column}, set(taken_names) | {FIELDS[role]})
    unknown = len(first_row.keys() - known_ids)
    absent = len(known_ids - first_row.keys())
    if unknown:
        atomic.notes.append(
            f"{unknown} {role}s of the table have no interaction: RecBole counts them among the {role}s"
            + (" (and ranks them in full evaluation)" if role == "item" else "")
        )
    if absent:
        atomic.notes.append(f"{absent} {role}s with interactions have no row here: RecBole gives them default values")
    return atomic


def _prepared(table, options):
    atomic = AtomicColumns()
    if options.strip_spaces:
        atomic.notes.append(f"{table.path}: spaces removed around {strip_spaces(table)} values (--strip-spaces)")
    return atomic


def _add_extras(table, options, atomic, used, taken):
    for column, header in enumerate(table.header):
        if column in used:
            continue
        name = field_name(header)
        if name in taken:
            raise TabularError(
                f"{table.header_where(column)}: column {header!r} would be written as {name!r}, a name the "
                "dataset's atomic files already use (the id, rating and time columns are written as user_id, "
                "item_id, rating and timestamp); rename it in the header"
            )
        taken.add(name)
        kind, values, note = extra_column(table, column, name, options)
        atomic.add(name, kind, values)
        atomic.notes.append(note)


# ------------------------------------------------------------------------------------------------ settings

PROTOCOL = """\
eval_args:
  split: {{RS: [0.8, 0.1, 0.1]}}
  order: RO
{time_line}  group_by: user
  mode: full
metrics: [Recall, NDCG]
topk: [20]
valid_metric: NDCG@20
"""


def config_text(name, load_col, time_kind=None, rating=False):
    """The YAML written beside a dataset by ``--write-config``: the project's general protocol and the columns
    found (``load_col``); ``time_kind`` (``times`` or ``positions``) offers ``order: TO`` as a commented
    alternative."""
    import json

    lines = [
        f"# {name}: settings written by `python -m recbole_mgformer.data.importer --write-config` beside its atomic",
        "# files. The project's general protocol (the MGFormer paper's, as the leaderboards under results/ use it):",
        "# each user's interactions split at random 8:1:1, every item ranked (full), Recall and NDCG at 20, the epoch",
        "# with the best valid NDCG@20 tested. Every row of the .inter file counts as an interaction.",
    ]
    if rating:
        lines.append("# To keep only ratings of 4 and more as interactions: val_interval: {rating: '[4,inf)'}")
    lines.append("load_col:")
    lines += [
        f"  {suffix}: [{', '.join(json.dumps(column) for column in columns)}]" for suffix, columns in load_col.items()
    ]
    time_line = ""
    if time_kind:
        what = "times" if time_kind == "times" else "positions in the source (its order)"
        time_line = (
            f"  # order: TO   # chronological instead: each user's interactions sorted by timestamp ({what}),\n"
            "  #               the oldest 80% for training, the newest 10% for test\n"
        )
    return "\n".join(lines) + "\n" + PROTOCOL.format(time_line=time_line)
