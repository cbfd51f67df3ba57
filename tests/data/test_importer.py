import importlib.util
import multiprocessing
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas
import pytest
import scipy.sparse as sp
import yaml

from recbole_mgformer.config.defaults import dataset_config_file
from recbole_mgformer.config.input_checks import claim
from recbole_mgformer.data import importer
from recbole_mgformer.data.importer import (
    SourceFormatError,
    import_dataset,
    import_merged,
    import_presplit,
    main,
    presplit_plan,
    read_source,
)
from recbole_mgformer.data.tokens import NA_VALUES
from recbole_mgformer.quick_start import build_config, prepare

HAS_PYARROW = importlib.util.find_spec("pyarrow") is not None


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


@pytest.mark.parametrize("end", ["\n", "\r\n", "\r"], ids=["LF", "CRLF", "CR"])
@pytest.mark.parametrize(
    "fmt, lines",
    [("selfrec", ["u1:i1 i2", "u2:i3"]), ("lightgcn", ["u1 i1 i2", "u2 i3"]), ("pairs", ["u1 i1", "u1\ti2", "u2 i3"])],
)
def test_line_formats_read_lines_ending_in_lf_crlf_or_a_bare_cr_alike(tmp_path, fmt, lines, end):
    """A file of old Mac line ends (a bare carriage return) was one line: selfrec read 'u1:i1 i2\\ru2:i3' as user u1
    with the items i1, i2 and 'u2:i3', without a word."""
    source = tmp_path / "f.txt"
    source.write_bytes((end.join(lines) + end).encode())
    assert read_source(source, fmt) == ([("u1", "i1"), ("u1", "i2"), ("u2", "i3")], 0)
    source.write_bytes(end.join(["u1 i1", "u2 i2 x", ""]).encode())
    with pytest.raises(SourceFormatError, match=r"f\.txt:2: expected 2 columns 'user item' \(pairs format\), got 3"):
        read_source(source, "pairs")


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


# ------------------------------------------------------------------------------------------------ one set of rules


def format_sources(folder):
    """``{label: argv of one small valid import}`` for every format the importer takes."""
    folder.mkdir(parents=True, exist_ok=True)
    write(folder / "s.txt", "u1:i1 i2\nu2:i2 i3\n")
    write(folder / "l.txt", "u1 i1 i2\nu2 i2 i3\n")
    write(folder / "p.txt", "u1\ti1\nu2\ti2\n")
    write(folder / "c.csv", "user,item,rating,timestamp\nu1,i1,4,2024-01-01\nu2,i2,5,2024-01-02\n")
    write(folder / "t.tsv", "user\titem\nu1\ti1\nu2\ti2\n")
    matrix = sp.csr_matrix(np.array([[1, 1, 0, 1], [0, 1, 1, 1]], dtype=np.float32))
    sp.save_npz(folder / "train.npz", matrix)
    sp.save_npz(folder / "test.npz", sp.csr_matrix(np.array([[0, 0, 1, 0], [1, 0, 0, 0]], dtype=np.float32)))
    if HAS_PYARROW:
        pandas.DataFrame({"user": ["u1", "u2"], "item": ["i1", "i2"]}).to_parquet(folder / "q.parquet")
    presplit = ["--train", str(folder / "p.txt"), "--valid", str(folder / "p.txt"), "--test", str(folder / "p.txt")]
    return {
        "selfrec": ["--format", "selfrec", str(folder / "s.txt")],
        "lightgcn": ["--format", "lightgcn", str(folder / "l.txt")],
        "pairs": ["--format", "pairs", str(folder / "p.txt")],
        "pairs pre-split": ["--format", "pairs", *presplit],
        "npz": ["--format", "npz", "--train", str(folder / "train.npz"), "--test", str(folder / "test.npz")],
        "npz valid=test": [
            "--format",
            "npz",
            "--train",
            str(folder / "train.npz"),
            "--test",
            str(folder / "test.npz"),
            "--valid-share",
            "test",
        ],
        "csv": ["--format", "csv", str(folder / "c.csv")],
        "csv with settings": ["--format", "csv", "--write-config", str(folder / "c.csv")],
        "tsv": ["--format", "tsv", str(folder / "t.tsv")],
        "parquet": ["--format", "parquet", str(folder / "q.parquet")],
    }


FORMAT_LABELS = [
    "selfrec",
    "lightgcn",
    "pairs",
    "pairs pre-split",
    "npz",
    "npz valid=test",
    "csv",
    "csv with settings",
    "tsv",
    pytest.param("parquet", marks=pytest.mark.skipif(not HAS_PYARROW, reason="pyarrow is not installed")),
]


def files_under(folder):
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*")) if folder.exists() else []


@pytest.mark.parametrize("label", FORMAT_LABELS)
def test_every_format_refuses_a_name_out_of_output(tmp_path, capsys, label):
    argv = format_sources(tmp_path / "src")[label]
    for name in ("../../escaped", "../escaped", "a/b", "/abs", ".", ".."):
        assert main([*argv, "--name", name, "--output", str(tmp_path / "out" / "data")]) == 2
        assert "--name: dataset" in capsys.readouterr().err
    assert not list(tmp_path.rglob("escaped*")) and not (tmp_path / "out").exists() and not Path("/abs").exists()


@pytest.mark.parametrize("label", FORMAT_LABELS)
def test_every_format_refuses_an_existing_dataset_unless_asked_and_leaves_it_whole(tmp_path, capsys, label):
    argv = [*format_sources(tmp_path / "src")[label], "--name", "kept", "--output", str(tmp_path / "data")]
    assert main(argv) == 0
    folder = tmp_path / "data" / "kept"
    written = {path: path.read_bytes() for path in folder.iterdir()}
    for path in written:
        path.write_text(f"user_id:token\titem_id:token\nkept\t{path.name}\n")
    before = {path: path.read_bytes() for path in written}
    capsys.readouterr()
    assert main(argv) == 2
    assert "the file exists; choose another name, or pass --overwrite" in capsys.readouterr().err
    assert {path: path.read_bytes() for path in folder.iterdir()} == before  # nothing replaced, nothing added
    assert main([*argv, "--overwrite"]) == 0
    assert {path: path.read_bytes() for path in folder.iterdir()} == written


def test_files_of_an_earlier_import_left_in_the_folder_are_named(tmp_path, capsys):
    """``--overwrite`` replaces the files an import writes and keeps the others: a ``<name>.yaml`` of an earlier
    ``--write-config`` is read by the runner, and may name a ``.user`` or split file of the old data."""
    good = write(tmp_path / "good.txt", "u1:i1 i2\n")
    argv = ["--format", "selfrec", "--name", "x", "--output", str(tmp_path / "data"), str(good)]
    assert main(argv) == 0
    assert "not written by this import" not in capsys.readouterr().out
    for stale in ("x.yaml", "x.user", "x.train.inter", "notes.txt"):
        (tmp_path / "data" / "x" / stale).write_text("")
    assert main([*argv, "--overwrite"]) == 0
    out = capsys.readouterr().out
    assert "not written by this import: x.train.inter, x.user, x.yaml; the runner reads x.yaml there" in out


@pytest.mark.parametrize("label", FORMAT_LABELS)
def test_every_format_checks_its_target_before_reading_the_inputs(tmp_path, capsys, monkeypatch, label):
    argv = format_sources(tmp_path / "src")[label]
    (tmp_path / "src" / "c.csv").write_text("no header we could read\n")  # would fail if it were read
    for source in (tmp_path / "src").iterdir():
        source.unlink()  # every input gone: an error about them would mean they were read first
    (tmp_path / "taken").write_text("a file, not a folder")
    assert main([*argv, "--name", "x", "--output", str(tmp_path / "taken" / "data")]) == 2
    assert "taken is a file, not a folder" in capsys.readouterr().err

    def unwritable(path, option):
        raise PermissionError(f"{option} {path}: cannot write in it")

    monkeypatch.setattr(importer, "check_writable", unwritable)
    assert main([*argv, "--name", "x", "--output", str(tmp_path / "data")]) == 2
    assert "--output" in capsys.readouterr().err and not (tmp_path / "data").exists()


# ------------------------------------------------------------------------------------------------ all or nothing


def presplit_sources(folder, tag="a"):
    folder.mkdir(parents=True, exist_ok=True)
    return {s: write(folder / f"{s}-{tag}.tsv", f"u1\t{tag}{s}1\nu2\t{tag}{s}2\n") for s in ("train", "valid", "test")}


@pytest.mark.parametrize("failing_call", [1, 2, 3])
def test_a_claim_that_fails_leaves_no_file_no_temporary_and_no_folder_it_made(tmp_path, monkeypatch, failing_call):
    splits = presplit_sources(tmp_path / "src")
    calls = []

    def claim_then_fail(temporary, path, option, overwrite=False):
        calls.append(path)
        if len(calls) == failing_call:
            raise OSError(28, "No space left on device", str(path))
        return claim(temporary, path, option, overwrite)

    monkeypatch.setattr(importer, "claim", claim_then_fail)
    with pytest.raises(OSError, match="No space left"):
        import_presplit("pairs", splits, "mine", tmp_path / "out" / "data")
    assert not (tmp_path / "out").exists()  # the folders this import made, gone with its files


def test_a_failure_while_writing_leaves_an_existing_folder_and_its_other_files(tmp_path, monkeypatch):
    splits = presplit_sources(tmp_path / "src")
    folder = tmp_path / "data" / "mine"
    folder.mkdir(parents=True)
    write(folder / "notes.txt", "mine")
    written = []

    def write_then_fail(path, rows, with_position):
        if written:
            raise OSError(28, "No space left on device", str(path))
        written.append(path)
        importer_write_rows(path, rows, with_position)

    importer_write_rows = importer._write_rows
    monkeypatch.setattr(importer, "_write_rows", write_then_fail)
    with pytest.raises(OSError, match="No space left"):
        import_presplit("pairs", splits, "mine", tmp_path / "data")
    assert files_under(tmp_path / "data") == ["mine", "mine/notes.txt"]


def test_an_import_that_finds_its_files_taken_at_the_end_refuses_and_keeps_the_others(tmp_path):
    """A second import into the same name, finished while this one read its inputs: this one stops with a clear
    error and the other's files stay as they are (check-then-write would have replaced them)."""
    first, second = presplit_sources(tmp_path / "src", "a"), presplit_sources(tmp_path / "src", "b")
    plan = presplit_plan("pairs", second, "mine")
    read_inputs = plan.build

    def build_while_another_import_finishes():
        import_presplit("pairs", first, "mine", tmp_path / "data")
        return read_inputs()

    plan.build = build_while_another_import_finishes
    with pytest.raises(FileExistsError, match="written by another run since this one started"):
        import_dataset("mine", tmp_path / "data", plan)
    for split in ("train", "valid", "test"):
        _, body = rows(tmp_path / "data" / "mine" / f"mine.{split}.inter")
        assert body == [["u1", f"a{split}1"], ["u2", f"a{split}2"]]
    assert files_under(tmp_path / "data") == ["mine", *(f"mine/mine.{s}.inter" for s in ("test", "train", "valid"))]


def test_two_processes_importing_one_name_at_once_one_wins_whole_the_other_refuses(tmp_path):
    sources = {tag: presplit_sources(tmp_path / "src", tag) for tag in "ab"}
    processes = {
        tag: subprocess.Popen(
            [sys.executable, "-m", "recbole_mgformer.data.importer", "--format", "pairs", "--name", "mine"]
            + ["--output", str(tmp_path / "data")]
            + [arg for s in ("train", "valid", "test") for arg in (f"--{s}", str(sources[tag][s]))],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for tag in "ab"
    }
    outcomes = {tag: (p.wait(timeout=120), p.stdout.read() + p.stderr.read()) for tag, p in processes.items()}
    assert sorted(code for code, _ in outcomes.values()) == [0, 2], outcomes
    winner = next(tag for tag, (code, _) in outcomes.items() if code == 0)
    loser_output = next(out for code, out in outcomes.values() if code == 2)
    assert "error: import into" in loser_output and "the file exists" in loser_output
    for split in ("train", "valid", "test"):  # every file the winner's: no mix of the two imports
        _, body = rows(tmp_path / "data" / "mine" / f"mine.{split}.inter")
        assert body == [["u1", f"{winner}{split}1"], ["u2", f"{winner}{split}2"]]
    assert len(files_under(tmp_path / "data")) == 4  # no temporaries left beside them


def _import_at_barrier(barrier, sources, data, results):
    """One import of ``sources`` into ``data``/mine that waits, past its checks and with its inputs read, for the
    other process to get as far: then both claim at once."""
    plan = presplit_plan("pairs", sources, "mine")
    build = plan.build

    def build_then_wait():
        built = build()
        barrier.wait(timeout=60)
        return built

    plan.build = build_then_wait
    try:
        import_dataset("mine", data, plan)
        results.put(("wrote", ""))
    except FileExistsError as error:
        results.put(("refused", str(error)))


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="needs fork")
def test_two_processes_past_their_checks_claim_at_once_and_exactly_one_writes(tmp_path):
    context = multiprocessing.get_context("fork")
    barrier, results = context.Barrier(2), context.Queue()
    sources = {tag: presplit_sources(tmp_path / "src", tag) for tag in "ab"}
    processes = [
        context.Process(target=_import_at_barrier, args=(barrier, sources[tag], tmp_path / "data", results))
        for tag in "ab"
    ]
    for process in processes:
        process.start()
    outcomes = sorted(results.get(timeout=120) for _ in processes)
    for process in processes:
        process.join(timeout=60)
    assert [what for what, _ in outcomes] == ["refused", "wrote"]
    assert "written by another run since this one started" in outcomes[0][1]
    bodies = {
        split: rows(tmp_path / "data" / "mine" / f"mine.{split}.inter")[1] for split in ("train", "valid", "test")
    }
    winner = bodies["train"][0][1][0]
    assert bodies == {split: [["u1", f"{winner}{split}1"], ["u2", f"{winner}{split}2"]] for split in bodies}
    assert len(files_under(tmp_path / "data")) == 4  # the loser's temporaries gone


# ------------------------------------------------------------------------------------------ ids RecBole reads otherwise


@pytest.mark.parametrize("token", sorted(t for t in NA_VALUES if t and " " not in t) + ["[PAD]", '"quoted', '"'])
@pytest.mark.parametrize(
    "fmt, line, where", [("pairs", "u1\t{}\n", "item 1 of the line"), ("selfrec", "{}:i1\n", "the user")]
)
def test_ids_recbole_would_read_otherwise_stop_a_line_format_import(tmp_path, fmt, line, where, token):
    source = write(tmp_path / "f.txt", "u0\ti0\n" if fmt == "pairs" else "u0:i0\n")
    with source.open("a") as handle:
        handle.write(line.format(token))
    with pytest.raises(SourceFormatError, match=rf"f\.txt:2: {where} .*{re.escape(repr(token))}"):
        import_merged(fmt, [source], "x", tmp_path / "data")
    assert not (tmp_path / "data").exists()


def test_write_config_beside_a_merged_import_names_its_columns_and_the_time_order(tmp_path, capsys):
    source = write(tmp_path / "s.txt", "u1:i1 i2\nu2:i2\n")
    assert (
        main(["--format", "selfrec", "--name", "shop", "--output", str(tmp_path), "--write-config", str(source)]) == 0
    )
    settings = yaml.safe_load((tmp_path / "shop" / "shop.yaml").read_text())
    assert settings["load_col"] == {"inter": ["user_id", "item_id", "timestamp"]}
    assert settings["eval_args"] == {
        "split": {"RS": [0.8, 0.1, 0.1]},
        "order": "RO",
        "group_by": "user",
        "mode": "full",
    }
    assert (settings["metrics"], settings["topk"], settings["valid_metric"]) == (["Recall", "NDCG"], [20], "NDCG@20")
    assert "# order: TO" in (tmp_path / "shop" / "shop.yaml").read_text()
    assert f"read by the runner for --dataset=shop --data_path={tmp_path}" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            ["--format", "pairs", "--user", "u"],
            "--user applies to tables (--format csv, tsv or parquet), not --format pairs: drop it",
        ),
        (["--format", "pairs", "--user", "u", "--item", "i"], "--user and --item apply to tables"),
        (["--format", "npz", "--train", "a", "--test", "b", "--write-config"], "no --write-config"),
        (["--format", "csv", "a.csv", "b.csv"], "imports one table"),
        (["--format", "csv", "--column-type", "price", "a.csv"], "--column-type 'price': give COLUMN=TYPE"),
        (["--format", "csv", "--column-type", "price=int", "a.csv"], "TYPE one of token, token_seq, float"),
    ],
)
def test_options_that_cannot_work_together_are_usage_errors(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        main([*argv, "--name", "x"])
    assert exit_.value.code == 2 and message in capsys.readouterr().err


hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from recbole_mgformer.data.tokens import token_problem  # noqa: E402

LINE_TOKENS = st.one_of(
    st.sampled_from(sorted(t for t in NA_VALUES if t and " " not in t) + ["[PAD]", "u1"]),
    st.text(alphabet='aN/#A.-1nul"[]é\0\ufeff', min_size=1, max_size=5),
)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    pairs=st.lists(st.tuples(LINE_TOKENS, LINE_TOKENS), min_size=1, max_size=8),
    fmt=st.sampled_from(["pairs", "selfrec"]),
)
def test_any_line_file_imports_to_exactly_its_pairs_or_stops_at_the_first_bad_line(tmp_path_factory, pairs, fmt):
    folder = tmp_path_factory.mktemp("lines")
    line = "{}\t{}\n" if fmt == "pairs" else "{}:{}\n"
    source = folder / "f.txt"
    source.write_text("".join(line.format(u, i) for u, i in pairs), encoding="utf-8")
    expected = [(u.removeprefix("\ufeff") if k == 0 else u, i) for k, (u, i) in enumerate(pairs)]  # a file's BOM
    bad = next((k for k, (u, i) in enumerate(expected) if token_problem(u) or token_problem(i)), None)
    try:
        import_merged(fmt, [source], "x", folder / "data")
    except SourceFormatError as error:
        assert bad is not None and str(error).startswith(f"{source}:{bad + 1}: "), str(error)
        assert not (folder / "data").exists()
        return
    assert bad is None
    frame = pandas.read_csv(folder / "data" / "x" / "x.inter", delimiter="\t", dtype=str, engine="python")
    assert list(zip(frame["user_id:token"], frame["item_id:token"])) == expected


@pytest.mark.parametrize(
    "fmt, content",
    [
        ("csv", "user,item\n"),
        ("csv", "user,item\n\n\n"),
        ("tsv", "user\titem\n"),
        ("pairs", ""),
        ("pairs", "\n\n"),
        ("lightgcn", ""),
        ("lightgcn", "7\n8\n"),  # users listed without items
        ("selfrec", ""),
    ],
)
def test_an_input_with_no_interaction_is_named_and_nothing_is_written(tmp_path, capsys, fmt, content):
    source = tmp_path / f"in.{fmt}"
    source.write_text(content)
    assert main(["--format", fmt, str(source), "--name", "x", "--output", str(tmp_path / "out")]) == 2
    assert f"{source}: no interaction to import" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("label", FORMAT_LABELS)
@pytest.mark.parametrize("kind", ["folder", "missing"])
def test_every_format_names_an_input_that_is_a_folder_or_missing_and_writes_nothing(tmp_path, capsys, label, kind):
    sources = tmp_path / "src"
    argv = format_sources(sources)[label]
    first = next(i for i, arg in enumerate(argv) if arg.startswith(str(sources)))
    wrong = sources / "wrong"
    if kind == "folder":
        wrong.mkdir()
    argv[first] = str(wrong)
    assert main([*argv, "--name", "x", "--output", str(tmp_path / "out")]) == 2
    expected = "a folder, not a file; name the file" if kind == "folder" else "no such file"
    assert f"{wrong}: {expected}" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("fmt", ["csv", "tsv", "selfrec", "lightgcn", "pairs"])
@pytest.mark.parametrize(
    "content, named",
    [
        (b"\x1f\x8b\x08\x00", "a gzip-compressed file, not a text file; decompress it first (mv "),
        (b"BZh91AY&SY", "a bzip2-compressed file, not a text file; decompress it first (mv "),
        (b"PK\x03\x04\x14\x00", "a zip archive (an .xlsx workbook is one), not a text file"),
        (b"PAR1\x15\x04\x00PAR1", "a Parquet file, not a text file; import it with the importer's --format parquet"),
    ],
)
def test_a_compressed_or_binary_input_is_named_with_the_way_to_its_text(tmp_path, capsys, fmt, content, named):
    source = tmp_path / f"in.{fmt}"
    source.write_bytes(content if content.endswith(b"PAR1") else content + b"\x00\xff" * 8)
    assert main(["--format", fmt, str(source), "--name", "x", "--output", str(tmp_path / "out")]) == 2
    assert f"{source}: {named}" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_a_text_that_begins_like_a_binary_magic_is_still_text(tmp_path):
    source = write(tmp_path / "in.csv", "PAR1,BZh\nu1,i1\nu2,i2\n")  # Parquet also ends with PAR1; bzip2 goes on
    argv = ["--format", "csv", str(source), "--user", "PAR1", "--item", "BZh", "--name", "x"]
    assert main([*argv, "--output", str(tmp_path / "out")]) == 0
    assert rows(tmp_path / "out" / "x" / "x.inter")[1] == [["u1", "i1"], ["u2", "i2"]]


@pytest.mark.parametrize("fmt, text", [("csv", "user,item\nu1,i1\nu2,i2\n"), ("selfrec", "u1:i1\nu2:i2\n")])
def test_a_table_or_line_file_streams_from_stdin(tmp_path, fmt, text):
    completed = subprocess.run(
        [sys.executable, "-m", "recbole_mgformer.data.importer", "--format", fmt, "--name", "x", "/dev/stdin"],
        input=text,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    assert [row[:2] for row in rows(tmp_path / "dataset" / "x" / "x.inter")[1]] == [["u1", "i1"], ["u2", "i2"]]


@pytest.mark.parametrize("suffix", ["", ".gz"])
def test_the_named_command_leaves_a_gzipped_inputs_text_where_the_import_reads_it(tmp_path, capsys, suffix):
    import gzip
    import shutil

    if shutil.which("gunzip") is None:
        pytest.skip("gunzip is not installed")
    folder = tmp_path / "my data"  # a space: the command quotes the path
    folder.mkdir()
    source = folder / f"in.csv{suffix}"
    source.write_bytes(gzip.compress(b"user,item\nu1,i1\n"))
    assert main(["--format", "csv", str(source), "--name", "x", "--output", str(tmp_path / "out")]) == 2
    command = re.search(r"decompress it first \((.*)\)$", capsys.readouterr().err.strip()).group(1)
    subprocess.run(command, shell=True, check=True, cwd=tmp_path)
    text = folder / "in.csv"
    assert main(["--format", "csv", str(text), "--name", "x", "--output", str(tmp_path / "out")]) == 0
