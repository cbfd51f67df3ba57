"""Graph-derived inputs of MGFormer: SVD structural encodings (Eq. 3) and degree buckets (Eq. 10).

Both are computed once from the training interaction matrix only.
"""

import math

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg

# Matrices up to this many entries take an exact dense SVD; larger ones use ARPACK.
DENSE_SVD_MAX_ENTRIES = 25_000_000


def truncated_svd(matrix, rank, seed=0):
    """The ``rank`` largest singular triplets of a sparse (M, N) matrix, largest first.

    Deterministic for a seed: ARPACK starts from a seeded vector, and each pair of singular
    vectors is flipped so that the largest-magnitude entry of ``u`` is positive.
    Returns ``u`` (M, r), ``s`` (r,), ``vt`` (r, N) with ``r = min(rank, M, N)``.
    """
    matrix = sp.csr_matrix(matrix, dtype=np.float64)
    rank = min(rank, *matrix.shape)
    if rank == 0:
        return np.zeros((matrix.shape[0], 0)), np.zeros(0), np.zeros((0, matrix.shape[1]))
    dense = matrix.shape[0] * matrix.shape[1] <= DENSE_SVD_MAX_ENTRIES
    if dense or rank >= min(matrix.shape) - 1:
        u, s, vt = np.linalg.svd(matrix.toarray(), full_matrices=False)
        u, s, vt = u[:, :rank], s[:rank], vt[:rank]
    else:
        start = np.random.default_rng(seed).standard_normal(min(matrix.shape))
        u, s, vt = scipy.sparse.linalg.svds(matrix, k=rank, v0=start)
        order = np.argsort(-s)
        u, s, vt = u[:, order], s[order], vt[order]
    signs = np.sign(u[np.abs(u).argmax(axis=0), np.arange(u.shape[1])])
    signs[signs == 0] = 1.0
    return u * signs, s, vt * signs[:, None]


def svd_structural_encodings(matrix, size, seed=0):
    """Eq. (3): users ``U sqrt(S)`` (M, size) and items ``V sqrt(S)`` (N, size).

    ``P_users @ P_items.T`` is the best rank-``size`` approximation of ``matrix``. Where the
    matrix allows fewer than ``size`` components the remaining columns are zero.
    """
    u, s, vt = truncated_svd(matrix, size, seed)
    root = np.sqrt(np.clip(s, 0.0, None))
    users = np.zeros((matrix.shape[0], size), dtype=np.float32)
    items = np.zeros((matrix.shape[1], size), dtype=np.float32)
    users[:, : len(s)] = u * root
    items[:, : len(s)] = vt.T * root
    return users, items


def degree_buckets(degrees, max_exact_degree):
    """Bucket ids for node degrees: exact below ``max_exact_degree``, then one bucket per
    doubling, so the degree table stays small on graphs with very high degrees."""
    degrees = np.asarray(degrees, dtype=np.int64)
    if max_exact_degree < 1:
        raise ValueError(f"max_exact_degree must be at least 1, got {max_exact_degree}")
    high = degrees >= max_exact_degree
    buckets = degrees.copy()
    ratio = np.maximum(degrees[high], 1) / max_exact_degree
    buckets[high] = max_exact_degree + np.floor(np.log2(ratio)).astype(np.int64)
    return buckets


def n_degree_buckets(max_degree, max_exact_degree):
    """Size of the table needed for :func:`degree_buckets` of degrees up to ``max_degree``."""
    if max_degree < max_exact_degree:
        return max_exact_degree
    return max_exact_degree + 1 + int(math.floor(math.log2(max_degree / max_exact_degree)))
