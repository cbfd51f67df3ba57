import collections
import logging
import re

import numpy as np
import pandas as pd
import pytest

from recbole_mgformer import run_recommender
from recbole_mgformer.data import AtomicFileError, validate_atomic_file, validate_dataset_files
from recbole_mgformer.data.tokens import NA_VALUES


@pytest.mark.parametrize(
    "content, message",
    [
        ("user_id:token\titem_id\n1\t2\n", r"bad.inter:1: column 2 header 'item_id' must be 'name:type'"),
        ("user_id:token\titem_id:integer\n1\t2\n", r":1: column 2 header 'item_id:integer'"),
        ("user_id:token\titem_id:token\n1\t2\n3\t4\t5\n", r"bad.inter:3: 3 columns where the header has 2"),
        ("user_id:token item_id:token\n1 2\n", r":1: column 1 header 'user_id:token item_id:token'"),
        (
            "user_id:token\titem_id:token\trating:float\n1\t2\t4\n1\t3\tfive\n",
            r":3: column 3 \(rating\) is declared float in the header but holds 'five'; declare it ':token'",
        ),
        (
            "user_id:token\trating:float\n1\tNA\n",
            r":2: column 2 \(rating\) is declared float .*'NA'; leave the field empty",
        ),
        # a float_seq field is named as declared, with the form its values take
        (
            "user_id:token\tvec:float_seq\n1\t0.5 x 1\n",
            r":2: column 2 \(vec\) is declared float_seq in the header but holds '0\.5 x 1'; a float_seq value is "
            r"numbers separated by seq_separator ' ' \(e\.g\. '0\.5 1 2\.5'\), and 'x' is not a number; .*':token_seq'",
        ),
        (
            "user_id:token\tvec:float_seq\n1\t1 NA\n",
            r":2: column 2 \(vec\) is declared float_seq .*'NA' is not a number",
        ),
        ("", r":1: the file is empty"),
        # ' 196' and '196' would be two users: the old validator let them through
        (
            "user_id:token\titem_id:token\n196\t2\n 196\t3\n",
            r"bad.inter:3: column 1 \(user_id\) holds ' 196', with "
            r"whitespace around the token.*apart from '196'",
        ),
        ("user_id:token\titem_id:token\n1\t2 \n", r":2: column 2 \(item_id\) holds '2 '"),
        ("user_id:token\ttags:token_seq\n1\ta\u00a0 b\n", r":2: column 2 \(tags\) holds 'a\\xa0'"),
        # a header split by another separator: an atomic file wants field_separator, a plain table the importer
        (
            "user_id:token,item_id:token\n1,2\n",
            r"columns separated by '\\t'; the header is split by ',': set field_separator: ','",
        ),
        ("user;item\n1;2\n", r"the header holds ';', as a CSV does: .*importer --format csv --separator ';'"),
        ("user,item\n1,2\n", r"the header holds ',', as a CSV does: .*importer --format csv \(docs"),
    ],
)
def test_malformed_files_name_the_file_line_and_fix(tmp_path, content, message):
    path = tmp_path / "bad.inter"
    path.write_text(content)
    with pytest.raises(AtomicFileError, match=message):
        validate_atomic_file(path)


def test_a_well_formed_file_passes(tmp_path):
    path = tmp_path / "good.inter"
    path.write_text("user_id:token\titem_id:token\trating:float\ttags:token_seq\n1\t2\t4.5\ta b\n1\t3\t\t\n")
    validate_atomic_file(path)


def test_float_seq_fields_are_numbers_split_by_the_seq_separator_and_errors_say_so(tmp_path):
    """The error named a float_seq column 'declared float', and not the separator its numbers are split by."""
    path = tmp_path / "vec.inter"
    path.write_text("user_id:token\tvec:float_seq\ttags:token_seq\n1\t0.5|1|-2e3\ta|b\n2\t\t\n")
    assert validate_atomic_file(path, seq_separator="|").rows == 2
    path.write_text("user_id:token\tvec:float_seq\n1\t0.5 1\n")  # spaces where seq_separator is '|'
    with pytest.raises(AtomicFileError) as error:
        validate_atomic_file(path, seq_separator="|")
    assert str(error.value) == (
        f"{path}:2: column 2 (vec) is declared float_seq in the header but holds '0.5 1'; a float_seq value is "
        "numbers separated by seq_separator '|' (e.g. '0.5|1|2.5'), and '0.5 1' is not a number; fix the value, "
        "leave the field empty for a missing value, or declare it ':token_seq'"
    )
    path.write_text("user_id:token\ttags:token_seq\n1\ta| b\n")  # token_seq: the token, not a type, is named
    with pytest.raises(AtomicFileError, match=r":2: column 2 \(tags\) holds ' b', with whitespace around the token"):
        validate_atomic_file(path, seq_separator="|")


def test_the_runner_rejects_a_malformed_dataset_before_training(tmp_path):
    folder = tmp_path / "data" / "broken"
    folder.mkdir(parents=True)
    (folder / "broken.inter").write_text("user_id:token\titem_id:token\n1\t2\n1\n")
    with pytest.raises(AtomicFileError, match=r"broken.inter:3: 1 columns where the header has 2"):
        run_recommender("MGFormer", "broken", config_dict={"data_path": str(tmp_path / "data")})


def test_the_runner_explains_a_missing_dataset(tmp_path):
    with pytest.raises(FileNotFoundError, match="dataset folder .* does not exist"):
        run_recommender("MGFormer", "nowhere", config_dict={"data_path": str(tmp_path)})


@pytest.mark.parametrize(
    ("typo", "meant"), [("ml-100", "ml-100k"), ("gowala", "gowalla"), ("yelp-2018", "yelp2018"), ("mine_", "mine")]
)
def test_a_misspelt_dataset_gets_the_close_names(tmp_path, typo, meant):
    (tmp_path / "mine").mkdir()  # a user's own dataset beside the one asked for
    with pytest.raises(FileNotFoundError, match=rf"does not exist: .*; did you mean [^?]*\b{meant}\b"):
        validate_dataset_files(settings(tmp_path, name=typo))


def test_a_dataset_like_none_gets_no_suggestion(tmp_path):
    with pytest.raises(FileNotFoundError) as raised:
        validate_dataset_files(settings(tmp_path, name="nowhere"))
    assert "did you mean" not in str(raised.value)


def latin1_dataset(folder, name="latin"):
    """A dataset whose item names are latin-1 bytes (``café``), not UTF-8."""
    (folder / name).mkdir(parents=True)
    lines = ["user_id:token\titem_id:token"] + [
        f"u{u}\t{item}{(u + k) % 12}" for u in range(20) for k in range(6) for item in ("caf\xe9",)
    ]
    (folder / name / f"{name}.inter").write_bytes(("\n".join(lines) + "\n").encode("latin-1"))
    return folder


def test_a_file_in_another_encoding_is_named_by_file_and_line(tmp_path):
    path = latin1_dataset(tmp_path) / "latin" / "latin.inter"
    with pytest.raises(
        AtomicFileError,
        match=r"latin.inter:2: byte 7 of the line \(b'\\xe9'\) is not utf-8; set "
        r"the encoding option .*--encoding=latin-1",
    ):
        validate_atomic_file(path)
    assert validate_atomic_file(path, encoding="latin-1").rows == 120


def test_the_runner_honours_recboles_encoding_option(tmp_path):
    data = latin1_dataset(tmp_path / "data")
    settings = {
        "data_path": str(data),
        "epochs": 1,
        "show_progress": False,
        "state": "WARNING",
        "metrics": ["Recall"],
        "topk": [5],
        "valid_metric": "Recall@5",
    }
    with pytest.raises(AtomicFileError, match="latin.inter:2: .* is not utf-8"):
        run_recommender("Pop", "latin", config_dict=settings, saved=False)
    result = run_recommender("Pop", "latin", config_dict={**settings, "encoding": "latin-1"}, saved=False)
    assert 0 <= result["test_result"]["recall@5"] <= 1


def test_an_interaction_file_with_a_header_only_is_named(tmp_path):
    folder = tmp_path / "data" / "hollow"
    folder.mkdir(parents=True)
    (folder / "hollow.inter").write_text("user_id:token\titem_id:token\n")
    with pytest.raises(AtomicFileError, match=r"hollow.inter: the file has a header but no interactions"):
        run_recommender("BPR", "hollow", config_dict={"data_path": str(tmp_path / "data")})


def test_repeated_pairs_are_counted_within_and_across_files(tmp_path):
    first, second = tmp_path / "a.inter", tmp_path / "b.inter"
    first.write_text("user_id:token\titem_id:token\trating:float\n1\t2\t5\n1\t2\t4\n2\t2\t3\n")
    second.write_text("item_id:token\tuser_id:token\n2\t1\n3\t1\n")
    seen = set()
    assert validate_atomic_file(first, pair_fields=("user_id", "item_id"), seen_pairs=seen) == (3, 1)
    assert validate_atomic_file(second, pair_fields=("user_id", "item_id"), seen_pairs=seen) == (2, 1)
    assert validate_atomic_file(first) == (3, 0)  # no pair fields: nothing counted


def test_a_byte_order_mark_reads_as_utf8_and_trains_as_without_it(tmp_path):
    from conftest import TINY_CONFIG, write_interactions

    data = write_interactions(tmp_path / "data")
    inter = data / "tiny" / "tiny.inter"
    (data / "marked").mkdir()
    (data / "marked" / "marked.inter").write_bytes(b"\xef\xbb\xbf" + inter.read_bytes())
    settings = {**TINY_CONFIG, "data_path": str(data), "epochs": 1}
    plain = run_recommender("BPR", "tiny", config_dict=settings, saved=False)
    marked = run_recommender("BPR", "marked", config_dict=settings, saved=False)
    assert marked["test_result"] == plain["test_result"]  # the same users and items, not a '\ufeffuser_id' column


@pytest.mark.parametrize("inserted, what", [("\ufeff", "a byte-order mark"), ("\0", "a NUL byte")])
def test_an_invisible_character_inside_the_file_is_named(tmp_path, inserted, what):
    """Two files saved with a byte-order mark, concatenated: user '\\ufeffu3' would be a user of its own."""
    path = tmp_path / "joined.inter"
    path.write_text(f"user_id:token\titem_id:token\nu1\ti1\nu3\t{inserted}i2\n")
    with pytest.raises(AtomicFileError, match=f"joined.inter:3: column 2 holds {what}"):
        validate_atomic_file(path)


# ------------------------------------------------------------------------------------------------ what RecBole reads

NA_LIKE = sorted(NA_VALUES - {""})  # every string pandas reads as missing by default
HEADER = "user_id:token\titem_id:token\n"


def write_dataset(folder, files, name="ds"):
    """``files``: ``{suffix: text}`` of a dataset ``name`` under ``folder``; returns the data_path."""
    (folder / name).mkdir(parents=True, exist_ok=True)
    for suffix, text in files.items():
        (folder / name / f"{name}.{suffix}").write_text(text)
    return folder


def settings(folder, name="ds", **values):
    """The settings validate_dataset_files reads, as RecBole's Config gives them (None for a key not set)."""
    return collections.defaultdict(
        lambda: None,
        {
            "data_path": str(folder / name),
            "dataset": name,
            "field_separator": "\t",
            "seq_separator": " ",
            "USER_ID_FIELD": "user_id",
            "ITEM_ID_FIELD": "item_id",
            "TIME_FIELD": "timestamp",
            "LIST_SUFFIX": "_list",
            **values,
        },
    )


@pytest.mark.parametrize("token", NA_LIKE)
@pytest.mark.parametrize("column, field", [(1, "user_id"), (2, "item_id")])
def test_an_id_pandas_reads_as_missing_is_named_with_the_fix(tmp_path, token, column, field):
    row = [f"u{token}", f"i{token}"]
    row[column - 1] = token
    data = write_dataset(tmp_path, {"inter": HEADER + "u1\ti1\n" + "\t".join(row) + "\n"})
    with pytest.raises(
        AtomicFileError,
        match=rf"ds.inter:3: column {column} \({field}, an id\) holds {re.escape(repr(token))}, which RecBole's "
        r"reader \(pandas\) takes for a missing value.*rename the token",
    ):
        validate_dataset_files(settings(data))


@pytest.mark.parametrize(
    "rows, line, column",
    [
        ("u1\t\n", 3, 2),  # an empty item
        ("\ti2\n", 3, 1),  # an empty user
        ("\ti2\nu3\t\nu4\ti4\n", 3, 1),  # RecBole dropped the wrong line and bound u3 to the padding item
    ],
)
def test_an_empty_id_is_an_error(tmp_path, rows, line, column):
    data = write_dataset(tmp_path, {"inter": HEADER + "u1\ti1\n" + rows})
    with pytest.raises(AtomicFileError, match=rf"ds.inter:{line}: column {column} \(\w+, an id\) is empty"):
        validate_dataset_files(settings(data))


@pytest.mark.parametrize(
    "suffix, text, message",
    [
        ("user", "user_id:token\tage:float\nNA\t3\n", r"ds.user:2: column 1 \(user_id, an id\) holds 'NA'"),
        ("item", "item_id:token\tgenre:token\n\tdrama\n", r"ds.item:2: column 1 \(item_id, an id\) is empty"),
        ("item", "item_id:token\tgenre:token\n[PAD]\tdrama\n", r"ds.item:2: .*RecBole's padding token"),
    ],
)
def test_the_id_columns_of_user_and_item_files_are_checked_too(tmp_path, suffix, text, message):
    data = write_dataset(tmp_path, {"inter": HEADER + "u1\ti1\n", suffix: text})
    with pytest.raises(AtomicFileError, match=message):
        validate_dataset_files(settings(data))


def test_a_file_recbole_does_not_load_is_not_held_to_its_reading(tmp_path):
    data = write_dataset(tmp_path, {"inter": HEADER + "u1\ti1\n", "user": "user_id:token\nNA\n"})
    assert validate_dataset_files(settings(data, load_col={"inter": ["user_id", "item_id"]})) == 0
    with pytest.raises(AtomicFileError, match="ds.user:2"):
        validate_dataset_files(settings(data, load_col={"inter": ["user_id", "item_id"], "user": ["user_id"]}))


def test_a_sequence_of_item_ids_that_pandas_reads_as_missing_is_an_error(tmp_path):
    header = "user_id:token\titem_id_list:token_seq\titem_id:token\n"
    data = write_dataset(tmp_path, {"train.inter": header + "u1\ti1 i2\ti3\nu2\tNA\ti3\n"})
    with pytest.raises(AtomicFileError, match=r"ds.train.inter:3: column 2 \(item_id_list, an id\) holds 'NA'.*empty"):
        validate_dataset_files(settings(data, benchmark_filename=["train"]))


@pytest.mark.parametrize(
    "content, message",
    [
        (HEADER + "u1\ti1\n\t\nu2\ti2\n", r":3: the line holds only separators"),
        (HEADER + "u1\ti1\ru2\n", r":2: column 2 holds a carriage return inside the line"),
        (HEADER.replace("\n", "\r") + "u1\ti1\r", r":1: the header holds a carriage return"),
        (HEADER + '"u1\ti1\nu2"\ti2\n', r":2: column 1 starts with a double quote .*CSV quoting"),
        (HEADER + 'u1\t"i1"\n', r":2: column 2 starts with a double quote"),
        ("user_id:token\titem_id:token\titem_id:token\nu1\ti1\ti2\n", r":1: column 3 repeats the name 'item_id'"),
        ('"user_id:token"\titem_id:token\nu1\ti1\n', r":1: column 1 header .* holds a double quote"),
        ("user_id:token\titem_id:token", r":1: the file ends inside its header line"),
        (HEADER + "u1\ti1\nu2\t[PAD]\n", r":3: column 2 \(item_id, an id\) holds '\[PAD\]'"),
        ("user_id:token\titem_id:token\trating:float\nu1\ti1\tinf\n", r":2: column 3 \(rating\) holds 'inf'"),
        ("user_id:token\titem_id:token\trating:float\nu1\ti1\tNA\n", r":2: column 3 .*leave the field empty"),
    ],
)
def test_what_pandas_would_split_join_or_drop_is_named(tmp_path, content, message):
    path = tmp_path / "bad.inter"
    path.write_bytes(content.encode())
    with pytest.raises(AtomicFileError, match=message):
        validate_atomic_file(path, id_fields={"user_id", "item_id"})


def test_a_quote_inside_a_token_reads_as_written(tmp_path):
    """pandas quotes only a field that starts with a quote: ``a"b`` is read as it is, so it is accepted."""
    path = tmp_path / "ok.inter"
    path.write_text(HEADER + 'u"1\ti1"\n')
    assert validate_atomic_file(path, id_fields={"user_id", "item_id"}).rows == 1
    assert read_as_recbole(path)["user_id"].tolist() == ['u"1']


@pytest.mark.parametrize("separator", ["..", "\\t", "|,", "a+"])
def test_a_separator_pandas_would_read_as_a_regular_expression_is_refused(tmp_path, separator):
    data = write_dataset(tmp_path, {"inter": HEADER.replace("\t", separator) + f"u1{separator}i1\n"})
    with pytest.raises(AtomicFileError, match="field_separator .* regular expression"):
        validate_dataset_files(settings(data, field_separator=separator))


def test_a_separator_of_plain_characters_reads_as_written(tmp_path):
    data = write_dataset(tmp_path, {"inter": "user_id:token::item_id:token\nu1::i1\nu2::i:2\n"})
    assert validate_dataset_files(settings(data, field_separator="::")) == 0


@pytest.mark.parametrize(
    "values, message",
    [
        (
            {"USER_ID_FIELD": "uid"},
            r"ds.inter:1: the header has no column 'uid', the USER_ID_FIELD .*set USER_ID_FIELD",
        ),
        ({"ITEM_ID_FIELD": "iid"}, r"no column 'iid', the ITEM_ID_FIELD \(its columns: user_id, item_id\)"),
        (
            {"load_col": {"inter": ["user_id", "item_id", "rating"]}},
            r"ds.inter:1: load_col lists 'rating' for .inter files, but the header has no such column.*load_col",
        ),
        (
            {"eval_args": {"split": {"RS": [0.8, 0.1, 0.1]}, "order": "TO"}},
            r"orders interactions by time .* no column 'timestamp', the TIME_FIELD",
        ),
    ],
)
def test_columns_the_settings_need_must_be_in_the_header(tmp_path, values, message):
    data = write_dataset(tmp_path, {"inter": HEADER + "u1\ti1\n"})
    with pytest.raises(AtomicFileError, match=message):
        validate_dataset_files(settings(data, **values))


def test_a_time_order_needs_a_float_time_field(tmp_path):
    data = write_dataset(tmp_path, {"inter": "user_id:token\titem_id:token\ttimestamp:token\nu1\ti1\t5\n"})
    with pytest.raises(AtomicFileError, match=r"'timestamp' is declared :token.*declare it 'timestamp:float'"):
        validate_dataset_files(settings(data, eval_args={"split": {"LS": "valid_and_test"}, "order": "TO"}))


def read_as_recbole(path, separator="\t"):
    """``path`` read as RecBole 1.2.1's ``Dataset._load_feat`` reads it (every column)."""
    header = open(path, encoding="utf-8").readline()[:-1].split(separator)
    frame = pd.read_csv(
        path,
        delimiter=separator,
        usecols=header,
        dtype={field: np.float64 if field.endswith(":float") else str for field in header},
        encoding="utf-8",
        engine="python",
    )
    frame.columns = [field.split(":")[0] for field in header]
    return frame


def test_a_feature_pandas_reads_as_missing_is_kept_and_said(tmp_path, caplog):
    """A feature token 'None' is RecBole's missing value, as an empty field: legitimate, but logged; the rows are
    the rows RecBole reads."""
    path = tmp_path / "ds.item"
    path.write_text("item_id:token\tgenre:token\ti1\tNone\ni2\t\ni3\tdrama\n".replace("\ti1", "\ni1"))
    with caplog.at_level(logging.WARNING):
        assert validate_atomic_file(path, id_fields={"item_id"}).rows == 3
    assert "column 2 (genre) holds 'None', which RecBole reads as a missing value" in caplog.text
    frame = read_as_recbole(path)
    assert len(frame) == 3 and frame["genre"].isna().tolist() == [True, True, False]


def test_the_runner_stops_at_an_id_pandas_would_drop(tmp_path):
    from conftest import TINY_CONFIG, write_interactions

    data = write_interactions(tmp_path / "data")
    inter = data / "tiny" / "tiny.inter"
    inter.write_text(inter.read_text() + "NA\ti3\n")
    with pytest.raises(AtomicFileError, match=r"tiny.inter:482: column 1 \(user_id, an id\) holds 'NA'"):
        run_recommender("Pop", "tiny", config_dict={**TINY_CONFIG, "data_path": str(data)}, saved=False)


@pytest.mark.parametrize(
    "field, header", [("user_id", "user_id:float\titem_id:token\n"), ("item_id", "user_id:token\titem_id:float\n")]
)
def test_an_id_column_declared_a_number_is_named(tmp_path, field, header):
    """RecBole remaps ids as tokens: a float id column stopped in numpy ("need at least one array to concatenate")."""
    data = write_dataset(tmp_path, {"inter": header + "1\t2\n3\t4\n"})
    with pytest.raises(AtomicFileError, match=rf"ds.inter:1: the \w+ '{field}' is declared :float, .*'{field}:token'"):
        validate_dataset_files(settings(data))


def test_one_column_for_users_and_items_is_named(tmp_path):
    data = write_dataset(tmp_path, {"inter": HEADER + "u1\ti1\n"})
    with pytest.raises(AtomicFileError, match=r"USER_ID_FIELD and ITEM_ID_FIELD both name the column 'item_id'"):
        validate_dataset_files(settings(data, USER_ID_FIELD="item_id"))


def test_split_files_benchmark_filename_reads_must_all_be_there(tmp_path):
    """RecBole stopped with "File ds/ds.valid.inter not exist." after reading the others."""
    data = write_dataset(tmp_path, {"inter": HEADER + "u1\ti1\n", "train.inter": HEADER + "u2\ti2\n"})
    with pytest.raises(FileNotFoundError, match=r"benchmark_filename \['train', 'valid'\] reads ds.valid.inter, which"):
        validate_dataset_files(settings(data, benchmark_filename=["train", "valid"]))
    assert validate_dataset_files(settings(data, benchmark_filename=["train"])) == 0
