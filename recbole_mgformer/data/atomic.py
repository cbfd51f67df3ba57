"""Checks of RecBole atomic files before RecBole reads them.

RecBole's reader fills short rows with NaN and stops with a pandas message on long ones; a
wrong header type surfaces far from its cause. These checks name the file, the line and the fix.
"""

import os

ATOMIC_TYPES = ("token", "token_seq", "float", "float_seq")
ATOMIC_SUFFIXES = ("inter", "user", "item", "kg", "link", "net")


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


def validate_atomic_file(path, separator="\t", seq_separator=" "):
    """Raise :class:`AtomicFileError` at the first malformed line of a RecBole atomic file."""
    with open(path, encoding="utf-8") as handle:
        header = handle.readline()
        if not header.strip():
            raise AtomicFileError(f"{path}:1: the file is empty; the first line must be a header such as "
                                  "'user_id:token<TAB>item_id:token'")
        types = _parse_header(path, header, separator)
        float_columns = [i for i, t in enumerate(types) if t == "float"]
        float_seq_columns = [i for i, t in enumerate(types) if t == "float_seq"]
        for number, line in enumerate(handle, start=2):
            line = line.rstrip("\r\n")
            if not line:
                continue
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


def validate_dataset_files(config):
    """Check every atomic file RecBole will read for ``config``'s dataset."""
    data_path, dataset = config["data_path"], config["dataset"]
    if not os.path.isdir(data_path):
        raise FileNotFoundError(
            f"dataset folder {data_path!r} does not exist: put the atomic files of {dataset!r} "
            f"({dataset}.inter, ...) there, or set data_path to the folder that holds the '{dataset}' folder"
        )
    benchmarks = config["benchmark_filename"] or []
    names = [f"{dataset}.{suffix}" for suffix in ATOMIC_SUFFIXES]
    names += [f"{dataset}.{part}.inter" for part in benchmarks]
    present = [name for name in names if os.path.isfile(os.path.join(data_path, name))]
    if not any(name.endswith(".inter") for name in present):
        raise FileNotFoundError(
            f"no interaction file in {data_path!r}: expected {dataset}.inter"
            + (f" or {', '.join(n for n in names if n.endswith('.inter') and n.count('.') > 1)}" if benchmarks else "")
        )
    for name in present:
        validate_atomic_file(os.path.join(data_path, name), config["field_separator"], config["seq_separator"])
