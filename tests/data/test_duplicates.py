"""Repeated (user, item) interactions leak training into test; a run removes them unless told otherwise."""

import logging
import re

import numpy as np
import pytest

from recbole_mgformer import run_recommender
from recbole_mgformer.data.duplicates import apply_duplicate_policy
from recbole_mgformer.quick_start import build_config, prepare

SETTINGS = {
    "eval_args": {"split": {"RS": [0.8, 0.1, 0.1]}, "order": "RO", "group_by": "user", "mode": "full"},
    "metrics": ["Recall"],
    "topk": [10],
    "valid_metric": "Recall@10",
    "show_progress": False,
    "epochs": 30,
    "stopping_step": 100,
    "embedding_size": 16,
    "train_batch_size": 128,
    "learning_rate": 0.01,
    "state": "WARNING",
}


def write_repeats(folder, name="rep", repeats=5):
    """60 users with 10 random items each out of 100 (nothing to learn), the first ``repeats`` listed twice."""
    rng = np.random.default_rng(0)
    (folder / name).mkdir(parents=True, exist_ok=True)
    lines = ["user_id:token\titem_id:token"]
    for user in range(60):
        items = rng.choice(100, size=10, replace=False)
        lines += [f"u{user}\ti{item}" for item in list(items) + list(items[:repeats])]
    (folder / name / f"{name}.inter").write_text("\n".join(lines) + "\n")
    return folder


def split_pairs(data):
    frame = data.dataset.inter_feat
    return set(zip(frame["user_id"].tolist(), frame["item_id"].tolist()))


def test_repeated_pairs_are_removed_by_default_so_no_test_pair_is_a_training_pair(tmp_path, caplog):
    data = write_repeats(tmp_path)
    with caplog.at_level(logging.INFO):
        config, _ = build_config("BPR", "rep", config_dict={**SETTINGS, "data_path": str(data)})
        _, _, (train, _, test) = prepare(config)
    assert "rep: 300 repeated (user, item) interactions: removed, keeping the first of each" in caplog.text
    assert config["rm_dup_inter"] == "first"
    assert not split_pairs(train) & split_pairs(test)
    kept, _ = build_config("BPR", "rep", config_dict={**SETTINGS, "data_path": str(data), "rm_dup_inter": None})
    _, _, (train, _, test) = prepare(kept)
    assert len(split_pairs(train) & split_pairs(test)) > 20  # what the default prevents


def test_the_logged_config_names_the_removal_the_run_applies(tmp_path, caplog):
    settings = {**SETTINGS, "data_path": str(write_repeats(tmp_path)), "epochs": 1, "state": "INFO"}
    with caplog.at_level(logging.INFO):
        run_recommender("BPR", "rep", config_dict=settings, saved=False)
    text = re.sub(r"\x1b\[[0-9;]*m", "", caplog.text)  # as written when logged (a record formats later), colours off
    (logged,) = [line for line in text.splitlines() if "rm_dup_inter = " in line]
    assert logged.endswith("rm_dup_inter = first")  # not None, RecBole's default, while the run removed 300 rows


def test_the_leak_inflates_recall_and_the_default_prevents_it(tmp_path):
    """RecBole's full ranking masks a user's training items except those that are also test items, so a repeat
    split across training and test is an easy hit: Recall@10 0.60 against 0.15 here (chance: 0.10)."""
    data = write_repeats(tmp_path)
    settings = {**SETTINGS, "data_path": str(data)}
    leaked = run_recommender("BPR", "rep", config_dict={**settings, "rm_dup_inter": None}, saved=False)
    clean = run_recommender("BPR", "rep", config_dict=settings, saved=False)
    assert leaked["test_result"]["recall@10"] > 2 * clean["test_result"]["recall@10"]
    assert clean["test_result"]["recall@10"] < 0.3


def test_keeping_them_on_purpose_is_warned_about(tmp_path, caplog):
    config, _ = build_config(
        "BPR", "rep", config_dict={**SETTINGS, "rm_dup_inter": None, "data_path": str(write_repeats(tmp_path))}
    )
    with caplog.at_level(logging.WARNING):
        apply_duplicate_policy(config, 7)
    assert "7 repeated (user, item) interactions kept, as rm_dup_inter: ~ asks" in caplog.text
    assert config["rm_dup_inter"] is None


def test_sequential_models_keep_repeats_as_re_consumption_and_say_so(tmp_path):
    config, _ = build_config("SASRec", "ml-100k-seq")  # the sequential protocol's dataset config
    message = apply_duplicate_policy(config, 4)
    assert "4 repeated (user, item) interactions kept: sequential models read" in message
    assert config["rm_dup_inter"] is None


def test_a_dataset_without_repeats_is_left_as_it_is():
    config, _ = build_config("BPR", "ml-100k")
    assert apply_duplicate_policy(config, 0) is None and config["rm_dup_inter"] is None


def test_repeats_across_benchmark_files_are_an_error_that_says_how_to_choose(tmp_path):
    folder = tmp_path / "split"
    folder.mkdir()
    for part, body in (("train", "u1\ti1\nu1\ti2\nu2\ti1\n"), ("valid", "u2\ti2\n"), ("test", "u1\ti1\n")):
        (folder / f"split.{part}.inter").write_text("user_id:token\titem_id:token\n" + body)
    settings = {"data_path": str(tmp_path), "benchmark_filename": ["train", "valid", "test"], "state": "WARNING"}
    with pytest.raises(
        ValueError,
        match=r"1 repeated .* benchmark_filename files: .*remove the repeated lines .*"
        r"rm_dup_inter: ~",
    ):
        prepare(build_config("BPR", "split", config_dict=settings)[0])
