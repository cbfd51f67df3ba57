"""The user protocol (``train_protocol: user``) for general models whose loss scores every item for a user.

RecBole trains a general model on its training interactions drawn in a random order, ``train_batch_size`` pairs
a batch. A full-item loss (MGFormer's ``loss: softmax``) then makes a user's scores of every item once for each of
their pairs: a user with ``k`` training items has the same (items,) row of logits made ``k`` times an epoch. Here a
batch holds every training pair of its users instead, so the row is made once for all ``k`` pairs
(:func:`~recbole_mgformer.model.loss.linear_cross_entropy`'s ``rows``): the same pairs, each once an epoch, the
same loss of each pair, on Gowalla about 27 times fewer rows of logits.

A batch holds ``train_batch_size / (mean pairs per user)`` users (at least one), so a step sees as many pairs on
average and an epoch takes as many steps as under RecBole's protocol: the learning rate and the epoch cap keep
their meaning. The protocol differs from RecBole's in what a step sees: a user's pairs share one step (one
gradient, no update between them), and a batch's pairs come from fewer users. Under Adam, whose step is about the
learning rate whatever the gradient's size, a user's embedding then takes one step an epoch where RecBole's pairs
give it one for each pair: it moves less an epoch. ``train_user_chunk: c`` draws a user's pairs in chunks of at
most ``c`` (its rows in the split's order, cut in consecutive chunks), each chunk a draw of its own: ``c = 1`` is
RecBole's protocol in distribution, larger ``c`` makes the rows of logits fewer. Whether a protocol changes
accuracy is measured, not assumed (results/exploration/trained-hybrid/). Shapes: ``n`` training pairs, ``U``
chunks (users, without ``train_user_chunk``), ``B`` chunks a batch.
"""

import math
from logging import getLogger

import numpy as np
from recbole.data.dataloader.general_dataloader import NegSampleDataLoader, TrainDataLoader


class UserProtocolError(ValueError):
    """Training data or settings the user protocol cannot batch."""


def user_pair_rows(users):
    """The training rows grouped by user: users (n,) -> (order (n,), starts (U,), counts (U,)): ``order`` the row
    indices sorted by user (each user's rows in their original order), user ``u``'s rows
    ``order[starts[u]: starts[u] + counts[u]]``, over the U users that have a row, in id order."""
    users = np.asarray(users)
    order = np.argsort(users, kind="stable")
    _, starts, counts = np.unique(users[order], return_index=True, return_counts=True)
    return order, starts, counts


def chunked(starts, counts, chunk):
    """:func:`user_pair_rows`'s users cut into chunks of at most ``chunk`` consecutive rows -> (starts, counts) of
    the chunks, each user's in order."""
    pieces = -(-counts // chunk)  # chunks of each user, ceil
    first = np.repeat(starts, pieces)
    within = np.arange(int(pieces.sum())) - np.repeat(np.cumsum(pieces) - pieces, pieces)  # chunk j of its user
    return first + within * chunk, np.minimum(chunk, np.repeat(counts, pieces) - within * chunk)


def rows_of_users(order, starts, counts, index):
    """The training rows of the users at positions ``index`` (B,) of :func:`user_pair_rows`'s lists, each user's
    rows together, in ``index``'s order."""
    index = np.asarray(index, dtype=np.int64)
    firsts, sizes = starts[index], counts[index]
    # position j of the output is row firsts[k] + (j - offset of user k), for the user k that j falls in
    offsets = np.cumsum(sizes) - sizes
    return order[np.repeat(firsts - offsets, sizes) + np.arange(int(sizes.sum()))]


class UserBatchLoader(TrainDataLoader):
    """RecBole's training loader drawing users: an epoch draws every user with a training pair once (or each chunk
    of ``train_user_chunk`` pairs), ``step`` users a batch, and a batch is all of its users' pairs
    (:func:`rows_of_users`), as RecBole's rows."""

    def __init__(self, config, dataset, sampler, shuffle=False):
        self.logger = getLogger()
        self._set_neg_sample_args(config, dataset, config["MODEL_INPUT_TYPE"], config["train_neg_sample_args"])
        if self.neg_sample_args["distribution"] != "none":
            raise UserProtocolError(
                "train_protocol: user batches every training pair of a user for a loss over all items, which draws "
                "no negatives; set train_neg_sample_args: ~"
            )
        self.order, self.starts, self.counts = user_pair_rows(dataset.inter_feat[dataset.uid_field].numpy())
        if not len(self.counts):
            raise UserProtocolError("train_protocol: user: the training split has no interaction to batch")
        if config["train_user_chunk"] is not None:
            self.starts, self.counts = chunked(self.starts, self.counts, config["train_user_chunk"])
        self.sample_size = len(self.counts)  # what RecBole's loader counts and shuffles: users (or chunks)
        self.pairs_per_draw = float(self.counts.mean())  # a user's pairs, or a chunk's
        NegSampleDataLoader.__init__(self, config, dataset, sampler, shuffle=shuffle)

    def _init_batch_size_and_step(self):
        draws = max(1, math.floor(self.config["train_batch_size"] / self.pairs_per_draw + 0.5))
        self.step = draws
        self.set_batch_size(draws)

    def collate_fn(self, index):
        return super().collate_fn(rows_of_users(self.order, self.starts, self.counts, index))
