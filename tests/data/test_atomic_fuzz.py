"""Generated atomic files either pass the validator and then read, through RecBole's own reader, as exactly the rows,
users and items the validator saw, or stop with a message naming the file and the line."""

import collections
import logging
import math
import re
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from recbole_mgformer.data import AtomicFileError, validate_atomic_file
from recbole_mgformer.data.tokens import NA_VALUES

HEADER = ["user_id:token", "item_id:token", "genre:token", "score:float", "tags:token_seq"]
ID_FIELDS = {"user_id", "item_id"}
# tokens a file from elsewhere holds: pandas' missing values, padding, spaces, quotes, separators, line breaks,
# invisible and non-Latin characters
AWKWARD = [
    "u1",
    "i2",
    "x",
    "é",
    "日本",
    "[PAD]",
    " a",
    "a ",
    "a b",
    '"a',
    'a"b',
    '"a"',
    "a\u2028b",
    "a\x85",
    "\u00a0a",
    "#c",
    "a\\",
    "a\rb",
    "a\tb",
    "a\nb",
    "\ufeffa",
    "\0",
]
plain = st.from_regex(r"[a-z0-9_.:-]{1,4}", fullmatch=True)
awkward = st.one_of(
    st.sampled_from(sorted(NA_VALUES)),
    st.sampled_from(AWKWARD),
    st.text(st.characters(blacklist_categories=("Cs",)), max_size=3),
)
missing_values = st.sampled_from(sorted(NA_VALUES))  # a missing feature: legitimate, read as missing
numbers = st.one_of(
    st.sampled_from(["", "1", "2.5", "nan", "1e3", " 1", "1_0", "-0"]),
    # no subnormals: a run before may have set the processor to flush them (model/precision.py)
    st.floats(allow_nan=False, allow_infinity=False, allow_subnormal=False, width=32).map(repr),
)
odd_numbers = st.sampled_from(["NA", "inf", "x", '"1"', "1,5", "0x1"])
sequences = st.lists(st.sampled_from(["a", "b", "NA", "", "[PAD]", '"c', "é"]), max_size=3).map(" ".join)


@st.composite
def rows(draw):
    """1 to 6 rows, each cell plain or, at a rate drawn for the file (none, some, most), awkward."""
    rate = draw(st.sampled_from([0, 3, 15, 60]))

    def cell(usual, unusual):
        return draw(unusual) if draw(st.integers(0, 99)) < rate else draw(usual)

    return [
        (
            cell(plain, awkward),
            cell(plain, awkward),
            cell(st.one_of(plain, missing_values), awkward),
            cell(numbers, odd_numbers),
            cell(sequences, awkward),
        )
        for _ in range(draw(st.integers(1, 6)))
    ]


FUZZ = settings(max_examples=60, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])


def file_text(draws, line_end, blank_after):
    lines = ["\t".join(HEADER)] + ["\t".join(row) for row in draws]
    if blank_after is not None:
        lines.insert(1 + blank_after % len(draws), "")
    return line_end.join(lines) + line_end


def validators_rows(text):
    """The rows as the validator reads them: lines split at \\n, their line end removed, blank lines skipped."""
    lines = [line.rstrip("\r\n") for line in text.split("\n")[1:]]
    return [line.split("\t") for line in lines if line]


class ReaderOnly:
    """What RecBole 1.2.1's ``Dataset._load_feat`` reads of its Dataset: the reader runs as RecBole's own code."""

    def __init__(self):
        self.config = collections.defaultdict(
            lambda: None, {"field_separator": "\t", "seq_separator": " ", "encoding": "utf-8"}
        )
        self.logger = logging.getLogger()
        self.field2source, self.field2type, self.field2seqlen, self.field2bucketnum = {}, {}, {}, {}

    def _get_load_and_unload_col(self, source):
        return None, None


def read_by_recbole(path):
    from recbole.data.dataset import Dataset
    from recbole.utils import FeatureSource

    import recbole_mgformer.integration.registry  # noqa: F401  (RecBole repaired for this stack, as every run has it)

    return Dataset._load_feat(ReaderOnly(), str(path), FeatureSource.INTERACTION)


def missing(value):
    return value is None or (isinstance(value, float) and math.isnan(value))


def assert_read_as_validated(frame, expected):
    assert len(frame) == len(expected)
    assert frame["user_id"].tolist() == [row[0] for row in expected]
    assert frame["item_id"].tolist() == [row[1] for row in expected]
    for got, row in zip(frame.itertuples(index=False), expected):
        assert missing(got.genre) if row[2] in NA_VALUES else got.genre == row[2]
        score = float(row[3]) if row[3] not in NA_VALUES else float("nan")
        # pandas' own float parser may differ from Python's in the last binary digit
        assert (missing(got.score) and math.isnan(score)) or math.isclose(got.score, score, rel_tol=1e-12)
        tags = [] if row[4] in NA_VALUES else [tag for tag in row[4].split(" ") if tag]
        assert list(got.tags) == tags


@FUZZ
@given(rows(), st.sampled_from(["\n", "\r\n"]), st.none() | st.integers(0, 5))
def test_a_file_the_validator_accepts_reads_as_it_was_validated(draws, line_end, blank_after):
    text = file_text(draws, line_end, blank_after)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "fuzz.inter"
        path.write_bytes(text.encode("utf-8"))
        try:
            stats = validate_atomic_file(path, id_fields=ID_FIELDS)
        except AtomicFileError as error:
            assert re.match(rf"{re.escape(str(path))}:\d+: ", str(error)), str(error)
            event("refused")
            return
        event("accepted")
        expected = validators_rows(text)
        assert stats.rows == len(expected)
        assert_read_as_validated(read_by_recbole(path), expected)


@pytest.fixture(scope="module")
def fuzz_config(tmp_path_factory):
    """A Config for the dataset ``fuzz`` (its files rewritten by each example), read with every column."""
    from recbole_mgformer.quick_start import build_config

    data = tmp_path_factory.mktemp("data")
    (data / "fuzz").mkdir()
    (data / "fuzz" / "fuzz.inter").write_text("\t".join(HEADER) + "\nu\ti\tg\t1\ta\n")
    load_col = {"inter": [field.split(":")[0] for field in HEADER]}
    config, _ = build_config(
        "Pop", "fuzz", config_dict={"data_path": str(data), "load_col": load_col, "state": "ERROR"}
    )
    return config


@FUZZ
@given(rows(), st.sampled_from(["\n", "\r\n"]))
def test_an_accepted_file_builds_the_dataset_of_its_users_items_and_rows(fuzz_config, draws, line_end):
    """Through RecBole's ``create_dataset``: its interactions, users and items are those the validator saw (RecBole
    drops a row with a missing user or item: none may pass)."""
    from recbole_mgformer.data import validate_dataset_files
    from recbole_mgformer.safety import create_dataset

    text = file_text(draws, line_end, None)
    path = Path(fuzz_config["data_path"]) / "fuzz.inter"
    path.write_bytes(text.encode("utf-8"))
    try:
        validate_dataset_files(fuzz_config)
    except AtomicFileError as error:
        assert re.match(rf"{re.escape(str(path))}:\d+: ", str(error)), str(error)
        event("refused")
        return
    event("accepted")
    expected = validators_rows(text)
    dataset = create_dataset(fuzz_config)
    assert dataset.inter_num == len(expected)
    assert set(dataset.field2id_token["user_id"][1:]) == {row[0] for row in expected}
    assert set(dataset.field2id_token["item_id"][1:]) == {row[1] for row in expected}
    users = dataset.field2id_token["user_id"][np.asarray(dataset.inter_feat["user_id"])]
    assert sorted(users) == sorted(row[0] for row in expected)
