"""The whole-sequence training protocol (``train_protocol: sequence``) for sequential models.

RecBole trains a sequential model on every prefix of every training history (``train_protocol: prefix``): a user
with items ``i_1 .. i_T`` gives rows ``<i_1> | i_2``, ``<i_1, i_2> | i_3``, ... (each prefix cut to its last
``MAX_ITEM_LIST_LENGTH`` items, ``L``), and a loss at each row's target. SASRec's paper instead runs each history
once through a causal model with a loss at every position: the same targets, from ``L`` times fewer encoder rows.

Here a history is cut into consecutive windows of ``L`` items from its end, so every training target is predicted
exactly once an epoch, as under RecBole's protocol. A window is one of RecBole's own rows (the one whose prefix ends
the window), so the dataset, the model's statistics of it and the evaluation are RecBole's unchanged; only the
loader draws window rows, and the model reads the targets of a window's positions from its row:
``items[1:length]`` then the row's target
(:func:`recbole_mgformer.model.recbole_sequential.next_item_targets`). The protocol differs from RecBole's in what a
target sees: the first target of a later window has no context, where its prefix row had ``L`` items, and the
targets of one window share one dropout draw and one batch. ``train_window_stride: N`` (default ``L``) ends a window
every ``N`` targets and trains its last ``N`` positions only, each with at least ``L - N`` items of context once the
history is that long: between this protocol (``N = L``) and RecBole's (``N = 1``).

A batch holds ``train_batch_size / (mean targets per window)`` windows (at least one), so a step sees as many
targets on average and an epoch takes as many steps as under RecBole's protocol; the learning rate and the epoch
cap keep their meaning. Shapes: ``n`` training rows, ``W`` windows, ``B`` batch, ``L`` window length.
"""

import math
from logging import getLogger

import numpy as np
import torch
from recbole.data.dataloader.general_dataloader import NegSampleDataLoader, TrainDataLoader

from recbole_mgformer.model.recbole_sequential import window_stride


class SequenceProtocolError(ValueError):
    """Training rows the whole-sequence protocol cannot cut into windows."""


def check_window_stride(config, protocol):
    """``train_window_stride``: set only with ``train_protocol: sequence``, a whole number of window positions."""
    stride, max_length = config["train_window_stride"], config["MAX_ITEM_LIST_LENGTH"]
    if stride is None:
        return
    if protocol != "sequence":
        raise ValueError("train_window_stride applies to train_protocol: sequence only; set both, or neither")
    if isinstance(stride, bool) or not isinstance(stride, int) or not 1 <= stride <= max_length:
        raise ValueError(
            f"train_window_stride={stride!r} must be a whole number from 1 to MAX_ITEM_LIST_LENGTH ({max_length})"
        )


def window_end_rows(users, lengths, max_length, stride=None):
    """The rows that end a window: users (n,) and prefix lengths (n,) of the training rows in RecBole's order
    (each user's rows together, in time order), ``max_length`` the window ``L`` -> row indices (W,), ascending.

    A user's rows ``k = 0 .. T-1`` have prefix lengths ``min(k + 1, L)``; row ``k`` ends a window when ``T - 1 - k``
    is a multiple of ``stride`` (default ``L``), and the window trains its last ``min(stride, length)`` positions,
    so the windows tile the history's targets from its end, each target in one window. A stride below ``L`` gives
    every trained position at least ``L - stride`` items of context once the history is that long."""
    users, lengths = np.asarray(users), np.asarray(lengths)
    if len(users) == 0:
        return np.zeros(0, dtype=np.int64)
    starts = np.flatnonzero(np.r_[True, users[1:] != users[:-1]])
    if len(starts) != len(np.unique(users)):
        raise SequenceProtocolError(
            "train_protocol: sequence needs each user's training rows together, in time order, as RecBole's "
            "sequential split gives them (eval_args order: TO); this dataset's rows of a user are scattered"
        )
    counts = np.diff(np.r_[starts, len(users)])
    position = np.arange(len(users)) - np.repeat(starts, counts)  # k within the user's rows
    expected = np.minimum(position + 1, max_length)
    if not np.array_equal(lengths, expected):
        row = int(np.flatnonzero(lengths != expected)[0])
        raise SequenceProtocolError(
            f"train_protocol: sequence needs each user's training rows to be every prefix of the history in time "
            f"order (lengths 1, 2, ..., {max_length}); row {row} (user {users[row]}) has length {int(lengths[row])}, "
            f"not {int(expected[row])}: use eval_args order: TO with a leave-one-out (LS) or ratio (RS) split"
        )
    return np.flatnonzero((np.repeat(counts, counts) - 1 - position) % (stride or max_length) == 0)


def check_window_rows(dataset, max_length, stride=None):
    """:func:`window_end_rows` of a RecBole SequentialDataset's training rows, refusing rows it cannot use."""
    if not hasattr(dataset, "item_list_length_field"):
        raise SequenceProtocolError("train_protocol: sequence is for sequential models (RecBole's SequentialDataset)")
    feat = dataset.inter_feat
    last = feat[dataset.item_id_list_field].gather(1, (feat[dataset.item_list_length_field] - 1).unsqueeze(1))
    users, lengths = feat[dataset.uid_field].numpy(), feat[dataset.item_list_length_field].numpy()
    rows = window_end_rows(users, lengths, max_length, stride)
    # consecutive rows of a user chain: each prefix ends with the row before's target
    same_user = feat[dataset.uid_field][1:] == feat[dataset.uid_field][:-1]
    chained = last.squeeze(1)[1:] == feat[dataset.iid_field][:-1]
    if not bool((chained | ~same_user).all()):
        row = int(torch.nonzero(same_user & ~chained)[0]) + 1
        raise SequenceProtocolError(
            f"train_protocol: sequence: training row {row}'s prefix does not end with the row before's target; the "
            "rows are not one user's prefixes in time order (use eval_args order: TO)"
        )
    return rows


class SequenceWindowLoader(TrainDataLoader):
    """RecBole's training loader over the window rows of a sequential dataset (:func:`window_end_rows`); an epoch
    draws every window once, ``step`` windows a batch."""

    def __init__(self, config, dataset, sampler, shuffle=False):
        self.logger = getLogger()
        self._set_neg_sample_args(config, dataset, config["MODEL_INPUT_TYPE"], config["train_neg_sample_args"])
        if self.neg_sample_args["distribution"] != "none":
            raise SequenceProtocolError(
                "train_protocol: sequence trains with a cross-entropy over all items at every position and draws no "
                "negatives; set train_neg_sample_args: ~ (and loss_type: CE)"
            )
        stride = window_stride(config)
        self.window_rows = check_window_rows(dataset, config["MAX_ITEM_LIST_LENGTH"], stride)
        self.sample_size = len(self.window_rows)  # what RecBole's loader counts and shuffles: windows
        lengths = dataset.inter_feat[dataset.item_list_length_field].numpy()[self.window_rows]
        self.targets_per_window = float(np.minimum(lengths, stride).mean()) if len(lengths) else 1.0
        NegSampleDataLoader.__init__(self, config, dataset, sampler, shuffle=shuffle)

    def _init_batch_size_and_step(self):
        windows = max(1, math.floor(self.config["train_batch_size"] / self.targets_per_window + 0.5))
        self.step = windows
        self.set_batch_size(windows)

    def collate_fn(self, index):
        return super().collate_fn(self.window_rows[np.asarray(index, dtype=np.int64)])
