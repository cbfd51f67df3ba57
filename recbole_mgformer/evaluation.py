"""Metrics by item popularity (Fig. 2 of the MGFormer paper).

Items are ranked by their number of training interactions: the 80% least interacted are ``Unpopular``,
the 5% most interacted ``Popular``, the rest ``Normal`` (ties broken by item id). Each user's test items
are split by group; Recall@k and NDCG@k of a group count only that group's test items as relevant while
the ranking stays the full one, and average over the users with at least one test item in the group.
"""

import math

import numpy as np
import torch

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


@torch.no_grad()
def ndcg_by_user(trainer, eval_data, k=20):
    """``{user token: NDCG@k}`` of every user ``eval_data`` evaluates, from RecBole's full-sort scores (history
    items masked), so the mean over users is RecBole's NDCG@k; the rows of a paired test between two models."""
    trainer.model.eval()
    trainer.tot_item_num = eval_data._dataset.item_num
    dataset = eval_data._dataset
    discounts, ideal_dcg = _discounts(k)
    values = {}
    for batch in eval_data:
        interaction, scores, positive_u, positive_i = trainer._full_sort_batch_eval(batch)
        top = scores.topk(k, dim=1).indices.cpu()
        relevant = torch.zeros(scores.shape, dtype=torch.bool)
        relevant[positive_u.cpu(), positive_i.cpu()] = True
        n_relevant = relevant.sum(dim=1)
        ndcg = (relevant.gather(1, top).double() * discounts).sum(dim=1) / ideal_dcg[n_relevant.clamp(max=k)]
        tokens = dataset.id2token(dataset.uid_field, interaction[dataset.uid_field].cpu().numpy())
        values.update((str(token), float(value)) for token, value, n in zip(tokens, ndcg, n_relevant) if n > 0)
    return values


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


@torch.no_grad()
def metrics_by_group(trainer, eval_data, groups, k=20):
    """``{group: {"recall@k", "ndcg@k", "users"}}`` for a trainer whose model holds the weights to evaluate.

    Scores come from RecBole's own full-sort path (history items masked), so with one group holding every
    item the numbers equal RecBole's Recall@k and NDCG@k.
    """
    trainer.model.eval()
    trainer.tot_item_num = eval_data._dataset.item_num
    groups = torch.as_tensor(groups)
    n_groups = int(groups.max()) + 1
    discounts, ideal_dcg = _discounts(k)  # the ideal DCG by number of relevant items
    recall_sum, ndcg_sum, users = (torch.zeros(n_groups, dtype=torch.float64) for _ in range(3))
    for batch in eval_data:
        _, scores, positive_u, positive_i = trainer._full_sort_batch_eval(batch)
        top = scores.topk(k, dim=1).indices.cpu()  # (b, k)
        relevant = torch.zeros(scores.shape, dtype=torch.bool)
        relevant[positive_u.cpu(), positive_i.cpu()] = True  # (b, items)
        for group in range(n_groups):
            in_group = relevant & (groups == group)[None, :]
            n_relevant = in_group.sum(dim=1)  # (b,)
            has = n_relevant > 0
            hits = in_group.gather(1, top).double()  # (b, k)
            ideal = ideal_dcg[n_relevant.clamp(max=k)]
            recall_sum[group] += (hits.sum(dim=1)[has] / n_relevant[has]).sum()
            ndcg_sum[group] += ((hits * discounts).sum(dim=1)[has] / ideal[has]).sum()
            users[group] += has.sum()
    names = GROUPS if n_groups == len(GROUPS) else [str(g) for g in range(n_groups)]
    return {
        name: {
            f"recall@{k}": float(recall_sum[g] / users[g]) if users[g] else None,
            f"ndcg@{k}": float(ndcg_sum[g] / users[g]) if users[g] else None,
            "users": int(users[g]),
        }
        for g, name in enumerate(names)
    }
