import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from recbole_mgformer.data.user_batches import UserBatchLoader, UserProtocolError, rows_of_users, user_pair_rows

SOFTMAX = {"loss": "softmax", "attention": False, "train_protocol": "user"}


@settings(max_examples=60, deadline=None)
@given(users=st.lists(st.integers(0, 9), min_size=1, max_size=40), data=st.data())
def test_the_rows_of_drawn_users_are_all_of_their_rows_together_in_the_draws_order(users, data):
    order, starts, counts = user_pair_rows(users)
    assert counts.sum() == len(users) and len(counts) == len(set(users))
    draw = data.draw(st.permutations(range(len(counts))))
    cut = data.draw(st.integers(0, len(draw)))
    for index in (draw[:cut], draw[cut:]):
        rows = rows_of_users(order, starts, counts, index)
        ids = sorted(set(users))
        expected = [row for position in index for row in range(len(users)) if users[row] == ids[position]]
        assert rows.tolist() == expected  # each user's rows in their own order, users in the draw's order
    every = np.concatenate([rows_of_users(order, starts, counts, index) for index in (draw[:cut], draw[cut:])])
    assert sorted(every.tolist()) == list(range(len(users)))  # an epoch: every row once


def test_an_epoch_draws_every_training_pair_once_each_batch_whole_users(tiny_setup):
    config, model, _, (train, _, _) = tiny_setup(**SOFTMAX)
    assert isinstance(train, UserBatchLoader)
    feat = train._dataset.inter_feat
    pairs = sorted(zip(feat[model.USER_ID].tolist(), feat[model.ITEM_ID].tolist()))
    per_user = np.bincount(feat[model.USER_ID].numpy())
    users_a_batch = max(1, math.floor(config["train_batch_size"] / per_user[per_user > 0].mean() + 0.5))
    seen, batches = [], 0
    for batch in train:
        users = batch[model.USER_ID]
        distinct = torch.unique(users)
        assert len(distinct) <= users_a_batch
        for user in distinct.tolist():  # all of a user's pairs are in the batch that holds the user
            assert int((users == user).sum()) == per_user[user]
        seen += list(zip(users.tolist(), batch[model.ITEM_ID].tolist()))
        batches += 1
    assert sorted(seen) == pairs
    assert batches == math.ceil(int((per_user > 0).sum()) / users_a_batch)


def test_the_loader_draws_users_in_a_new_order_each_epoch_from_the_seed(tiny_setup):
    _, model, _, (train, _, _) = tiny_setup(**SOFTMAX)
    first, second = ([batch[model.USER_ID][0].item() for batch in train] for _ in range(2))
    assert first != second  # shuffled anew each epoch
    _, model, _, (again, _, _) = tiny_setup(**SOFTMAX)
    assert [batch[model.USER_ID][0].item() for batch in again] == first  # the same seed, the same epoch


def test_the_loader_refuses_negative_sampling(tiny_setup):
    with pytest.raises(UserProtocolError, match="train_neg_sample_args: ~"):
        tiny_setup(**SOFTMAX, train_neg_sample_args={"distribution": "uniform", "sample_num": 1})


@pytest.mark.parametrize(
    "model, overrides, message",
    [
        ("MGFormer", {"train_protocol": "user"}, "train_protocol: user batches a user's pairs for loss: softmax"),
        ("BPR", {"train_protocol": "user"}, "BPR does not train under train_protocol='user'.*MGFormer with loss"),
        ("MGFormer", {"train_protocol": "users"}, "train_protocol='users' must be one of prefix, sequence, user"),
        ("MGFormer", {**SOFTMAX, "train_window_stride": 5}, "train_window_stride applies to train_protocol: sequence"),
    ],
)
def test_a_protocol_a_model_does_not_train_under_is_an_error_naming_the_fix(tiny_setup, model, overrides, message):
    with pytest.raises(ValueError, match=message):
        tiny_setup(model, **overrides)
