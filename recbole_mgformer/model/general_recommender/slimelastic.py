r"""SLIMElastic (Ning & Karypis, ICDM 2011), RecBole's model fit faster.

Each item ``j`` gets the weights of sklearn's ElasticNet on the user x item matrix ``X`` (float32, no intercept):
:math:`\min_w \frac{1}{2 n_{users}} \|X_j - X w\|^2 + \alpha \rho \|w\|_1 + \frac{\alpha (1 - \rho)}{2} \|w\|^2`,
with :math:`w_j = 0` under ``hide_item`` and :math:`w \ge 0` under ``positive_only``; the same solver settings as
RecBole's (coordinate descent, random selection, ``max_iter`` 100, duality-gap ``tol`` 1e-4 of :math:`\|X_j\|^2`).

RecBole's loop edits a LIL matrix twice per item (zero column ``j``, put it back) and hands the whole matrix to
sklearn, which converts it to CSC and validates it on every fit. Here ``X`` is converted to CSC once, item ``j`` is
hidden by leaving its column out of the design matrix, and, under ``positive_only``, only the items that co-occur
with ``j`` (share a user) are candidates:

Why the other items stay at 0 (positive_only): the KKT conditions of the problem say a feasible ``w`` is optimal iff
for every coordinate ``k``, with :math:`g_k = X_k^T (X_j - X w) / n_{users} - \alpha (1 - \rho) w_k`,
:math:`g_k = \alpha \rho` where :math:`w_k > 0` and :math:`g_k \le \alpha \rho` where :math:`w_k = 0`. Take the
optimum ``w*`` of the problem restricted to the co-occurring items and set every other coordinate to 0. For an item
``k`` that never co-occurs with ``j``, :math:`X_k^T X_j = 0`, and :math:`X_k^T X w^* \ge 0` because ``X`` and ``w*``
are non-negative; so :math:`g_k = -X_k^T X w^* / n_{users} \le 0 \le \alpha \rho` and the extended ``w*`` satisfies
the full KKT conditions. (Without ``positive_only`` :math:`-X_k^T X w^*` can exceed the threshold, so every item
stays a candidate there.) The duality gap sklearn checks against ``tol`` is the same on both problems at such a
point, so the stopping rule is unchanged too.
"""

import warnings

import numpy as np
import scipy.sparse as sp
import torch
from recbole.model.abstract_recommender import GeneralRecommender
from recbole.model.general_recommender.slimelastic import SLIMElastic as RecBoleSLIMElastic
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import ElasticNet

from recbole_mgformer.model.abstract_recommender import ItemSimilarityScores


def _check_options(alpha, l1_ratio, positive_only, hide_item):
    if not (isinstance(alpha, (int, float)) and alpha > 0):
        raise ValueError(f"SLIMElastic: alpha must be a number > 0 (the regularisation strength), got {alpha!r}")
    if not (isinstance(l1_ratio, (int, float)) and 0 <= l1_ratio <= 1):
        raise ValueError(f"SLIMElastic: l1_ratio must be a number in [0, 1] (the L1 share of alpha), got {l1_ratio!r}")
    for name, value in (("positive_only", positive_only), ("hide_item", hide_item)):
        if not isinstance(value, (bool, np.bool_)):
            raise ValueError(f"SLIMElastic: {name} must be true or false, got {value!r}")


def slim_weights(
    interactions, alpha, l1_ratio, positive_only=True, hide_item=True, max_iter=100, tol=1e-4, random_state=None
):
    """SLIMElastic's item weights (items, items) as a CSC matrix: column ``j`` holds item ``j``'s ElasticNet fit."""
    _check_options(alpha, l1_ratio, positive_only, hide_item)
    x = sp.csc_matrix(interactions, dtype=np.float32)  # (users, items)
    x.sort_indices()
    n_items = x.shape[1]
    # items sharing a user with each item (the Gram matrix's sparsity pattern), only needed under positive_only
    cooccurrence = sp.csc_matrix(x.T @ x) if positive_only else None
    everything = np.arange(n_items)
    model = ElasticNet(
        alpha=alpha,
        l1_ratio=l1_ratio,
        positive=positive_only,
        fit_intercept=False,
        copy_X=False,
        precompute=False,
        selection="random",
        max_iter=max_iter,
        tol=tol,
        random_state=random_state,
    )
    rows, cols, values = [], [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=ConvergenceWarning)
        for j in range(n_items):
            if positive_only:
                candidates = cooccurrence.indices[cooccurrence.indptr[j] : cooccurrence.indptr[j + 1]]
            else:
                candidates = everything
            if hide_item:
                candidates = candidates[candidates != j]
            if candidates.size == 0:
                continue
            target = x[:, j].toarray().ravel()  # (users,)
            if not target.any():
                continue  # X_j = 0: w = 0 is the optimum (and sklearn's fit would return it)
            design = x[:, candidates]  # (users, candidates), CSC
            model.fit(design, target, check_input=False)
            coef = model.coef_
            nonzero = np.flatnonzero(coef)
            rows.append(candidates[nonzero])
            cols.append(np.full(nonzero.size, j))
            values.append(coef[nonzero])
    if rows:
        rows, cols, values = np.concatenate(rows), np.concatenate(cols), np.concatenate(values)
    return sp.csc_matrix((np.asarray(values, dtype=np.float32), (rows, cols)), shape=(n_items, n_items))


class SLIMElastic(ItemSimilarityScores, RecBoleSLIMElastic):
    r"""SLIMElastic with RecBole's interface and settings, its weights computed by :func:`slim_weights`."""

    def __init__(self, config, dataset):
        GeneralRecommender.__init__(self, config, dataset)  # RecBole's __init__ would run its slow per-item loop
        self.hide_item = config["hide_item"]
        self.alpha = config["alpha"]
        self.l1_ratio = config["l1_ratio"]
        self.positive_only = config["positive_only"]
        self.dummy_param = torch.nn.Parameter(torch.zeros(1))
        interactions = sp.csr_matrix(dataset.inter_matrix(form="csr"), dtype=np.float32)
        self.item_similarity = slim_weights(
            interactions, self.alpha, self.l1_ratio, self.positive_only, self.hide_item, random_state=config["seed"]
        ).tocsr()
        self.interaction_matrix = interactions
        self.other_parameter_name = ["interaction_matrix", "item_similarity"]
        self.device = config.device
