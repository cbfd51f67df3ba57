"""Which user and item ids RecBole would read otherwise than they are written.

RecBole reads atomic files with ``pandas.read_csv`` and its defaults: a token that pandas takes for a missing value
(``NA``, ``null``, ``None``, ``nan``, an empty field, ...) loses its row, a token starting with a double quote opens
a CSV quotation that can swallow the following lines, a tab or line break splits the line, whitespace around a
token makes another token (``' 196'`` is not ``'196'``), and ``[PAD]`` is the token RecBole gives its padding id.
The importer refuses such ids, naming the file, line and column; other columns are cleaned (see ``tabular``).
"""

try:  # the strings pandas reads as missing by default (keep_default_na), from pandas itself
    from pandas._libs.parsers import STR_NA_VALUES as _PANDAS_NA_VALUES
except ImportError:  # a private name: kept in step with the fallback below
    _PANDAS_NA_VALUES = ()

# pandas 2.2's list, for a pandas that no longer exports it
FALLBACK_NA_VALUES = frozenset(
    {
        "",
        "#N/A",
        "#N/A N/A",
        "#NA",
        "-1.#IND",
        "-1.#QNAN",
        "-NaN",
        "-nan",
        "1.#IND",
        "1.#QNAN",
        "<NA>",
        "N/A",
        "NA",
        "NULL",
        "NaN",
        "None",
        "n/a",
        "nan",
        "null",
    }
)
NA_VALUES = frozenset(_PANDAS_NA_VALUES) | FALLBACK_NA_VALUES
PADDING_TOKEN = "[PAD]"  # RecBole's id 0 of every token field
SPLITTING = {"\t": "a tab", "\n": "a line break", "\r": "a carriage return"}
INVISIBLE = {"\0": "a NUL byte", "\ufeff": "a byte-order mark (U+FEFF)"}


def token_problem(value):
    """Why RecBole would not read ``value`` back as this id, and what to do, or None when it would."""
    if value == "":
        return "is empty; every row needs one: fill it in or remove the row"
    if value in NA_VALUES:
        return (
            f"is {value!r}, which RecBole's reader (pandas) takes for a missing value, dropping the row; rename such "
            f"ids in the source (e.g. give every id a prefix: u_{value}) or remove those rows"
        )
    if value == PADDING_TOKEN:
        return f"is {value!r}, RecBole's padding token, which would share the padding id; rename it in the source"
    if value.startswith('"'):
        return (
            f"{value[:40]!r} starts with a double quote, which RecBole's reader (pandas) takes for CSV quoting; "
            "remove the quote from the id in the source"
        )
    for char, what in {**SPLITTING, **INVISIBLE}.items():
        if char in value:
            return f"{value[:40]!r} holds {what}, which an atomic file cannot hold in an id; remove it in the source"
    if value != value.strip():
        return (
            f"{value[:40]!r} has whitespace around it, so RecBole would read an id apart from {value.strip()!r}; "
            "pass --strip-spaces to remove spaces around values, or fix the source"
        )
    return None
