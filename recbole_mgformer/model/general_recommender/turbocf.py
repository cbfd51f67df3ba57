r"""Turbo-CF (Park et al., "Turbo-CF: Matrix Decomposition-Free Graph Filtering for Fast Recommendation",
SIGIR 2024), training-free.

With ``R`` the binary training interactions (users x items) and ``D_U``, ``D_I`` its user and item degrees,

    R~ = D_U^{-alpha} R D_I^{-(1 - alpha)}          (asymmetric normalisation; alpha = 1/2 is GF-CF's)
    P  = (R~^T R~)^{o s}                             (item-item graph, each entry to the power s = ``power``)
    s_u = r_u h(P)

with a polynomial filter ``h`` (``filter``): ``linear`` ``h(P) = P``; ``second_order`` ``h(P) = 2P - P^2``;
``ideal_approx`` ``h(P) = P + 0.01 (-P^3 + 10 P^2 - 29 P)``, the paper's polynomial approximation of an ideal
low-pass filter. No matrix decomposition: that is the paper's point. These are the paper's normalisation, the
elementwise power of the item-item graph and its three polynomial filters (the paper is not on this machine, so its
equation numbers are not quoted here); every detail was checked against the authors' code (jindeok/Turbo-CF,
``main.py`` and ``utils.normalize_sparse_adjacency_matrix``: rows to ``-alpha``, columns to ``alpha - 1``; ``P.data
**= power``; ``--filter 1/2/3``) and its README's settings: Gowalla alpha 0.6, power 0.7, filter 1; Yelp2018 0.6,
1, 2; Amazon-Book 0.5, 1.4, 1. A degree of 0 scales to 0 here (the authors' code would divide by zero).

With ``power: 1`` ``P`` is applied as ``(r R~^T) R~``, two sparse products per block of users; any other power needs
``P`` itself, formed once as a sparse items x items matrix (as many entries as item pairs with a common user).
"""

import numbers

import numpy as np
import scipy.sparse as sp

from recbole_mgformer.model.filters import ClosedFormRecommender, ItemGraph, normalized_interactions
from recbole_mgformer.model.options import choice, positive_float

FILTERS = ("linear", "second_order", "ideal_approx")


def _alpha(config):
    value = config["alpha"]
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 <= value <= 1:
        raise ValueError(
            f"TurboCF: alpha must be a number in [0, 1] (the user side's share of the normalisation), "
            f"got {value!r} (set it in a config file or with --alpha=...)"
        )
    return float(value)


def item_graph(interactions, alpha, power):
    """``P = (R~^T R~)^{o power}`` as an :class:`ItemGraph`, factored when ``power`` is 1."""
    normalized = normalized_interactions(interactions, alpha, 1.0 - alpha)  # R~
    if power == 1.0:
        return ItemGraph(factor=normalized)
    gram = sp.csr_matrix(normalized.T @ normalized)  # (items, items), sparse
    gram.data = np.power(gram.data, power)
    return ItemGraph(matrix=gram)


class TurboCF(ClosedFormRecommender):
    r"""Turbo-CF; see ``properties/model/TurboCF.yaml`` for its options."""

    def fit(self, interactions, config):
        self.alpha = _alpha(config)
        self.power = positive_float(config, "power", "TurboCF")
        self.filter = choice(config, "filter", FILTERS, "TurboCF")
        self.graph = item_graph(interactions, self.alpha, self.power)

    def filter_rows(self, rows):  # (block, items) -> (block, items): r h(P)
        once = self.graph(rows)
        if self.filter == "linear":
            return once
        twice = self.graph(once)
        if self.filter == "second_order":
            return 2 * once - twice
        return once + 0.01 * (-self.graph(twice) + 10 * twice - 29 * once)
