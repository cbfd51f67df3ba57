"""The vocabularies a checkpoint keeps, and the changes of the data they name."""

import numpy as np
import pytest

from recbole_mgformer.training.vocabulary import DatasetChangedError, check_training_split, vocabulary_changes


def test_renumbered_tokens_are_named_with_their_ids_and_the_reorder():
    (change,) = vocabulary_changes(["[PAD]", "a", "b", "c"], ["[PAD]", "b", "a", "c"], "users")
    assert change.startswith("2 users renumbered ('b' id 2 then, 1 now, 'a' id 1 then, 2 now)")
    assert "the rows were reordered" in change


def test_added_and_removed_tokens_are_counted_with_examples():
    changes = vocabulary_changes(["[PAD]", "a", "b"], ["[PAD]", "a", "c", "d", "e", "f"], "items")
    assert changes == ["4 items added ('c', 'd', 'e', ...)", "1 items removed ('b')"]
    assert vocabulary_changes(["[PAD]", "a"], ["[PAD]", "a"], "items") == []


class Split:
    uid_field, iid_field, dataset_name = "user_id", "item_id", "toy"
    config = {"data_path": "data/toy"}

    def __init__(self, users, items):
        self.inter_feat = {"user_id": np.array(users), "item_id": np.array(items)}


def test_a_split_with_the_same_pairs_in_another_order_matches_and_other_pairs_do_not():
    from recbole_mgformer.training.vocabulary import split_fingerprint

    recorded = {"vocabulary": {"train": split_fingerprint(Split([1, 1, 2], [3, 4, 3]))}}
    check_training_split(recorded, Split([2, 1, 1], [3, 4, 3]), "x.pth")
    with pytest.raises(
        DatasetChangedError,
        match=r"x.pth: the training split .* \(as many interactions \(3\), but "
        r"other \(user, item\) pairs\)",
    ):
        check_training_split(recorded, Split([1, 1, 2], [3, 5, 3]), "x.pth")
