import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from recbole_mgformer.data.user_batches import (
    UserBatchLoader,
    UserProtocolError,
    chunked,
    rows_of_users,
    user_pair_rows,
)

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


@settings(max_examples=60, deadline=None)
@given(users=st.lists(st.integers(0, 6), min_size=1, max_size=40), chunk=st.integers(1, 6))
def test_chunks_cut_each_users_rows_in_consecutive_pieces_of_at_most_the_chunk(users, chunk):
    order, starts, counts = user_pair_rows(users)
    chunk_starts, chunk_counts = chunked(starts, counts, chunk)
    assert chunk_counts.min() >= 1 and chunk_counts.max() <= chunk
    pieces = [order[start : start + count].tolist() for start, count in zip(chunk_starts, chunk_counts)]
    whole = [order[start : start + count].tolist() for start, count in zip(starts, counts)]
    assert [row for piece in pieces for row in piece] == [row for rows in whole for row in rows]  # in order, once
    for piece in pieces:
        assert len({users[row] for row in piece}) == 1  # a chunk is one user's
    assert len(pieces) == sum(-(-count // chunk) for count in counts)  # as few chunks as the size allows
    assert chunked(starts, counts, max(counts))[1].tolist() == counts.tolist()  # a chunk as large as any user: users


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


@pytest.mark.parametrize("chunk", [1, 3])
def test_chunks_of_a_user_are_drawn_apart_every_pair_once_an_epoch(tiny_setup, chunk):
    config, model, _, (train, _, _) = tiny_setup(**SOFTMAX, train_user_chunk=chunk)
    feat = train._dataset.inter_feat
    pairs = sorted(zip(feat[model.USER_ID].tolist(), feat[model.ITEM_ID].tolist()))
    per_user = np.bincount(feat[model.USER_ID].numpy())
    chunks = int(sum(-(-count // chunk) for count in per_user if count))
    chunks_a_batch = max(1, math.floor(config["train_batch_size"] / (len(pairs) / chunks) + 0.5))
    seen, sizes = [], []
    for batch in train:
        seen += list(zip(batch[model.USER_ID].tolist(), batch[model.ITEM_ID].tolist()))
        sizes.append(len(batch))
    assert sorted(seen) == pairs and len(sizes) == math.ceil(chunks / chunks_a_batch)
    if chunk == 1:  # RecBole's protocol in distribution: train_batch_size random pairs a batch
        assert sizes[:-1] == [config["train_batch_size"]] * (len(sizes) - 1)
    loss = model.calculate_loss(next(iter(train)))
    assert torch.isfinite(loss)


def test_the_loader_draws_users_in_a_new_order_each_epoch_from_the_seed(tiny_setup):
    _, model, _, (train, _, _) = tiny_setup(**SOFTMAX)
    first, second = ([batch[model.USER_ID][0].item() for batch in train] for _ in range(2))
    assert first != second  # shuffled anew each epoch
    _, model, _, (again, _, _) = tiny_setup(**SOFTMAX)
    assert [batch[model.USER_ID][0].item() for batch in again] == first  # the same seed, the same epoch


def test_the_loader_refuses_negative_sampling(tiny_setup):
    with pytest.raises(UserProtocolError, match="train_neg_sample_args: ~"):
        tiny_setup(**SOFTMAX, train_neg_sample_args={"distribution": "uniform", "sample_num": 1})
