"""Top-k recommendations and embeddings from a checkpoint, against RecBole's own full-sort ranking."""

import contextlib
import csv
import json
import os

import numpy as np
import pytest
import torch
from conftest import TINY_CONFIG, write_interactions
from recbole.utils.case_study import full_sort_topk

from recbole_mgformer import run_recommender
from recbole_mgformer.recommend import export_embeddings, load, main, recommend


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


def test_the_command_reports_unknown_users_and_exits_2(checkpoints, capsys):
    assert main(["--checkpoint", str(checkpoints["BPR"]), "--users", "u1,ghost"]) == 2
    assert "'ghost'" in capsys.readouterr().err


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
