"""CSV, TSV and Parquet tables through the importer: every row written as given (ids, ratings, real times, other
columns), or a stop naming file, line and column."""

import calendar
import csv
import datetime
import io
import random
import re
import sys

import pandas
import pytest
import yaml

from recbole_mgformer.data.atomic import validate_atomic_file, validate_dataset_files
from recbole_mgformer.data.importer import import_table, main
from recbole_mgformer.data.tabular import TableOptions, TabularError, infer_type
from recbole_mgformer.data.tokens import NA_VALUES, token_problem


def csv_text(header, rows, delimiter=",", quoting=csv.QUOTE_MINIMAL):
    buffer = io.StringIO()
    writer = csv.writer(buffer, delimiter=delimiter, lineterminator="\n", quoting=quoting)
    writer.writerow(header)
    writer.writerows(rows)
    return buffer.getvalue()


def write_csv(path, header, rows, delimiter=",", quoting=csv.QUOTE_MINIMAL):
    path.write_text(csv_text(header, rows, delimiter, quoting), encoding="utf-8")
    return path


def atomic_rows(path):
    """``(header fields, rows)`` of an atomic file, split as RecBole's field separator splits it."""
    header, *lines = path.read_text(encoding="utf-8").split("\n")[:-1]
    return header.split("\t"), [line.split("\t") for line in lines]


def read_as_recbole(path):
    """The atomic file as RecBole's reader sees it (pandas, its defaults, the python engine), missing as ''."""
    frame = pandas.read_csv(path, delimiter="\t", dtype=str, engine="python")
    return frame.astype(object).where(frame.notna(), "").values.tolist()


def unix_seconds(iso):
    moment = datetime.datetime.fromisoformat(iso)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.timezone.utc)
    return moment.timestamp()


def generated_interactions(seed=0, n=60):
    """Shuffled rows of user, item, rating, ISO time, a float and a text column (with commas and quotes)."""
    rng = random.Random(seed)
    rows = []
    for k in range(n):
        day = datetime.datetime(2021, 1, 1, tzinfo=datetime.timezone.utc) + datetime.timedelta(hours=7 * k, seconds=k)
        iso = day.strftime("%Y-%m-%dT%H:%M:%S") if k % 3 else day.strftime("%Y-%m-%d %H:%M:%S+00:00")
        title = rng.choice(["Heat, 1995", 'The "Best" one', "plain", "Amélie"])
        rows.append([f"u{k % 9}", f"i{(k * 7) % 23}", str(rng.choice([1, 2.5, 3, 4, 5])), iso, f"{k / 4}", title])
    rng.shuffle(rows)
    return ["user", "item", "rating", "timestamp", "price", "title"], rows


def test_a_generated_csv_imports_with_its_ratings_real_times_and_extra_columns_intact(tmp_path, capsys):
    header, rows = generated_interactions()
    source = write_csv(tmp_path / "interactions.csv", header, rows)
    assert main(["--format", "csv", "--name", "mine", "--output", str(tmp_path / "dataset"), str(source)]) == 0
    out = capsys.readouterr().out
    inter = tmp_path / "dataset" / "mine" / "mine.inter"
    fields, written = atomic_rows(inter)
    assert fields == [
        "user_id:token",
        "item_id:token",
        "rating:float",
        "timestamp:float",
        "price:float",
        "title:token",
    ]
    assert len(written) == len(rows)
    for (user, item, rating, iso, price, title), line in zip(rows, written):  # in the file's order, row for row
        assert line[:3] == [user, item, rating] and float(line[3]) == unix_seconds(iso) and line[4] == price
        assert line[5] == title
    assert read_as_recbole(inter) == [[u, i, r, w[3], p, t] for (u, i, r, _, p, t), w in zip(rows, written)]
    assert validate_atomic_file(inter).rows == len(rows)  # the runner's own checks pass
    assert "column 'timestamp' -> timestamp:float: ISO dates (2021-01-01 00:00:00 to" in out
    assert "column 'price' -> price:float (every value is a number)" in out
    assert "column 'title' -> title:token (values such as" in out
    assert f"{len(rows)} interactions, 9 users, 23 items" in out


def test_recbole_loads_the_imported_csv_with_its_rows_users_items_and_columns(tmp_path):
    from recbole.data import create_dataset

    from recbole_mgformer.quick_start import build_config

    header, rows = generated_interactions()
    source = write_csv(tmp_path / "interactions.csv", header, rows)
    users = write_csv(
        tmp_path / "users.csv", ["user_id", "age", "city"], [[f"u{u}", str(20 + u), "Paris"] for u in range(9)]
    )
    items = write_csv(
        tmp_path / "items.csv", ["item", "genres"], [[f"i{i}", "a|b" if i % 2 else "c"] for i in range(23)]
    )
    argv = ["--format", "csv", "--name", "mine", "--output", str(tmp_path / "dataset"), "--write-config"]
    argv += ["--user-features", str(users), "--item-features", str(items), "--seq-separator", "|", str(source)]
    assert main(argv) == 0
    settings = yaml.safe_load((tmp_path / "dataset" / "mine" / "mine.yaml").read_text())
    assert settings["load_col"] == {
        "inter": ["user_id", "item_id", "rating", "timestamp", "price", "title"],
        "user": ["user_id", "age", "city"],
        "item": ["item_id", "genres"],
    }
    config, _ = build_config(  # the YAML beside the data is the dataset's settings: no --config_files needed
        "BPR", "mine", None, {"data_path": str(tmp_path / "dataset"), "state": "WARNING", "show_progress": False}
    )
    assert config["load_col"] == settings["load_col"] and config["valid_metric"] == "NDCG@20"
    assert validate_dataset_files(config) == 0  # the runner's checks of every atomic file pass, no repeated pairs
    dataset = create_dataset(config)
    assert dataset.inter_num == len(rows)
    assert (dataset.user_num - 1, dataset.item_num - 1) == (9, 23)  # [PAD] aside
    assert dataset.field2type["genres"].value == "token_seq" and dataset.field2type["price"].value == "float"
    times = dataset.inter_feat["timestamp"].tolist()
    users_of = dataset.id2token("user_id", dataset.inter_feat["user_id"].tolist())
    items_of = dataset.id2token("item_id", dataset.inter_feat["item_id"].tolist())
    assert sorted(zip(users_of, items_of, times)) == sorted((u, i, unix_seconds(t)) for u, i, _, t, _, _ in rows)


# ------------------------------------------------------------------------------------------------ columns


@pytest.mark.parametrize(
    "header, roles",
    [
        (["UserID", "ItemId", "Rating", "TS"], ("UserID", "ItemId", "Rating", "TS")),
        (["uid", "iid", "time"], ("uid", "iid", None, "time")),
        (["user_id", "item", "date", "extra"], ("user_id", "item", None, "date")),
    ],
)
def test_columns_are_found_by_their_common_names_in_any_case(tmp_path, header, roles):
    rows = [[f"u{k}", f"i{k}", "4", "1700000000", "x"][: len(header)] for k in range(3)]
    if "date" in header:
        rows = [[f"u{k}", f"i{k}", "2024-01-01", "x"] for k in range(3)]
    import_table("csv", write_csv(tmp_path / "t.csv", header, rows), "t", tmp_path / "data")
    fields, written = atomic_rows(tmp_path / "data" / "t" / "t.inter")
    expected = ["user_id:token", "item_id:token"] + (["rating:float"] if roles[2] else []) + ["timestamp:float"]
    assert fields[: len(expected)] == expected and [line[0] for line in written] == ["u0", "u1", "u2"]


@pytest.mark.parametrize(
    "header, options, message",
    [
        (
            ["who", "what"],
            {},
            r"t\.csv:1: no user column among \['who', 'what'\].*must be a header .*--user COLUMN names",
        ),
        (["user", "what"], {}, r"no item column .*--item COLUMN"),
        (["u1", "i1"], {}, r"t\.csv:1: no user column among \['u1', 'i1'\].*the first line must be a header"),
        (["user", "User_Id", "item"], {}, r"t\.csv:1: columns 'user' and 'User_Id' could each be the user column"),
        (["user", "item", "time", "timestamp"], {}, r"'time' and 'timestamp' could each be the time column; .*--time"),
        (["user", "item"], {"user": "User"}, r"no column 'User' \(--user\) .*did you mean 'user'\?"),
        (["user", "item"], {"item": "user"}, r"'user' cannot be both the user and the item column"),
        (["user", "item", "user"], {}, r"t\.csv:1: column 3: the header repeats the name 'user' of column 1"),
        (["", "user", "item"], {}, r"t\.csv:1: column 1: the column has no name .*index=False"),
        (["user", "item", "user id"], {}, r"column 'user id' would be written as 'user_id'.*rename it"),
    ],
)
def test_header_problems_name_the_file_line_and_fix(tmp_path, header, options, message):
    source = write_csv(tmp_path / "t.csv", header, [[f"v{k}" for k in range(len(header))]])
    with pytest.raises(TabularError, match=message):
        import_table("csv", source, "t", tmp_path / "data", TableOptions(**options))
    assert not (tmp_path / "data").exists()


def test_a_file_in_another_encoding_names_line_and_byte_and_imports_with_its_encoding(tmp_path):
    source = tmp_path / "t.csv"
    source.write_bytes("user,item,title\nu1,i1,caf\xe9\n".encode("latin-1"))
    with pytest.raises(ValueError, match=r"t\.csv:2: byte 10 of the line \(b'\\xe9'\) is not utf-8"):
        import_table("csv", source, "t", tmp_path / "data")
    import_table("csv", source, "t", tmp_path / "data", encoding="latin-1")
    assert atomic_rows(tmp_path / "data" / "t" / "t.inter")[1] == [["u1", "i1", "café"]]


@pytest.mark.parametrize("end", ["\n", "\r\n", "\r"], ids=["LF", "CRLF", "CR"])
def test_lines_ending_in_lf_crlf_or_a_bare_cr_import_alike(tmp_path, end):
    """A file saved with old Mac line ends (a bare carriage return) stopped with the csv module's advice, "new-line
    character seen in unquoted field - do you need to open the file in universal-newline mode?"."""
    text = end.join(["user,item,rating,note", "1,2,5,plain", '3,4,1,"two', 'lines"', "5,6,2,x"]) + end
    source = tmp_path / "t.csv"
    source.write_bytes(text.encode("utf-8"))
    import_table("csv", source, "t", tmp_path / "data")
    assert atomic_rows(tmp_path / "data" / "t" / "t.inter") == (
        ["user_id:token", "item_id:token", "rating:float", "note:token"],
        # the quoted line break cleaned as ever: each of its characters a space
        [["1", "2", "5", "plain"], ["3", "4", "1", "two" + " " * len(end) + "lines"], ["5", "6", "2", "x"]],
    )


@pytest.mark.parametrize("end", ["\r\n", "\r"], ids=["CRLF", "CR"])
def test_errors_in_a_file_of_carriage_returns_name_the_line_an_editor_shows(tmp_path, end):
    source = tmp_path / "t.csv"
    source.write_bytes(end.join(["user,item", "u1,i1", "u2"]).encode() + end.encode())
    with pytest.raises(TabularError, match=r"t\.csv:3: 1 fields where the header \(line 1\) has 2"):
        import_table("csv", source, "t", tmp_path / "data")
    source.write_bytes(end.join(["user,item", "u1,i1", "u2,caf\xe9"]).encode("latin-1"))
    with pytest.raises(ValueError, match=r"t\.csv:3: byte 7 of the line \(b'\\xe9'\) is not utf-8"):
        import_table("csv", source, "t", tmp_path / "data")


@pytest.mark.parametrize("rows", ["u1;i1\n", "u1;i1;4,5\n"])  # a row that a comma splits, or not
def test_a_file_with_another_separator_is_named_as_such(tmp_path, rows):
    source = tmp_path / "t.csv"
    source.write_text("user;item" + (";rating" if rows.count(";") == 2 else "") + "\n" + rows)
    with pytest.raises(TabularError, match=r"t\.csv:1: the header has one column.*it holds ';'.*--separator ';'"):
        import_table("csv", source, "t", tmp_path / "data")


def import_argv(tmp_path, source, *options, fmt="csv"):
    return ["--format", fmt, "--name", "t", "--output", str(tmp_path / "data"), *options, str(source)]


@pytest.mark.parametrize(("fmt", "separator"), [("csv", ";"), ("csv", "|"), ("tsv", ",")])
def test_separator_reads_a_table_split_by_another_character(tmp_path, fmt, separator):
    source = tmp_path / f"t.{fmt}"
    source.write_text(separator.join(["user", "item", "note"]) + "\n" + separator.join(["u1", "i1", "a b"]) + "\n")
    assert main(import_argv(tmp_path, source, "--separator", separator, fmt=fmt)) == 0
    assert atomic_rows(tmp_path / "data" / "t" / "t.inter") == (
        ["user_id:token", "item_id:token", "note:token"],
        [["u1", "i1", "a b"]],
    )


@pytest.mark.parametrize("separator", [";;", "", "a", "7", " ", '"', "\n"])
def test_separator_that_cannot_split_a_table_is_refused(tmp_path, separator, capsys):
    source = tmp_path / "t.csv"
    source.write_text("user,item\nu1,i1\n")
    assert main(import_argv(tmp_path, source, "--separator", separator)) == 2
    assert re.search(r"--separator .*: give one character", capsys.readouterr().err)
    assert not (tmp_path / "data" / "t").exists()


def test_separator_is_for_delimited_tables_only(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["--format", "lightgcn", "--name", "t", "--output", str(tmp_path), "--separator", ";", "x.txt"])
    assert "--separator applies to tables" in capsys.readouterr().err


@pytest.mark.parametrize(
    "text, message",
    [
        ("user,item\nu1,i1\nu2\n", r"t\.csv:3: 1 fields where the header \(line 1\) has 2"),
        ("user,item\nu1,i1\nu2,i2,x\n", r"t\.csv:3: 3 fields where the header"),
        ('user,item,note\nu1,i1,"two\nlines"\nu2,i2\n', r"t\.csv:4: 2 fields"),  # the line, not the record
        ('user,item\nu1,"i1\n', r"t\.csv:2: unexpected end of data; .*quoted whole"),
        ('user,item\nu1,"i1"x\n', r"t\.csv:2: .*quoted whole"),
        ("", r"t\.csv: the file is empty"),
        ("\n\n", r"t\.csv: the file is empty"),
    ],
)
def test_malformed_rows_name_their_line(tmp_path, text, message):
    (tmp_path / "t.csv").write_text(text)
    with pytest.raises(TabularError, match=message):
        import_table("csv", tmp_path / "t.csv", "t", tmp_path / "data")


@pytest.mark.parametrize("token", sorted(NA_VALUES) + ["[PAD]", '"q', " u1", "u1 ", "a\tb", "a\nb", "a\rb", "\ufeffu"])
@pytest.mark.parametrize("column", [0, 1])
def test_ids_recbole_would_read_otherwise_stop_with_file_line_and_column(tmp_path, token, column):
    rows = [["u1", "i1", "x"], ["u2", "i2", "y"], ["u3", "i3", "z"]]
    rows[2][column] = token
    source = write_csv(tmp_path / "t.csv", ["user", "item", "note"], rows, quoting=csv.QUOTE_ALL)  # \r quoted too
    name = ["user", "item"][column]
    line = 4  # the row's first line, even where a quoted id holds a line break
    with pytest.raises(TabularError) as error:
        import_table("csv", source, "t", tmp_path / "data")
    assert str(error.value).startswith(f"{source}:{line}: column {column + 1} ('{name}'): the {name} id ")
    assert token_problem(token) in str(error.value)
    assert not (tmp_path / "data").exists()


def test_spaces_around_ids_are_removed_only_when_asked(tmp_path, capsys):
    source = write_csv(tmp_path / "t.csv", ["user", "item"], [["u1", " i1"], ["u2 ", "i2"]])
    with pytest.raises(
        TabularError, match=r"t\.csv:2: column 2 \('item'\): the item id ' i1' has whitespace .*--strip-spaces"
    ):
        import_table("csv", source, "t", tmp_path / "data")
    assert (
        main(["--format", "csv", "--strip-spaces", "--name", "t", "--output", str(tmp_path / "data"), str(source)]) == 0
    )
    assert atomic_rows(tmp_path / "data" / "t" / "t.inter")[1] == [["u1", "i1"], ["u2", "i2"]]
    assert "spaces removed around 2 values (--strip-spaces)" in capsys.readouterr().out


# ------------------------------------------------------------------------------------------------ times, ratings


@pytest.mark.parametrize(
    "times, written, unit",
    [
        (["1700000000", "1700000500.5"], ["1700000000", "1700000500.5"], "Unix seconds by their size (2023-11-14"),
        (["1700000000000", "1700000500000"], ["1700000000000", "1700000500000"], "Unix milliseconds by their size"),
        (["3", "1"], ["3", "1"], "too small for Unix seconds"),
        (["2023-11-14", "2023-11-14T22:13:20.5+01:00"], ["1699920000", "1699996400.5"], "ISO dates"),
        (["2023-11-14 22:13:20", "2023-11-14T22:13:20Z"], ["1700000000", "1700000000"], "read as UTC"),
        # a time without a zone after one with a zone: pandas read it in that zone
        (["2023-11-14T22:13:20+01:00", "2023-11-14T22:13:20"], ["1699996400", "1700000000"], "read as UTC"),
        (["2023-11-14T22:13:20Z", "2023-11-14 22:13:20"], ["1700000000", "1700000000"], "read as UTC"),
        (["20231114T221320-0100", "2023-11-14T22:13:20"], ["1700003600", "1700000000"], "read as UTC"),
        # beyond pandas' nanosecond bounds (1677 to 2262): year 1 was refused as no date
        (["0001-01-01", "1969-12-31"], ["-62135596800", "-86400"], "(0001-01-01 00:00:00 to 1969-12-31 00:00:00 UTC)"),
        (["9999-12-31", "2023-11-14"], ["253402214400", "1699920000"], "to 9999-12-31 00:00:00 UTC"),
        (["9999-12-31T23:59:59.5Z", "1969-12-31T23:59:59.5"], ["253402300799.5", "-0.5"], "to 9999-12-31 23:59:59"),
        (["1600-02-29T01:00:00+01:00", "2262-04-12"], ["-11670998400", "9223372800"], "(1600-02-29 00:00:00 to"),
    ],
)
def test_times_are_kept_as_numbers_or_turned_from_iso_dates_into_unix_seconds(tmp_path, capsys, times, written, unit):
    source = write_csv(tmp_path / "t.csv", ["user", "item", "time"], [["u1", "i1", times[0]], ["u1", "i2", times[1]]])
    assert main(["--format", "csv", "--name", "t", "--output", str(tmp_path / "data"), str(source)]) == 0
    assert [line[2] for line in atomic_rows(tmp_path / "data" / "t" / "t.inter")[1]] == written
    assert unit in capsys.readouterr().out


@pytest.mark.parametrize(
    "column, values, message",
    [
        ("time", ["1700000000", "2023-11-14"], r"t\.csv:2: column 3 \('time'\): the time '1700000000' is neither"),
        ("time", ["2023-11-14", "14/11/2023"], r"t\.csv:3: column 3 \('time'\): the time '14/11/2023' is neither"),
        ("time", ["2023-02-30", "2023-11-14"], r"t\.csv:2: .*the time '2023-02-30' is neither"),
        ("time", ["2023-11-14", "1700-02-29"], r"t\.csv:3: .*the time '1700-02-29' is neither"),  # no leap day
        ("time", ["0000-01-01", "2023-11-14"], r"t\.csv:2: .*the time '0000-01-01' is neither"),
        ("time", ["2023-11-14", "10000-01-01"], r"t\.csv:3: .*the time '10000-01-01' is neither"),
        ("time", ["0001-01-01T00:00+01:00", "1"], r"t\.csv:2: .*'0001-01-01T00:00\+01:00' falls outside the years 1"),
        ("time", ["1700000000", ""], r"t\.csv:3: column 3 \('time'\): the time is '', a missing value"),
        ("time", ["NaN", "1"], r"t\.csv:2: .*the time is 'NaN', a missing value"),
        ("rating", ["4", "five"], r"t\.csv:3: column 3 \('rating'\): the rating 'five' is not a number"),
        ("rating", ["", "4"], r"t\.csv:2: .*the rating '' is not a number"),
    ],
)
def test_bad_times_and_ratings_name_file_line_and_column(tmp_path, column, values, message):
    source = write_csv(tmp_path / "t.csv", ["user", "item", column], [["u1", "i1", values[0]], ["u2", "i2", values[1]]])
    with pytest.raises(TabularError, match=message):
        import_table("csv", source, "t", tmp_path / "data")


# ------------------------------------------------------------------------------------------------ other columns


@pytest.mark.parametrize(
    "values, separator, kind",
    [
        (["1", "2.5", "-3e4", "", "NA"], None, "float"),
        (["007", "12"], None, "token"),  # a leading zero a float would drop
        (["12345678901234567", "1"], None, "token"),  # more digits than a float keeps
        (["1", "two"], None, "token"),
        (["a|b", "c"], "|", "token_seq"),
        (["a|b", "c"], None, "token"),
        (["", "NA"], None, "token"),
        (["1_000", "2"], None, "token"),  # float() reads it, pandas does not
        (["inf", "1"], None, "token"),
    ],
)
def test_the_type_of_a_column_is_inferred_from_all_its_values(values, separator, kind):
    assert infer_type(values, separator)[0] == kind


def test_other_columns_are_cleaned_and_typed_with_a_note_each(tmp_path, capsys):
    rows = [
        ["u1", "i1", "a|b| c", "1.5", "tab\there", '"quoted" start', "007"],
        ["u2", "i2", "", "NA", "two\nlines", "null", "010"],
        ["u3", "i3", "d", "2", "  spaced  ", "plain", "100"],
    ]
    source = write_csv(tmp_path / "t.csv", ["user", "item", "genres", "price", "note", "quote", "zip"], rows)
    argv = ["--format", "csv", "--name", "t", "--output", str(tmp_path / "data"), "--seq-separator", "|"]
    assert main([*argv, "--column-type", "zip=float", str(source)]) == 0
    out = capsys.readouterr().out
    inter = tmp_path / "data" / "t" / "t.inter"
    fields, _ = atomic_rows(inter)
    assert fields[2:] == ["genres:token_seq", "price:float", "note:token", "quote:token", "zip:float"]
    assert read_as_recbole(inter) == [
        ["u1", "i1", "a b c", "1.5", "tab here", "'quoted' start", "007"],
        ["u2", "i2", "", "", "two lines", "", "010"],
        ["u3", "i3", "d", "2", "spaced", "plain", "100"],
    ]
    assert validate_atomic_file(inter).rows == 3
    assert "column 'note' -> note:token (values such as 'tab\\there' are not numbers; 3 values cleaned" in out
    assert "column 'price' -> price:float (every value is a number; 1 values pandas reads as missing" in out
    assert "column 'zip' -> zip:float (as --column-type asks)" in out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--column-type", "note=float"], r"t\.csv:2: column 3 \('note'\): 'a b\|c' is not a number"),
        (["--column-type", "nothing=float"], r"--column-type names 'nothing', which no table has"),
        (["--seq-separator", "|", "--column-type", "note=token_seq"], r"t\.csv:2: .*'a b', one token of the sequence"),
        # the id columns' types are RecBole's: the option was ignored without a word
        (
            ["--column-type", "user=float"],
            r"--column-type user=float: 'user' is the user column, which RecBole reads as token",
        ),
        (["--column-type", "item=token_seq"], r"'item' is the item column, which RecBole reads as token;"),
    ],
)
def test_column_types_that_cannot_hold_the_values_are_errors(tmp_path, capsys, argv, message):
    source = write_csv(tmp_path / "t.csv", ["user", "item", "note"], [["u1", "i1", "a b|c"]])
    assert main(["--format", "csv", "--name", "t", "--output", str(tmp_path / "data"), *argv, str(source)]) == 2
    assert re.search(message, capsys.readouterr().err)
    assert not (tmp_path / "data").exists()


def test_repeated_pairs_are_kept_counted_and_said_what_the_runner_does(tmp_path, capsys):
    rows = [["u1", "i1"], ["u1", "i1"], ["u2", "i1"], ["u1", "i1"]]
    source = write_csv(tmp_path / "t.csv", ["user", "item"], rows)
    assert main(["--format", "csv", "--name", "t", "--output", str(tmp_path / "data"), str(source)]) == 0
    assert atomic_rows(tmp_path / "data" / "t" / "t.inter")[1] == rows
    out = capsys.readouterr().out
    assert "2 repeated (user, item) pairs kept as separate interactions; the runner removes repeats" in out


# ------------------------------------------------------------------------------------------------ side tables


def test_side_tables_are_written_by_their_id_with_notes_on_ids_they_lack_or_add(tmp_path, capsys):
    source = write_csv(tmp_path / "t.csv", ["userId", "item"], [["u1", "i1"], ["u2", "i2"]])
    users = write_csv(tmp_path / "u.csv", ["userId", "age"], [["u1", "30"], ["u9", "40"]])
    items = write_csv(tmp_path / "i.csv", ["ITEM", "title"], [["i1", "A"], ["i2", "B"]])
    argv = ["--format", "csv", "--name", "t", "--output", str(tmp_path / "data"), "--user", "userId"]
    assert main([*argv, "--user-features", str(users), "--item-features", str(items), str(source)]) == 0
    folder = tmp_path / "data" / "t"
    assert atomic_rows(folder / "t.user") == (["user_id:token", "age:float"], [["u1", "30"], ["u9", "40"]])
    assert atomic_rows(folder / "t.item") == (["item_id:token", "title:token"], [["i1", "A"], ["i2", "B"]])
    out = capsys.readouterr().out
    assert "1 users of the table have no interaction" in out and "1 users with interactions have no row" in out


def test_a_column_of_the_item_table_named_as_one_of_the_user_table_is_an_error(tmp_path):
    source = write_csv(tmp_path / "t.csv", ["user", "item"], [["u1", "i1"]])
    users = write_csv(tmp_path / "u.csv", ["user", "name"], [["u1", "Ann"]])
    items = write_csv(tmp_path / "i.csv", ["item", "name"], [["i1", "Heat"]])
    with pytest.raises(TabularError, match=r"i\.csv:1: column 2: column 'name' would be written as 'name'"):
        import_table("csv", source, "t", tmp_path / "data", user_features=users, item_features=items)
    assert not (tmp_path / "data").exists()


@pytest.mark.parametrize(
    "header, rows, message",
    [
        (
            ["user", "age"],
            [["u1", "3"], ["u1", "4"]],
            r"u\.csv:3: column 1 \('user'\): user 'u1' again \(first on .*u\.csv:2\)",
        ),
        (["who", "age"], [["u1", "3"]], r"u\.csv:1: no user column"),
        (["user", "item_id"], [["u1", "3"]], r"u\.csv:1: column 2: column 'item_id' would be written as 'item_id'"),
        (["user", "NA_"], [["NA", "3"]], r"u\.csv:2: column 1 \('user'\): the user id is 'NA'"),
    ],
)
def test_a_side_table_that_cannot_be_read_by_id_is_an_error_and_nothing_is_written(tmp_path, header, rows, message):
    source = write_csv(tmp_path / "t.csv", ["user", "item"], [["u1", "i1"]])
    users = write_csv(tmp_path / "u.csv", header, rows)
    with pytest.raises(TabularError, match=message):
        import_table("csv", source, "t", tmp_path / "data", user_features=users)
    assert not (tmp_path / "data").exists()


# ------------------------------------------------------------------------------------------------ formats


def test_tsv_and_parquet_import_as_the_csv_does(tmp_path):
    pytest.importorskip("pyarrow")
    header, rows = generated_interactions(n=12)
    write_csv(tmp_path / "t.csv", header, rows)
    write_csv(tmp_path / "t.tsv", header, rows, delimiter="\t")
    frame = pandas.DataFrame(rows, columns=header)
    frame["rating"] = frame["rating"].astype(float)
    frame["timestamp"] = pandas.to_datetime(frame["timestamp"], format="ISO8601", utc=True)
    frame.to_parquet(tmp_path / "t.parquet")
    for fmt in ("csv", "tsv", "parquet"):
        import_table(fmt, tmp_path / f"t.{fmt}", fmt, tmp_path / "data")
    csv_fields, csv_rows = atomic_rows(tmp_path / "data" / "csv" / "csv.inter")
    assert atomic_rows(tmp_path / "data" / "tsv" / "tsv.inter") == (csv_fields, csv_rows)
    fields, parquet_rows = atomic_rows(tmp_path / "data" / "parquet" / "parquet.inter")
    assert fields == csv_fields
    for mine, theirs in zip(parquet_rows, csv_rows):  # ratings written as floats (4.0), times the same seconds
        assert mine[:2] == theirs[:2] and float(mine[2]) == float(theirs[2]) and float(mine[3]) == float(theirs[3])
        assert mine[4:] == theirs[4:]


def test_parquet_without_pyarrow_says_what_to_install(tmp_path, monkeypatch, capsys):
    source = tmp_path / "t.parquet"
    source.write_bytes(b"PAR1")  # not read: the missing reader is named first
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow raises ImportError
    assert main(["--format", "parquet", "--name", "t", "--output", str(tmp_path / "data"), str(source)]) == 2
    assert "pip install pyarrow" in capsys.readouterr().err and not (tmp_path / "data").exists()


def test_a_parquet_file_with_missing_ids_names_the_row(tmp_path):
    pytest.importorskip("pyarrow")
    source = tmp_path / "t.parquet"
    pandas.DataFrame({"user": ["u1", None], "item": [1, 2]}).to_parquet(source)
    with pytest.raises(TabularError, match=r"t\.parquet: row 2: column 1 \('user'\): the user id is empty"):
        import_table("parquet", source, "t", tmp_path / "data")
    pandas.DataFrame({"user": ["u1", "u2"], "item": [1, 2]}).to_parquet(source)
    import_table("parquet", source, "t", tmp_path / "data")
    assert atomic_rows(tmp_path / "data" / "t" / "t.inter")[1] == [["u1", "1"], ["u2", "2"]]


# ------------------------------------------------------------------------------------------------ properties

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, assume, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from recbole_mgformer.data.tabular import NUMBER, Table, time_values  # noqa: E402

CHARACTERS = "ab1 ,;\"'\t\n\r|\x00\ufeffé"
TOKENS = st.one_of(
    st.sampled_from(sorted(NA_VALUES) + ["[PAD]", "u1", "i1", "007", " u1", '"x"']),
    st.text(alphabet=CHARACTERS, max_size=5),
)
RATINGS = st.one_of(
    st.sampled_from(["4", "4.5", " 3 ", "-1e3", ".5", "NA", "", "five", "inf"]), st.text("1.e+", max_size=3)
)
TIMES = st.datetimes(datetime.datetime(1700, 1, 1), datetime.datetime(2200, 1, 1))
ROWS = st.lists(st.tuples(TOKENS, TOKENS, RATINGS, TIMES, TOKENS), min_size=1, max_size=8)
DIALECTS = st.sampled_from(  # \r and \n quoted in all
    [("\n", csv.QUOTE_ALL), ("\r\n", csv.QUOTE_MINIMAL), ("\r", csv.QUOTE_ALL)]
)


def line_breaks(value):
    """The line ends in ``value`` as the importer counts lines: ``\\r\\n``, ``\\n`` or a bare ``\\r``."""
    return len(re.findall("\r\n|\r|\n", value))


def expected_note(value):
    """A column that is not an id, as the importer writes it and RecBole's reader reads it back."""
    cleaned = value
    for char in "\t\n\r":
        cleaned = cleaned.replace(char, " ")
    cleaned = cleaned.replace("\0", "").replace("\ufeff", "").strip()
    if cleaned in NA_VALUES:
        return ""
    return cleaned.replace('"', "'") if cleaned.startswith('"') else cleaned


def first_problem(rows):
    """``(row, column, what)`` of the first value the importer must stop at, rows in order, or None."""
    for row, (user, item, _, _, _) in enumerate(rows):
        for column, value, what in ((0, user, "user id"), (1, item, "item id")):
            if token_problem(value):
                return row, column, what
    for row, (_, _, rating, _, _) in enumerate(rows):
        if not NUMBER.fullmatch(rating.strip()):
            return row, 2, "rating"
    return None


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=ROWS, dialect=DIALECTS)
def test_any_generated_table_imports_to_exactly_its_rows_or_stops_at_the_right_line(tmp_path_factory, rows, dialect):
    folder = tmp_path_factory.mktemp("fuzz")
    terminator, quoting = dialect
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator=terminator, quoting=quoting)
    writer.writerow(["user", "item", "rating", "timestamp", "note"])
    writer.writerows([[u, i, r, t.isoformat(), n] for u, i, r, t, n in rows])
    source = folder / "t.csv"
    source.write_text(buffer.getvalue(), encoding="utf-8", newline="")
    starts = [
        2 + k + sum(line_breaks(value) for row in rows[:k] for value in row[:3] + row[4:]) for k in range(len(rows))
    ]
    problem = first_problem(rows)
    try:
        import_table("csv", source, "t", folder / "data")
    except TabularError as error:
        assert problem is not None, str(error)
        row, column, what = problem
        assert str(error).startswith(f"{source}:{starts[row]}: column {column + 1} ")
        assert f"the {what}" in str(error)
        assert not (folder / "data").exists()
        return
    assert problem is None
    inter = folder / "data" / "t" / "t.inter"
    assert validate_atomic_file(inter, id_fields=("user_id", "item_id")).rows == len(rows)
    read = read_as_recbole(inter)
    epoch = datetime.datetime(1970, 1, 1)
    assert [line[:3] for line in read] == [[u, i, r.strip()] for u, i, r, _, _ in rows]
    assert [float(line[3]) for line in read] == [(t - epoch) / datetime.timedelta(seconds=1) for _, _, _, t, _ in rows]
    assert [line[4] for line in read] == [expected_note(n) for _, _, _, _, n in rows]


UTC = datetime.timezone.utc
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=UTC)
ZONES = st.one_of(
    st.none(), st.integers(-14 * 60, 14 * 60).map(lambda m: datetime.timezone(datetime.timedelta(minutes=m)))
)
ANY_TIMES = st.datetimes(
    datetime.datetime(1, 1, 1), datetime.datetime(9999, 12, 31, 23, 59, 59, 999999), timezones=ZONES
)


def in_utc(moment):
    """``moment`` in UTC (a naive one read as UTC, as the importer reads it), or None beyond the years 1 to 9999."""
    try:
        return moment.replace(tzinfo=moment.tzinfo or UTC).astimezone(UTC)
    except OverflowError:
        return None


def time_table(values):
    return Table("t.csv", ["user", "item", "time"], [["u"] * len(values), ["i"] * len(values), values])


@settings(max_examples=300, deadline=None)
@given(moments=st.lists(ANY_TIMES, min_size=1, max_size=6), sep=st.sampled_from("T "), zulu=st.booleans())
def test_any_iso_date_of_the_years_1_to_9999_becomes_its_unix_seconds(moments, sep, zulu):
    """Years 1 to 9999, inside pandas' bounds (1677 to 2262) or not, in one column: 0001-01-01 was refused."""
    utc = [in_utc(moment) for moment in moments]
    assume(None not in utc)
    values = [moment.isoformat(sep=sep) for moment in moments]
    if zulu:
        values = [re.sub(r"\+00:00$", "Z", value) for value in values]
    written, note = time_values(time_table(values), 2)
    assert [float(value) for value in written] == [(moment - EPOCH) / datetime.timedelta(seconds=1) for moment in utc]
    whole = [moment.microsecond == 0 for moment in utc]
    assert [value.lstrip("-").isdigit() for value in written] == whole  # whole seconds written as integers
    first, last = (
        moment.replace(tzinfo=None).isoformat(sep=" ", timespec="seconds") for moment in (min(utc), max(utc))
    )
    assert f"ISO dates ({first} to {last} UTC) written as Unix seconds" in note


@pytest.mark.parametrize("value", ["0001-01-01", "1969-12-31", "9999-12-31"])
def test_the_edge_dates_become_their_unix_seconds(value):
    written, _ = time_values(time_table([value]), 2)
    assert written == [str(int((datetime.datetime.fromisoformat(value).replace(tzinfo=UTC) - EPOCH).total_seconds()))]


@settings(max_examples=200, deadline=None)
@given(year=st.integers(1, 9999), month=st.integers(1, 12), day=st.integers(29, 32))
def test_a_day_its_month_lacks_is_refused_in_any_year(year, month, day):
    assume(day > calendar.monthrange(year, month)[1])
    value = f"{year:04d}-{month:02d}-{day:02d}"
    with pytest.raises(TabularError, match=rf"t\.csv: row 1: column 3 \('time'\): the time '{value}' is neither"):
        time_values(time_table([value]), 2)


def test_a_utf16_file_without_its_byte_order_mark_is_named(tmp_path, capsys):
    """The codec's own error (3.11: "UTF-16 stream does not start with BOM") came without the file's name."""
    source = write_csv(tmp_path / "t.csv", ["user", "item"], [["u1", "i1"]])
    argv = ["--format", "csv", "--name", "t", "--output", str(tmp_path / "data"), "--encoding", "utf-16", str(source)]
    assert main(argv) == 2
    assert re.search(r"t\.csv: not utf-16 \(.*does not start with BOM\); set the encoding", capsys.readouterr().err)
    assert not (tmp_path / "data").exists()
