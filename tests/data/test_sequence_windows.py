"""The whole-sequence protocol's windows: they tile every history from its end, each training target once an
epoch; rows that are not one user's prefixes in time order are refused by name."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from recbole_mgformer.data.sequence_windows import SequenceProtocolError, window_end_rows
from recbole_mgformer.model.recbole_sequential import next_item_targets


def recbole_rows(history_lengths, max_length):
    """The users and prefix lengths of RecBole's training rows for histories of these numbers of rows."""
    users = np.repeat(np.arange(len(history_lengths)), history_lengths)
    lengths = np.concatenate([np.minimum(np.arange(n) + 1, max_length) for n in history_lengths] or [[]])
    return users, lengths.astype(np.int64)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(1, 40), max_size=12), st.integers(1, 9), st.data())
def test_windows_train_every_training_rows_target_exactly_once(history_lengths, max_length, data):
    stride = data.draw(st.one_of(st.none(), st.integers(1, max_length)))
    users, lengths = recbole_rows(history_lengths, max_length)
    rows = window_end_rows(users, lengths, max_length, stride)
    trained = [min(stride or max_length, lengths[row]) for row in rows]  # a window's last positions
    covered = np.concatenate([np.arange(row - n + 1, row + 1) for row, n in zip(rows, trained)] or [[]])
    assert sorted(covered.tolist()) == list(range(len(users)))  # each row's target once
    assert all(users[row - lengths[row] + 1] == users[row] for row in rows)  # a window is one user's
    # a trained position sees at least L - stride items before it, once its history is that long
    first_rows = {int(np.flatnonzero(users == user)[0]) for user in np.unique(users)}
    for row, n in zip(rows, trained):
        if row - lengths[row] + 1 not in first_rows:
            assert lengths[row] == max_length and lengths[row] - n >= max_length - (stride or max_length)


def test_a_history_is_cut_from_its_end():
    users, lengths = recbole_rows([7], 3)  # targets 1..7 (row k predicts item k + 1)
    assert window_end_rows(users, lengths, 3).tolist() == [0, 3, 6]  # <i1>|i2, <i2 i3 i4>|i5, <i5 i6 i7>|i8


@pytest.mark.parametrize(
    "users, lengths, message",
    [
        ([0, 1, 0], [1, 1, 2], "scattered"),
        ([0, 0, 0], [1, 3, 3], "row 1 \\(user 0\\) has length 3, not 2"),
        ([0, 0], [2, 3], "row 0 \\(user 0\\) has length 2, not 1"),
    ],
)
def test_rows_that_are_not_prefixes_in_time_order_are_refused(users, lengths, message):
    with pytest.raises(SequenceProtocolError, match=message):
        window_end_rows(np.array(users), np.array(lengths), 3)


def test_next_item_targets_shift_the_window_and_end_with_the_rows_target():
    item_seq = torch.tensor([[5, 6, 7, 0], [8, 9, 10, 11], [12, 0, 0, 0]])
    lengths, own = torch.tensor([3, 4, 1]), torch.tensor([20, 21, 22])
    assert next_item_targets(item_seq, lengths, own).tolist() == [[6, 7, 20, 0], [9, 10, 11, 21], [22, 0, 0, 0]]
    # with a stride, only the window's last positions keep a target
    assert next_item_targets(item_seq, lengths, own, 2).tolist() == [[0, 7, 20, 0], [0, 0, 11, 21], [22, 0, 0, 0]]
