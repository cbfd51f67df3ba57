r"""EASE (Steck, "Embarrassingly Shallow Autoencoders for Sparse Data", WWW 2019), RecBole's model fit faster.

The closed form (Eq. 8 of the paper): with :math:`P = (X^T X + \lambda I)^{-1}`, the item weights are
:math:`B = I - P \operatorname{diagMat}(1 \oslash \operatorname{diag}(P))`, i.e. :math:`B_{ij} = -P_{ij} / P_{jj}` off
the diagonal and 0 on it. RecBole's EASE inverts the Gram matrix with ``np.linalg.inv`` (an LU inverse: about
:math:`2 n^3` flops and three dense copies of it). The Gram matrix is symmetric positive definite, so here it is
inverted in place through its Cholesky factor (LAPACK ``potrf`` then ``potri``: about :math:`n^3` flops, one dense
copy), which fits Amazon-Beauty within the one-core target of ``experiments/fit_time.py`` and Gowalla's 41k items
in memory. Same settings (``reg_weight``), the same float32 arithmetic as RecBole's, and its ``predict`` /
``full_sort_predict`` scoring (``X_u B``).
"""

import numpy as np
import scipy.linalg.lapack as lapack
import scipy.sparse as sp
import torch
from recbole.model.abstract_recommender import GeneralRecommender
from recbole.model.general_recommender.ease import EASE as RecBoleEASE
from threadpoolctl import threadpool_limits

from recbole_mgformer.model.abstract_recommender import ItemSimilarityScores

_SYMMETRISE_BLOCK = 2048  # rows copied at a time: O(n * block) extra memory, not a second n x n matrix
# OpenBLAS's threaded potrf crashes (SIGSEGV, at its start) on large matrices: on 2 threads at n = 28,000 and
# Yelp2018's 38,049 items, not at 26,000 (OpenBLAS 0.3.21 of scipy 1.12, and scipy 1.18's); on one thread it factors
# and inverts 38,049. Above this size the two LAPACK calls run on one BLAS thread.
_THREADED_LAPACK_MAX_SIZE = 16384


def symmetric_inverse(gram):
    """The inverse of the symmetric positive definite ``gram`` (n, n), computed in place (``gram`` is consumed)."""
    potrf, potri = lapack.get_lapack_funcs(("potrf", "potri"), (gram,))
    threads = 1 if gram.shape[0] > _THREADED_LAPACK_MAX_SIZE else None  # None: as many as BLAS has
    with threadpool_limits(limits=threads, user_api="blas"):
        factor, info = potrf(gram, lower=False, overwrite_a=True, clean=False)
        if info != 0:
            raise ValueError(
                f"EASE: the regularised Gram matrix is not positive definite (LAPACK potrf info {info}); "
                "raise reg_weight (it must be > 0)"
            )
        inverse, info = potri(factor, lower=False, overwrite_c=True)
    if info != 0:
        raise ValueError(f"EASE: the Cholesky inverse failed (LAPACK potri info {info}); raise reg_weight")
    fill_lower_from_upper(inverse)
    return inverse


def fill_lower_from_upper(matrix):
    """Copy the upper triangle of the square ``matrix`` onto its lower one, in place and in row blocks
    (LAPACK's ``potri`` writes only the upper triangle; the lower one holds the factor's leftovers)."""
    n = matrix.shape[0]
    for start in range(0, n, _SYMMETRISE_BLOCK):
        stop = min(start + _SYMMETRISE_BLOCK, n)
        diagonal = matrix[start:stop, start:stop]
        diagonal[...] = np.triu(diagonal) + np.triu(diagonal, 1).T
        matrix[stop:, start:stop] = matrix[start:stop, stop:].T


def ease_weights(interactions, reg_weight):
    """EASE's item weights ``B`` (items, items) from the user x item ``interactions`` (sparse), in float32."""
    if not reg_weight > 0:
        raise ValueError(
            f"EASE: reg_weight must be > 0 (the ridge that makes X^T X + reg_weight I invertible), got {reg_weight!r}"
        )
    gram = (interactions.T @ interactions).astype(np.float32)
    weights = np.asfortranarray(gram.toarray())  # Fortran order: LAPACK works on it in place, without a copy
    del gram
    weights[np.diag_indices_from(weights)] += np.float32(reg_weight)
    # P is symmetric, so its transpose is P itself in C order, without a copy: scipy's sparse-dense product (the
    # scoring, X_u B) copies an F-ordered operand at every call, which made a Beauty evaluation ~100x slower
    weights = symmetric_inverse(weights).T  # P
    weights /= -np.diag(weights).copy()  # B_ij = -P_ij / P_jj (column j scaled)
    np.fill_diagonal(weights, 0.0)
    return weights


class EASE(ItemSimilarityScores, RecBoleEASE):
    r"""EASE with RecBole's interface and settings, its closed form computed by :func:`ease_weights`."""

    def __init__(self, config, dataset):
        GeneralRecommender.__init__(self, config, dataset)  # RecBole's EASE.__init__ would fit by np.linalg.inv
        self.dummy_param = torch.nn.Parameter(torch.zeros(1))
        interactions = sp.csr_matrix(dataset.inter_matrix(form="csr"), dtype=np.float32)
        self.item_similarity = ease_weights(interactions, float(config["reg_weight"]))
        self.interaction_matrix = interactions
        self.other_parameter_name = ["interaction_matrix", "item_similarity"]
        self.device = config.device
