import pytest

from recbole_mgformer.data.importer import SourceFormatError, import_merged, import_presplit, main, read_source
from recbole_mgformer.defaults import dataset_config_file
from recbole_mgformer.quick_start import build_config, prepare


def write(path, text):
    path.write_text(text)
    return path


def rows(path):
    lines = path.read_text().splitlines()
    return lines[0], [line.split("\t") for line in lines[1:]]


def test_selfrec_files_merge_with_positions_across_files(tmp_path):
    train = write(tmp_path / "train.txt", "u1:007 i2 i3\nu2:i2\n\nu3:\n")
    test = write(tmp_path / "test.txt", "u1:i9\nu2:i2\n")
    summary = import_merged("selfrec", [train, test], "shop", tmp_path / "dataset")
    header, body = rows(tmp_path / "dataset" / "shop" / "shop.inter")
    assert header == "user_id:token\titem_id:token\ttimestamp:float"
    assert body == [
        ["u1", "007", "0"],
        ["u1", "i2", "1"],
        ["u1", "i3", "2"],
        ["u2", "i2", "0"],
        ["u1", "i9", "3"],
        ["u2", "i2", "1"],
    ]
    assert (summary.interactions, summary.users, summary.items) == (6, 2, 4)
    assert summary.repeated_pairs == 1 and summary.users_without_items == 1
    assert "1 repeated (user, item) pairs kept" in str(summary) and "1 users listed without items" in str(summary)


@pytest.mark.parametrize(
    "fmt, text",
    [
        ("lightgcn", "0 5 6\n1 5\n"),
        ("pairs", "0\t5\n0 6\n1\t 5\n"),
    ],
)
def test_lightgcn_and_pair_formats_read_the_same_interactions(tmp_path, fmt, text):
    pairs, empty = read_source(write(tmp_path / "f.txt", text), fmt)
    assert pairs == [("0", "5"), ("0", "6"), ("1", "5")] and empty == 0


@pytest.mark.parametrize(
    "fmt, text, message",
    [
        ("selfrec", "u1:i1\nu2 i2 i3\n", r"f\.txt:2: expected 'user:item item \.\.\.' \(selfrec format\)"),
        ("selfrec", "u1:i1\n:i2\n", r"f\.txt:2: expected 'user:item"),
        ("pairs", "u1 i1\nu1 i2 5.0\n", r"f\.txt:2: expected 2 columns 'user item' \(pairs format\), got 3"),
    ],
)
def test_bad_lines_are_reported_with_file_and_line(tmp_path, fmt, text, message):
    with pytest.raises(SourceFormatError, match=message):
        read_source(write(tmp_path / "f.txt", text), fmt)


def test_presplit_writes_recbole_benchmark_files(tmp_path):
    splits = {s: write(tmp_path / f"{s}.tsv", f"u1\t{s}1\nu2\t{s}2\n") for s in ("train", "valid", "test")}
    summary = import_presplit("pairs", splits, "mine", tmp_path / "dataset")
    for split in ("train", "valid", "test"):
        header, body = rows(tmp_path / "dataset" / "mine" / f"mine.{split}.inter")
        assert header == "user_id:token\titem_id:token" and body == [["u1", f"{split}1"], ["u2", f"{split}2"]]
    assert summary.interactions == 6
    with pytest.raises(ValueError, match="missing: --valid"):
        import_presplit("pairs", {"train": splits["train"], "test": splits["test"]}, "mine", tmp_path)


def test_command_line_reports_errors_and_summaries(tmp_path, capsys):
    bad = write(tmp_path / "bad.txt", "u1:i1\nbroken line\n")
    assert main(["--format", "selfrec", "--name", "x", "--output", str(tmp_path), str(bad)]) == 2
    assert "bad.txt:2" in capsys.readouterr().err
    good = write(tmp_path / "good.txt", "u1:i1 i2\n")
    assert main(["--format", "selfrec", "--name", "x", "--output", str(tmp_path), str(good)]) == 0
    assert "2 interactions, 1 users, 2 items" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["--format", "selfrec", "--name", "x", str(good), "--train", str(good)])


def test_leave_one_out_config_tests_each_users_last_item(tmp_path):
    """The amazon-beauty-loo protocol on imported SELFRec files: test = the item of test.txt, valid = the one before."""
    users = [f"u{u}" for u in range(12)]
    train = write(
        tmp_path / "train.txt",
        "".join(f"{u}:" + " ".join(f"i{(k + j) % 15}" for j in range(6)) + "\n" for k, u in enumerate(users)),
    )
    test = write(tmp_path / "test.txt", "".join(f"{u}:i{(k + 7) % 15}\n" for k, u in enumerate(users)))
    import_merged("selfrec", [train, test], "shop", tmp_path / "dataset")
    config, _ = build_config(
        "BPR",
        "shop",
        [dataset_config_file("amazon-beauty-loo")],
        {
            "data_path": str(tmp_path / "dataset"),
            "state": "WARNING",
            "show_progress": False,
            "topk": [5],
            "valid_metric": "NDCG@5",
        },
    )
    _, _, (train_data, valid_data, test_data) = prepare(config)
    dataset = test_data._dataset
    tokens = lambda field, ids: [dataset.id2token(field, i) for i in ids]  # noqa: E731
    test_pairs = set(
        zip(
            tokens("user_id", test_data._dataset.inter_feat["user_id"].tolist()),
            tokens("item_id", test_data._dataset.inter_feat["item_id"].tolist()),
        )
    )
    assert test_pairs == {(u, f"i{(k + 7) % 15}") for k, u in enumerate(users)}
    valid_items = tokens("item_id", valid_data._dataset.inter_feat["item_id"].tolist())
    valid_users = tokens("user_id", valid_data._dataset.inter_feat["user_id"].tolist())
    assert dict(zip(valid_users, valid_items)) == {u: f"i{(k + 5) % 15}" for k, u in enumerate(users)}


def test_a_latin1_source_is_named_by_file_and_line_and_imports_with_its_encoding(tmp_path, capsys):
    source = tmp_path / "latin.txt"
    source.write_bytes("u1:i1 i2\nu2:caf\xe9 i1\n".encode("latin-1"))
    assert main(["--format", "selfrec", "--name", "x", "--output", str(tmp_path), str(source)]) == 2
    assert f"{source}:2: byte 7 of the line (b'\\xe9') is not utf-8" in capsys.readouterr().err
    assert (
        main(["--format", "selfrec", "--name", "x", "--output", str(tmp_path), "--encoding", "latin-1", str(source)])
        == 0
    )
    _, body = rows(tmp_path / "x" / "x.inter")  # written as UTF-8
    assert ["u2", "café", "0"] in body


def test_an_import_never_replaces_a_dataset_unasked_nor_leaves_its_folder(tmp_path, capsys):
    source = tmp_path / "train.txt"
    source.write_text("u1:i1 i2\nu2:i2\n")
    args = ["--format", "selfrec", "--name", "x", "--output", str(tmp_path / "data"), str(source)]
    assert main(args) == 0
    inter = tmp_path / "data" / "x" / "x.inter"
    inter.write_text("user_id:token\titem_id:token\nkept\tkept\n")
    capsys.readouterr()
    assert main(args) == 2
    assert "x.inter: the file exists; choose another name, or pass --overwrite" in capsys.readouterr().err
    assert inter.read_text().endswith("kept\tkept\n")
    assert main(args + ["--overwrite"]) == 0 and "u1\ti1" in inter.read_text()
    assert main(["--format", "selfrec", "--name", "../y", "--output", str(tmp_path / "data"), str(source)]) == 2
    assert "dataset '../y' is not a dataset name" in capsys.readouterr().err
    assert not (tmp_path / "y").exists()
