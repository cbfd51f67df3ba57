"""Per-user and per-group metrics of a full-sort evaluation, from the ranking the evaluation itself produced.

A :class:`TopItemsRecorder` keeps each evaluated user's top items and test items (:class:`TopItems`) while RecBole's
evaluator measures a pass, so the per-user NDCG of the paired tests and the metrics by item popularity (Fig. 2 of
the MGFormer paper) need no scoring pass of their own; and where the validation loader evaluates exactly what the
test loader does (a dataset whose validation file is its test file), the validation pass serves as the test.

Popularity groups: items are ranked by their number of training interactions: the 80% least interacted are
``Unpopular``, the 5% most interacted ``Popular``, the rest ``Normal`` (ties broken by item id). Each user's test
items are split by group; Recall@k and NDCG@k of a group count only that group's test items as relevant while the
ranking stays the full one, and average over the users with at least one test item in the group.
"""

import math
from dataclasses import dataclass

import numpy as np
import torch
from recbole.data.dataloader import FullSortEvalDataLoader

from recbole_mgformer.item_groups import GROUPS


def popularity_groups(train_counts, unpopular=0.8, popular=0.05):
    """Group index (0 Unpopular, 1 Normal, 2 Popular) of every item, (n_items,); ``train_counts[0]`` is
    RecBole's padding id and is left out of the ranking (group -1)."""
    counts = np.asarray(train_counts)
    items = np.arange(1, len(counts))
    order = items[np.lexsort((items, counts[1:]))]  # ascending count, then id
    n_unpopular, n_popular = int(len(order) * unpopular), math.ceil(len(order) * popular)
    groups = np.full(len(counts), -1, dtype=np.int64)
    groups[order[:n_unpopular]] = 0
    groups[order[n_unpopular : len(order) - n_popular]] = 1
    groups[order[len(order) - n_popular :]] = 2
    return groups


def training_counts(train_data):
    """Training interactions per internal item id, (n_items,)."""
    dataset = train_data._dataset
    items = dataset.inter_feat[dataset.iid_field].numpy()
    return np.bincount(items, minlength=dataset.item_num)


def _discounts(k):
    """DCG's position discounts 1 / log2(rank + 1) for ranks 1..k, and the ideal DCG by number of relevant items."""
    discounts = 1.0 / torch.log2(torch.arange(2, k + 2, dtype=torch.float64))
    return discounts, torch.cat([torch.zeros(1, dtype=torch.float64), discounts.cumsum(0)])


@dataclass(frozen=True)
class TopItems:
    """One full-sort pass's ranking, enough for any top-k metric with k <= width, per user or per item group.

    Shapes: ``u`` evaluated rows (users), ``w`` the width, ``p`` test items in all."""

    users: torch.Tensor  # (u,) internal user id of each row
    items: torch.Tensor  # (u, w) best items first, the history masked as RecBole masks it
    hits: torch.Tensor  # (u, w) bool: the item is one of the row's test items
    positive_rows: torch.Tensor  # (p,) the row of each test item
    positive_items: torch.Tensor  # (p,)

    @property
    def width(self):
        return self.items.shape[1]

    @classmethod
    def of_batch(cls, interaction, scores, positive_u, positive_i, uid_field, width):
        """The ranking of one batch of RecBole's ``_full_sort_batch_eval`` output, ``scores`` (b, items), left on
        the scores' device (no host sync per batch: :meth:`join` copies once)."""
        device = scores.device
        items = scores.topk(width, dim=1).indices  # the evaluator's own call when width = max(topk)
        relevant = torch.zeros(scores.shape, dtype=torch.bool, device=device)
        relevant[positive_u.to(device), positive_i.to(device)] = True
        users, positive_u, positive_i = (t.to(device) for t in (interaction[uid_field], positive_u, positive_i))
        return cls(users, items, relevant.gather(1, items), positive_u, positive_i)

    @classmethod
    def join(cls, batches):
        """One ranking of every batch's rows, on the host."""
        sizes = torch.tensor([len(batch.users) for batch in batches], device=batches[0].users.device)
        offsets = torch.cumsum(sizes, 0) - sizes
        return cls(
            torch.cat([batch.users for batch in batches]).cpu(),
            torch.cat([batch.items for batch in batches]).cpu(),
            torch.cat([batch.hits for batch in batches]).cpu(),
            torch.cat([batch.positive_rows + offset for batch, offset in zip(batches, offsets)]).cpu(),
            torch.cat([batch.positive_items for batch in batches]).cpu(),
        )

    def check_width(self, k):
        if k > self.width:
            raise ValueError(f"top-{k} metrics need a ranking of at least {k} items; this one keeps {self.width}")


def ranking_width(config, k):
    """The width to record for top-``k`` metrics beside RecBole's: its evaluator's (the largest ``topk``) when that
    covers ``k``, so a top-``k`` slice is exactly the ranking RecBole measured, ties included."""
    return max([*config["topk"], k])


class TopItemsRecorder:
    """While active (a context manager), keeps the :class:`TopItems` of the full-sort evaluations ``trainer`` runs,
    by wrapping its ``evaluate`` and ``_full_sort_batch_eval``; :meth:`top_items_of` returns a pass's by its result.

    Only two are kept: the latest pass's and that of the pass whose result the trainer holds as its best
    (``best_valid_result``, which RecBole's ``fit`` sets right after the pass), so a long training keeps its best
    epoch's ranking without keeping every epoch's."""

    def __init__(self, trainer, width):
        self.trainer, self.width = trainer, width
        self._latest = self._best = None  # (result, TopItems)
        self._batches = []

    def __enter__(self):
        trainer = self.trainer
        self._patched = {name: trainer.__dict__.get(name) for name in ("evaluate", "_full_sort_batch_eval")}
        evaluate, batch_eval = trainer.evaluate, trainer._full_sort_batch_eval
        uid_field = trainer.config["USER_ID_FIELD"]

        def recording_batch_eval(batched_data):
            interaction, scores, positive_u, positive_i = batch_eval(batched_data)
            self._batches.append(TopItems.of_batch(interaction, scores, positive_u, positive_i, uid_field, self.width))
            return interaction, scores, positive_u, positive_i

        def recording_evaluate(*args, **kwargs):
            if self._latest is not None and self._latest[0] is getattr(trainer, "best_valid_result", None):
                self._best = self._latest
            self._batches = []
            result = evaluate(*args, **kwargs)
            self._latest = (result, TopItems.join(self._batches)) if self._batches else None
            self._batches = []
            return result

        trainer.evaluate, trainer._full_sort_batch_eval = recording_evaluate, recording_batch_eval
        return self

    def __exit__(self, *exc):
        for name, previous in self._patched.items():
            if previous is None:
                del self.trainer.__dict__[name]
            else:
                setattr(self.trainer, name, previous)
        return False

    def top_items_of(self, result):
        """The ranking of the pass that returned ``result`` (the same object), or None when it is not kept."""
        for kept in (self._latest, self._best):
            if kept is not None and result is not None and kept[0] is result:
                return kept[1]
        return None


@torch.no_grad()
def evaluate_with_top_items(trainer, eval_data, width, **evaluate_kwargs):
    """``(RecBole's result, TopItems)`` of one evaluation pass (TopItems None for a loader that does not rank all
    items)."""
    with TopItemsRecorder(trainer, width) as recorder:
        result = trainer.evaluate(eval_data, **evaluate_kwargs)
    return result, recorder.top_items_of(result)


def same_evaluation(first, second):
    """Do two full-sort loaders evaluate the same users on the same test items with the same history masked (a
    dataset whose validation file is its test file, ``benchmark_filename: [train, test, test]``)? Then one pass
    measures both."""
    if first is second:
        return True
    loaders = (first, second)
    if not all(isinstance(loader, FullSortEvalDataLoader) and not loader.is_sequential for loader in loaders):
        return False
    if first._dataset.item_num != second._dataset.item_num or not torch.equal(first.uid_list, second.uid_list):
        return False

    def same_items(a, b):
        return len(a) == len(b) and torch.equal(a.sort().values, b.sort().values)

    return all(
        same_items(first.uid2positive_item[uid], second.uid2positive_item[uid])
        and same_items(first.uid2history_item[uid], second.uid2history_item[uid])
        for uid in first.uid_list.tolist()
    )


def ndcg_by_user(top_items, dataset, k=20):
    """``{user token: NDCG@k}`` of every evaluated user with a test item, so the mean over users is RecBole's
    NDCG@k; the rows of a paired test between two models. ``dataset``: the evaluated one (its tokens)."""
    top_items.check_width(k)
    discounts, ideal_dcg = _discounts(k)
    n_relevant = torch.bincount(top_items.positive_rows, minlength=len(top_items.users))
    ndcg = (top_items.hits[:, :k].double() * discounts).sum(dim=1) / ideal_dcg[n_relevant.clamp(max=k)]
    tokens = dataset.id2token(dataset.uid_field, top_items.users.numpy())
    return {str(token): float(value) for token, value, n in zip(tokens, ndcg, n_relevant) if n > 0}


@torch.no_grad()
def scores_by_row(trainer, eval_data):
    """``(labels, scores)``: every labelled row of ``eval_data`` (a context table's test) in the loader's order, as
    RecBole's AUC and LogLoss see them: the label field and the model's predicted probability."""
    trainer.model.eval()
    label_field = trainer.config["LABEL_FIELD"]
    labels, scores = [], []
    for batch in eval_data:
        interaction, score, _, _ = trainer._neg_sample_batch_eval(batch)
        labels.append(interaction[label_field].cpu().reshape(-1))
        scores.append(score.detach().cpu().reshape(-1).double())
    return torch.cat(labels).numpy(), torch.cat(scores).numpy()


def metrics_by_group(top_items, groups, k=20):
    """``{group: {"recall@k", "ndcg@k", "users"}}``: each group's Recall@k and NDCG@k, its test items alone
    relevant in the full ranking. With one group holding every item they equal RecBole's Recall@k and NDCG@k."""
    top_items.check_width(k)
    groups = torch.as_tensor(groups)
    n_groups = int(groups.max()) + 1
    n_rows = len(top_items.users)
    discounts, ideal_dcg = _discounts(k)
    # test items per (row, group): (u, n_groups)
    n_relevant = torch.bincount(
        top_items.positive_rows * n_groups + groups[top_items.positive_items], minlength=n_rows * n_groups
    ).view(n_rows, n_groups)
    top_groups = groups[top_items.items[:, :k]]  # (u, k)
    hits = top_items.hits[:, :k]
    names = GROUPS if n_groups == len(GROUPS) else [str(g) for g in range(n_groups)]
    result = {}
    for group, name in enumerate(names):
        in_group = (hits & (top_groups == group)).double()  # (u, k)
        relevant = n_relevant[:, group]
        has = relevant > 0
        users = int(has.sum())
        recall = (in_group.sum(dim=1)[has] / relevant[has]).sum()
        ndcg = ((in_group * discounts).sum(dim=1)[has] / ideal_dcg[relevant[has].clamp(max=k)]).sum()
        result[name] = {
            f"recall@{k}": float(recall / users) if users else None,
            f"ndcg@{k}": float(ndcg / users) if users else None,
            "users": users,
        }
    return result
