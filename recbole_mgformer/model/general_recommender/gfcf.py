r"""GF-CF (Shen et al., "How Powerful is Graph Convolution for Recommendation?", CIKM 2021), training-free.

With ``R`` the binary training interactions (users x items), ``D_U``, ``D_I`` its user and item degrees,

    R~ = D_U^{-1/2} R D_I^{-1/2}                    (normalised interactions)
    P~ = R~^T R~                                     (the linear filter, an item-item graph)
    s_u = r_u (P~ + alpha D_I^{-1/2} V_k V_k^T D_I^{1/2})

where ``r_u`` is user u's row of ``R`` and ``V_k`` the right singular vectors of the ``k`` largest singular
values of ``R~`` (the ideal low-pass filter). This is the paper's GF-CF (its Section 4, "GF-CF", the linear
filter plus the ideal low-pass filter; the paper is not on this machine, so its equation numbers are not quoted
here); every exponent above was checked against the authors' code (yshenaw/GF_CF, ``Table3&4/model.py``,
``GF_CF.train`` and ``getUsersRating``): ``k = 256`` and ``alpha = 0.3`` on Gowalla and Yelp2018, ``alpha = 0``
(the linear filter alone) on Amazon-Book. The authors' ``D_I^{1/2}`` is ``1 / D_I^{-1/2}``, infinite for an item
without training interactions; here such an item scales to 0 (its column of ``R~`` and row of ``V_k`` are zero).

``P~`` is applied as ``(r R~^T) R~``, two sparse products per block of users, so neither a users x users nor an
items x items matrix is formed; ``alpha = 0`` skips the singular value decomposition.
"""

from recbole_mgformer.model.filters import (
    ClosedFormRecommender,
    ItemGraph,
    ideal_low_pass,
    item_degrees,
    normalized_interactions,
)
from recbole_mgformer.model.options import non_negative_float, positive_int


class GFCF(ClosedFormRecommender):
    r"""GF-CF; see ``properties/model/GFCF.yaml`` for its options."""

    def fit(self, interactions, config):
        self.k = positive_int(config, "k", "GFCF")
        self.alpha = non_negative_float(config, "alpha", "GFCF")
        normalized = normalized_interactions(interactions, 0.5, 0.5)  # R~
        self.linear = ItemGraph(factor=normalized)
        self.ideal = (
            ideal_low_pass(normalized, item_degrees(interactions), self.k, config["seed"], "GFCF")
            if self.alpha > 0
            else None
        )

    def filter_rows(self, rows):  # (block, items) -> (block, items)
        scores = self.linear(rows)
        if self.ideal is not None:
            scores = scores + self.alpha * self.ideal(rows)
        return scores
