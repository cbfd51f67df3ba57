r"""ItemKNN (cosine neighbours, Aiolli RecSys 2013 / Sarwar et al. WWW 2001), RecBole's model scored per batch.

The similarities are RecBole's own (``ComputeSimilarity``: cosine with ``shrink`` added to the denominator, each
item's (or user's) ``k`` most similar kept, itself left out), so a row of this model equals a row of RecBole's.
RecBole's constructor then multiplies them out into every user's scores at once (``pred_mat``, a LIL matrix holding
each user's scores over every item a neighbour list reaches): on Gowalla, a search of ``k`` up to 1000 had a trial
killed by Ray's memory monitor at 19.7 GB of the machine's 24. Here the scores of each evaluation batch are
computed when asked for (:class:`ItemSimilarityScores`): ``X_u W`` for ``knn_method: item`` (``W`` items x items),
``W_u X`` for ``user`` (``W`` users x users).
"""

import numbers

import numpy as np
import torch
from recbole.model.abstract_recommender import GeneralRecommender
from recbole.model.general_recommender.itemknn import ComputeSimilarity
from recbole.model.general_recommender.itemknn import ItemKNN as RecBoleItemKNN

from recbole_mgformer.model.abstract_recommender import ItemSimilarityScores

KNN_METHODS = ("item", "user")


def _check_options(k, shrink, method):
    if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 1:
        raise ValueError(f"ItemKNN: k must be a whole number >= 1 (the neighbours kept), got {k!r}")
    if isinstance(shrink, bool) or not isinstance(shrink, numbers.Real) or not shrink >= 0:
        raise ValueError(f"ItemKNN: shrink must be a number >= 0 (added to the cosine's denominator), got {shrink!r}")
    if method not in KNN_METHODS:
        raise ValueError(f"ItemKNN: knn_method must be one of {', '.join(KNN_METHODS)}, got {method!r}")


def knn_weights(interactions, k, shrink=0.0, method="item"):
    """RecBole's neighbour similarities as a CSR matrix: (items, items), column ``j`` holding item ``j``'s
    neighbours, for ``item``; (users, users), row ``u`` holding user ``u``'s, for ``user``."""
    _check_options(k, shrink, method)
    _, weights = ComputeSimilarity(interactions, topk=int(k), shrink=shrink, method=method).compute_similarity()
    return weights.tocsr()


class ItemKNN(ItemSimilarityScores, RecBoleItemKNN):
    """ItemKNN with RecBole's interface, settings and similarities, without RecBole's all-users score matrix."""

    def __init__(self, config, dataset):
        GeneralRecommender.__init__(self, config, dataset)  # RecBole's __init__ would build pred_mat
        self.k = config["k"]
        self.method = config["knn_method"]
        self.shrink = config["shrink"] if "shrink" in config else 0.0
        self.interaction_matrix = dataset.inter_matrix(form="csr").astype(np.float32)
        self.w = knn_weights(self.interaction_matrix, self.k, self.shrink, self.method)
        self.fake_loss = torch.nn.Parameter(torch.zeros(1))
        self.other_parameter_name = ["interaction_matrix", "w"]
        self.device = config.device

    def score_factors(self):
        if self.method == "user":
            return self.w, self.interaction_matrix
        return self.interaction_matrix, self.w
