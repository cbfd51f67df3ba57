"""Top-k recommendations and embeddings from a checkpoint, against RecBole's own full-sort ranking."""

import contextlib
import csv
import json
import os
import re

import numpy as np
import pytest
import torch
from conftest import TINY_CONFIG, write_interactions
from recbole.utils.case_study import full_sort_topk

from recbole_mgformer import run_recommender
from recbole_mgformer.recommend import EXPORTED, export_embeddings, load, main, recommend


@contextlib.contextmanager
def working_directory(path):
    saved = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(saved)


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """``{model: checkpoint path}`` of one-epoch runs on the tiny dataset."""
    folder = tmp_path_factory.mktemp("recommend")
    data = write_interactions(folder / "data")
    found = {}
    with working_directory(folder):
        for model in ("MGFormer", "BPR"):
            run_recommender(
                model,
                "tiny",
                config_dict={
                    **TINY_CONFIG,
                    "epochs": 1,
                    "data_path": str(data),
                    "checkpoint_dir": str(folder / "saved"),
                },
            )
            (found[model],) = (folder / "saved").glob(f"{model}-*.pth")
    return found


@pytest.mark.parametrize("model_name", ["MGFormer", "BPR"])
def test_top_k_equals_recboles_full_sort_ranking(checkpoints, model_name):
    users = ["u0", "u7", "u13", "u39"]
    result = recommend(checkpoints[model_name], users, k=10)

    _, model, dataset, train_data, valid_data, _ = load(checkpoints[model_name])
    uids = torch.tensor([dataset.token2id(dataset.uid_field, u) for u in users])
    scores, items = full_sort_topk(uids, model, valid_data, k=10)  # the evaluator's ranking, training items out
    for user, row_scores, row_items in zip(users, scores.tolist(), items.tolist()):
        assert [item for item, _ in result[user]] == list(dataset.id2token(dataset.iid_field, row_items))
        assert [score for _, score in result[user]] == pytest.approx(row_scores)
        train_items = set(
            dataset.id2token(
                dataset.iid_field,
                train_data.dataset.inter_matrix(form="csr")[dataset.token2id(dataset.uid_field, user)].indices,
            )
        )
        assert train_items and not train_items & {item for item, _ in result[user]}


def test_exclude_seen_drops_every_item_of_the_user(checkpoints):
    _, _, dataset, *_ = load(checkpoints["BPR"])
    seen = set(
        dataset.id2token(
            dataset.iid_field, dataset.inter_matrix(form="csr")[dataset.token2id(dataset.uid_field, "u5")].indices
        )
    )
    result = recommend(checkpoints["BPR"], ["u5"], k=60, exclude="seen")["u5"]
    assert len(result) == dataset.item_num - 1 - len(seen) and not seen & {item for item, _ in result}
    assert [s for _, s in result] == sorted((s for _, s in result), reverse=True)


def test_unknown_users_are_named(checkpoints):
    with pytest.raises(ValueError, match=r"unknown user token\(s\) 'nobody', 'u999'"):
        recommend(checkpoints["BPR"], ["u1", "nobody", "u999"], k=5)


def test_the_command_prints_and_writes_csv_and_json(checkpoints, tmp_path, capsys):
    args = ["--checkpoint", str(checkpoints["MGFormer"]), "--users", "u1,u2", "--k", "3"]
    assert main(args) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].split() == ["user", "rank", "item", "score"] and len(printed) == 7
    expected = recommend(checkpoints["MGFormer"], ["u1", "u2"], k=3)

    assert main([*args, "--output", str(tmp_path / "top.csv")]) == 0
    rows = list(csv.DictReader((tmp_path / "top.csv").open()))
    assert [(r["user"], r["item"]) for r in rows] == [(u, i) for u in ("u1", "u2") for i, _ in expected[u]]
    assert main([*args, "--output", str(tmp_path / "top.json")]) == 0
    written = json.loads((tmp_path / "top.json").read_text())
    assert {u: [(e["item"], pytest.approx(e["score"])) for e in items] for u, items in written.items()} == expected
    assert main([*args, "--output", str(tmp_path / "TOP.CSV")]) == 0  # the suffix read case aside
    assert (tmp_path / "TOP.CSV").read_text() == (tmp_path / "top.csv").read_text()


def test_the_command_reports_unknown_users_and_exits_2(checkpoints, capsys):
    assert main(["--checkpoint", str(checkpoints["BPR"]), "--users", "u1,ghost"]) == 2
    assert "'ghost'" in capsys.readouterr().err


@pytest.mark.parametrize("users", [",,", "u1,", ",u1", "u1, ,u2"])
def test_an_empty_user_token_is_a_usage_error_before_the_checkpoint_loads(tmp_path, capsys, users):
    with pytest.raises(SystemExit) as exit_:
        main(["--checkpoint", str(tmp_path / "absent.pth"), "--users", users])
    assert exit_.value.code == 2 and f"--users {users!r} holds an empty token" in capsys.readouterr().err


def test_spaces_around_user_tokens_are_dropped(checkpoints, capsys):
    assert main(["--checkpoint", str(checkpoints["BPR"]), "--users", "u1,u2", "--k", "2"]) == 0
    plain = capsys.readouterr().out
    assert main(["--checkpoint", str(checkpoints["BPR"]), "--users", " u1 ,  u2 ", "--k", "2"]) == 0
    assert capsys.readouterr().out == plain  # the same users, ranked the same, not "unknown user ' u2'"
    assert [line.split()[0] for line in plain.splitlines()[1:]] == ["u1", "u1", "u2", "u2"]


def test_a_users_file_names_the_same_users_as_the_list(checkpoints, tmp_path, capsys):
    assert main(["--checkpoint", str(checkpoints["BPR"]), "--users", "u1,u2", "--k", "2"]) == 0
    plain = capsys.readouterr().out
    listed = tmp_path / "users.txt"
    listed.write_text("\ufeffu1\r\n\n  u2 \n")  # a byte-order mark, CRLF, a blank line and spaces: all dropped
    assert main(["--checkpoint", str(checkpoints["BPR"]), "--users-file", str(listed), "--k", "2"]) == 0
    assert capsys.readouterr().out == plain


@pytest.mark.parametrize(
    "content, expected",
    [(b"\n  \n", "names no user"), (b"\xff\xfeu\x001\x00", "is not UTF-8 text"), (None, "No such file")],
)
def test_an_unreadable_users_file_is_a_usage_error_before_the_checkpoint_loads(tmp_path, capsys, content, expected):
    listed = tmp_path / "users.txt"
    if content is not None:
        listed.write_bytes(content)
    with pytest.raises(SystemExit) as exit_:
        main(["--checkpoint", str(tmp_path / "absent.pth"), "--users-file", str(listed)])
    assert exit_.value.code == 2 and expected in capsys.readouterr().err


def test_users_and_a_users_file_together_are_a_usage_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--checkpoint", "x.pth", "--users", "u1", "--users-file", str(tmp_path / "u.txt")])
    assert exit_.value.code == 2 and "not allowed with argument" in capsys.readouterr().err


def test_a_user_token_holding_a_comma_is_reached_through_a_users_file(tmp_path, capsys):
    data = write_interactions(tmp_path / "data")
    inter = data / "tiny" / "tiny.inter"
    inter.write_text(
        "".join(f"u1,x{line[2:]}" if line.startswith("u1\t") else line for line in inter.read_text().splitlines(True))
    )
    with working_directory(tmp_path):
        run_recommender(
            "BPR",
            "tiny",
            config_dict={**TINY_CONFIG, "epochs": 1, "data_path": str(data), "checkpoint_dir": str(tmp_path / "saved")},
        )
    (checkpoint,) = (tmp_path / "saved").glob("BPR-*.pth")
    assert main(["--checkpoint", str(checkpoint), "--users", "u1,x"]) == 2  # two tokens, u1 unknown
    assert "'u1'" in capsys.readouterr().err
    listed = tmp_path / "users.txt"
    listed.write_text("u1,x\nu2\n")
    assert main(["--checkpoint", str(checkpoint), "--users-file", str(listed), "--k", "2"]) == 0
    assert [line.split()[0] for line in capsys.readouterr().out.splitlines()[1:]] == ["u1,x", "u1,x", "u2", "u2"]


@pytest.mark.parametrize("model_name", ["MGFormer", "BPR"])
def test_exported_embeddings_rank_as_the_model(checkpoints, tmp_path, model_name):
    _, model, dataset, *_ = load(checkpoints[model_name])
    meta = export_embeddings(model, dataset, tmp_path / "emb")
    users, items = np.load(tmp_path / "emb/users.npy"), np.load(tmp_path / "emb/items.npy")
    user_tokens = (tmp_path / "emb/users.txt").read_text().split("\n")[:-1]
    item_tokens = (tmp_path / "emb/items.txt").read_text().split("\n")[:-1]
    assert users.shape == (40, meta["dimension"]) and len(user_tokens) == 40  # MGFormer: d + SVD width
    assert items.shape == (len(item_tokens), meta["dimension"]) and meta["items"] == len(item_tokens)
    assert meta["dot_product_scores"] is True
    top = recommend(checkpoints[model_name], ["u3"], k=5, exclude="none")["u3"]
    by_index = np.argsort(-(users[user_tokens.index("u3")] @ items.T))[:5]
    assert [item_tokens[i] for i in by_index] == [item for item, _ in top]


def test_sequential_and_context_checkpoints_get_a_clear_error(tmp_path):
    data = tmp_path / "data" / "seq"
    data.mkdir(parents=True)
    lines = ["user_id:token\titem_id:token\ttimestamp:float"]
    lines += [f"u{u}\ti{(u + t) % 12}\t{t}" for u in range(10) for t in range(8)]
    (data / "seq.inter").write_text("\n".join(lines) + "\n")
    run_recommender(
        "GRU4Rec",
        "seq",
        config_dict={
            "data_path": str(tmp_path / "data"),
            "epochs": 1,
            "embedding_size": 8,
            "hidden_size": 8,
            "show_progress": False,
            "state": "WARNING",
            "train_neg_sample_args": None,
            "checkpoint_dir": str(tmp_path / "saved"),
            "load_col": {"inter": ["user_id", "item_id", "timestamp"]},
            "eval_args": {"split": {"LS": "valid_and_test"}, "order": "TO", "mode": "full"},
        },
    )
    (checkpoint,) = (tmp_path / "saved").glob("GRU4Rec-*.pth")
    with pytest.raises(ValueError, match="sequential model.*recommend supports general models"):
        recommend(checkpoint, ["u1"])


def copied_data(checkpoint, folder, edit):
    """The tiny dataset the checkpoint trained on, copied to ``folder`` with its .inter lines passed through
    ``edit(header, rows) -> rows``; returns the data_path to give ``recommend``."""
    source = checkpoint.parent.parent / "data" / "tiny" / "tiny.inter"
    header, *rows = source.read_text().splitlines()
    (folder / "tiny").mkdir(parents=True)
    (folder / "tiny" / "tiny.inter").write_text("\n".join([header, *edit(rows)]) + "\n")
    return str(folder)


def test_reordered_rows_stop_recommend_with_the_renumbering_named(checkpoints, tmp_path):
    # Sorting the rows by item renumbers users and items (RecBole numbers them in order of first appearance);
    # the old code read the checkpoint's embeddings for other users and items without a word.
    data_path = copied_data(checkpoints["BPR"], tmp_path / "data", lambda rows: sorted(rows, key=lambda r: r[::-1]))
    with pytest.raises(ValueError, match=r"users renumbered \('u\d+' id \d+ then, \d+ now.*the rows were reordered"):
        recommend(checkpoints["BPR"], ["u0"], k=5, data_path=data_path)


def test_a_user_added_to_the_data_is_named_not_a_size_mismatch(checkpoints, tmp_path, capsys):
    data_path = copied_data(
        checkpoints["MGFormer"], tmp_path / "data", lambda rows: rows + [f"newcomer\ti{i}" for i in range(0, 30, 3)]
    )
    with pytest.raises(ValueError, match=r"1 users added \('newcomer'\).*Restore the data files"):
        recommend(checkpoints["MGFormer"], ["u0"], k=5, data_path=data_path)
    assert (
        main(
            [
                "--checkpoint",
                str(checkpoints["MGFormer"]),
                "--export-embeddings",
                str(tmp_path / "emb"),
                "--data_path",
                data_path,
            ]
        )
        == 2
    )
    assert "1 users added" in capsys.readouterr().err and not (tmp_path / "emb").exists()


def test_rows_moved_between_splits_with_the_same_numbering_are_refused(checkpoints, tmp_path):
    # Rotate the rows of u39 (the last user) whose item appeared before: every token keeps its id, but the
    # random split follows the row order, so other items of u39 are its training items.
    def swap(rows):
        rows, seen, plain = list(rows), set(), []
        for i, row in enumerate(rows):
            user, item = row.split("\t")
            if user == "u39" and item in seen:
                plain.append(i)
            seen |= {user, item}
        moved = [rows[i] for i in plain]
        for i, row in zip(plain, moved[1:] + moved[:1]):
            rows[i] = row
        return rows

    data_path = copied_data(checkpoints["BPR"], tmp_path / "data", swap)
    with pytest.raises(ValueError, match="training split rebuilt from .* is not the one the model trained on"):
        recommend(checkpoints["BPR"], ["u0"], k=5, data_path=data_path)


def test_the_same_data_copied_elsewhere_recommends_alike(checkpoints, tmp_path):
    data_path = copied_data(checkpoints["BPR"], tmp_path / "data", lambda rows: rows)
    assert recommend(checkpoints["BPR"], ["u0", "u7"], k=5, data_path=data_path) == recommend(
        checkpoints["BPR"], ["u0", "u7"], k=5
    )


def test_a_checkpoint_without_vocabularies_still_recommends_with_a_warning(checkpoints, tmp_path):
    state = torch.load(checkpoints["BPR"], weights_only=True)
    assert state["vocabulary"]["users"][1:4] == ["u0", "u1", "u2"] and state["model_class"] == "BPR"
    for key in ("vocabulary", "model_class"):
        del state[key]
    old = tmp_path / "old.pth"
    torch.save(state, old)
    with pytest.warns(UserWarning, match="records no user and item vocabularies"):
        assert recommend(old, ["u0"], k=5) == recommend(checkpoints["BPR"], ["u0"], k=5)


def test_outputs_never_replace_existing_files_unasked(checkpoints, tmp_path, capsys):
    checkpoint = str(checkpoints["BPR"])
    existing = tmp_path / "top.csv"
    existing.write_text("someone else's file\n")
    assert main(["--checkpoint", checkpoint, "--users", "u0", "--output", str(existing)]) == 2
    assert "top.csv: the file exists; choose another name, or pass --overwrite" in capsys.readouterr().err
    assert existing.read_text() == "someone else's file\n"
    assert main(["--checkpoint", checkpoint, "--users", "u0", "--output", str(tmp_path)]) == 2
    assert "a folder is there" in capsys.readouterr().err
    assert main(["--checkpoint", checkpoint, "--users", "u0", "--output", str(existing), "--overwrite"]) == 0
    assert existing.read_text().startswith("user,rank,item,score")
    folder = tmp_path / "vectors"
    folder.mkdir()
    (folder / "users.txt").write_text("my own users\n")
    assert main(["--checkpoint", checkpoint, "--export-embeddings", str(folder)]) == 2
    assert "the folder is not empty" in capsys.readouterr().err
    assert (folder / "users.txt").read_text() == "my own users\n"
    assert main(["--checkpoint", checkpoint, "--export-embeddings", str(existing)]) == 2
    assert "a file is there, not a folder" in capsys.readouterr().err
    assert main(["--checkpoint", checkpoint, "--export-embeddings", str(folder), "--overwrite"]) == 0
    assert (folder / "users.txt").read_text().startswith("u")


# ------------------------------------------------------------------------------------------------ claimed outputs


def test_an_output_written_by_another_run_meanwhile_is_kept_and_this_run_says_so(
    checkpoints, tmp_path, monkeypatch, capsys
):
    # Both runs pass the check before their checkpoints load; the old code then replaced the first run's file
    # and said "wrote" twice.
    import recbole_mgformer.recommend as command

    target, folder = tmp_path / "top.csv", tmp_path / "vectors"
    real_rank, real_representations = command.rank, command.representations

    def another_run_writes_first(write_it):
        def wrapped(*args, **kwargs):
            write_it()
            return (real_rank if write_it is write_csv else real_representations)(*args, **kwargs)

        return wrapped

    def write_csv():
        target.write_text("the other run's rows\n")

    def write_folder():
        folder.mkdir()
        (folder / "users.npy").write_bytes(b"the other run's vectors")

    monkeypatch.setattr(command, "rank", another_run_writes_first(write_csv))
    assert main(["--checkpoint", str(checkpoints["BPR"]), "--users", "u0", "--output", str(target)]) == 2
    captured = capsys.readouterr()
    assert "wrote" not in captured.out and target.read_text() == "the other run's rows\n"
    assert f"--output {target}: the file exists (written by another run since this one started" in captured.err

    monkeypatch.setattr(command, "representations", another_run_writes_first(write_folder))
    assert main(["--checkpoint", str(checkpoints["BPR"]), "--export-embeddings", str(folder)]) == 2
    captured = capsys.readouterr()
    assert "wrote" not in captured.out and f"--export-embeddings {folder}: the folder is not empty" in captured.err
    assert [p.name for p in folder.iterdir()] == ["users.npy"]
    assert (folder / "users.npy").read_bytes() == b"the other run's vectors"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["top.csv", "vectors"]  # no temporaries left


def test_overwrite_replaces_the_exported_files_only_and_whole(checkpoints, tmp_path):
    folder = tmp_path / "vectors"
    folder.mkdir()
    (folder / "users.npy").write_bytes(b"old")
    (folder / "README.md").write_text("my notes\n")
    assert main(["--checkpoint", str(checkpoints["MGFormer"]), "--export-embeddings", str(folder), "--overwrite"]) == 0
    assert (folder / "README.md").read_text() == "my notes\n"
    meta = json.loads((folder / "meta.json").read_text())
    assert np.load(folder / "users.npy").shape == (40, meta["dimension"]) and meta["model"] == "MGFormer"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["vectors"]  # its temporary folder is gone
    (tmp_path / "empty").mkdir()
    for name in ("new", "empty"):  # a new folder comes whole; an empty one is filled
        assert main(["--checkpoint", str(checkpoints["BPR"]), "--export-embeddings", str(tmp_path / name)]) == 0
        assert sorted(p.name for p in (tmp_path / name).iterdir()) == sorted(EXPORTED)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty", "new", "vectors"]


def blocked_paths(tmp_path):
    """Targets no process can create, root included (tests run as root, whom permissions do not stop)."""
    (tmp_path / "a-file").write_text("")
    return {"under /proc": "/proc/self/recommend-out/x", "below a file": str(tmp_path / "a-file" / "x")}


@pytest.mark.parametrize("where", ["under /proc", "below a file", "in a read-only folder"])
@pytest.mark.parametrize("option, name", [("--output", "top.csv"), ("--export-embeddings", "vectors")])
def test_an_unwritable_target_stops_the_command_before_the_checkpoint_loads(
    checkpoints, tmp_path, monkeypatch, capsys, where, option, name
):
    import recbole_mgformer.config.input_checks as input_checks
    import recbole_mgformer.recommend as command

    monkeypatch.setattr(command, "load", lambda *args: pytest.fail("the checkpoint loaded before the check"))
    if where == "in a read-only folder":  # as for a user without root: creating a file there fails

        def refused(*args, dir=None, **kwargs):
            raise PermissionError(13, "Permission denied", str(dir))

        monkeypatch.setattr(input_checks.tempfile, "TemporaryFile", refused)
        target = str(tmp_path / "readonly" / name)
    else:
        target = blocked_paths(tmp_path)[where].replace("/x", f"/{name}")
    assert main(["--checkpoint", str(checkpoints["BPR"]), "--users", "u0", option, target]) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"error: {option} {target}: ") and "Traceback" not in error
    fix = "name a path in a folder" if where == "below a file" else "choose a folder you can write to"
    assert fix in error


# ------------------------------------------------------------------------------------------------ which checkpoint


@pytest.fixture
def saved(checkpoints, tmp_path):
    """A checkpoint_dir of copies: BPR (older), MGFormer (newer), and files that are no candidates, newest of all:
    a .latest.pth (resume state), a file that is no checkpoint and an empty one (a run claiming its name)."""
    folder = tmp_path / "saved"
    folder.mkdir()
    for age, (name, source) in enumerate([("MGFormer", checkpoints["MGFormer"]), ("BPR", checkpoints["BPR"])]):
        copy = folder / f"{name}-copy.pth"
        copy.write_bytes(source.read_bytes())
        os.utime(copy, (1_000_000 - age * 1000,) * 2)
    (folder / "MGFormer-copy.latest.pth").write_bytes(checkpoints["BPR"].read_bytes())
    (folder / "notes.pth").write_text("not a checkpoint")
    (folder / "BPR-starting.pth").write_bytes(b"")
    return folder


@pytest.mark.parametrize(
    "selection, chosen",
    [
        (["--model", "BPR", "--dataset", "tiny"], "BPR-copy.pth"),
        (["--checkpoint", "latest", "--model", "bpr"], "BPR-copy.pth"),
        (["--dataset", "tiny"], "MGFormer-copy.pth"),
        (["--checkpoint", "latest"], "MGFormer-copy.pth"),
    ],
)
def test_the_newest_checkpoint_of_a_model_and_dataset_is_found_and_named(checkpoints, saved, capsys, selection, chosen):
    model = chosen.split("-")[0]
    assert main([*selection, "--checkpoint_dir", str(saved), "--users", "u1", "--k", "3"]) == 0
    captured = capsys.readouterr()
    assert f"checkpoint: {saved / chosen} ({model} on tiny, the newest in {saved})" in captured.err
    expected = recommend(checkpoints[model], ["u1"], k=3)["u1"]
    assert [line.split()[2] for line in captured.out.splitlines()[1:]] == [item for item, _ in expected]


@pytest.mark.parametrize(
    "selection, folder, expected",
    [
        (
            ["--model", "BPR", "--dataset", "other"],
            "saved",
            r"no checkpoint of BPR on dataset 'other' in .*saved \(--checkpoint_dir\); its .pth files: "
            r"((notes.pth \(unreadable: not a torch.save archive\)|BPR-starting.pth \(unreadable: empty: a run that "
            r"has not saved yet, or a failed copy\)), ){2}MGFormer-copy.pth \(MGFormer on tiny\), "
            r"BPR-copy.pth \(BPR on tiny\)\. Train one with: python run.py --model=BPR --dataset=other "
            r"--checkpoint_dir=.*saved, or pass --checkpoint_dir",
        ),
        (
            ["--model", "LightGCN"],
            "absent",
            r"no checkpoint of LightGCN in .*absent \(--checkpoint_dir\); the folder does not exist\. Train one with: "
            r"python run.py --model=LightGCN --dataset=<dataset>",
        ),
        (
            ["--checkpoint", "some.pth", "--model", "BPR"],
            "saved",
            "--model and --dataset choose the newest checkpoint in --checkpoint_dir: give them with --checkpoint",
        ),
    ],
)
def test_no_checkpoint_to_choose_is_a_clear_error(saved, capsys, selection, folder, expected):
    assert main([*selection, "--checkpoint_dir", str(saved.parent / folder), "--users", "u1"]) == 2
    assert re.search(expected, capsys.readouterr().err)


def test_a_checkpoint_or_a_model_and_dataset_must_be_given(capsys):
    with pytest.raises(SystemExit) as stopped:
        main(["--users", "u1"])
    assert stopped.value.code == 2
    assert "give --checkpoint FILE, or --model and --dataset" in capsys.readouterr().err


def test_a_checkpoint_of_a_run_not_finished_is_served_with_a_note(checkpoints, tmp_path, capsys):
    best = tmp_path / checkpoints["BPR"].name
    best.write_bytes(checkpoints["BPR"].read_bytes())
    assert main(["--checkpoint", str(best), "--users", "u1"]) == 0
    assert "has not finished" not in capsys.readouterr().err
    best.with_suffix(".latest.pth").write_bytes(b"")  # a run still training keeps its last epoch beside its best
    assert main(["--checkpoint", str(best), "--users", "u1"]) == 0
    assert f"note: the run that wrote {best} has not finished" in capsys.readouterr().err


def test_a_k_above_the_items_left_to_a_user_says_how_many_there_are(checkpoints, capsys):
    assert main(["--checkpoint", str(checkpoints["BPR"]), "--users", "u1", "--k", "10000"]) == 0
    out, err = capsys.readouterr()
    shown = len(out.splitlines()) - 1
    assert 0 < shown < 60 and "note: 1 user(s) have fewer than --k 10000 items to recommend" in err
    assert err.rstrip().endswith(f"e.g. u1: {shown}")
