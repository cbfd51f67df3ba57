"""Graph-derived inputs of MGFormer: SVD structural encodings (Eq. 3) and degree buckets (Eq. 10).

Both are computed once from the training interaction matrix only.
"""

import math

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg

# Matrices up to this many entries take an exact dense SVD; larger ones use ARPACK.
DENSE_SVD_MAX_ENTRIES = 25_000_000


SVD_SOLVERS = ("auto", "dense", "arpack", "randomized")


def randomized_range(matrix, size, power_iterations, rng):
    """An orthonormal basis (M, size) for the dominant column space of ``matrix`` (Halko et al., 2011, Alg. 4.4).

    Each power iteration multiplies by ``A A^T`` and re-orthonormalises, so the small singular values fade
    as ``(s_k / s_j)^(2q+1)``; a sparse ``A`` is only touched through products.
    """
    basis, _ = np.linalg.qr(matrix @ rng.standard_normal((matrix.shape[1], size)))
    for _ in range(power_iterations):
        basis, _ = np.linalg.qr(matrix.T @ basis)
        basis, _ = np.linalg.qr(matrix @ basis)
    return basis


def randomized_svd(matrix, rank, seed=0, oversampling=16, power_iterations=4):
    """The ``rank`` largest singular triplets, approximately, in ``O(nnz * (rank + oversampling) * q)``:
    project onto a randomized range basis Q, then take the exact SVD of the small ``Q^T A``."""
    rng = np.random.default_rng(seed)
    size = min(rank + oversampling, *matrix.shape)
    basis = randomized_range(matrix, size, power_iterations, rng)
    u_small, s, vt = np.linalg.svd(np.asarray((matrix.T @ basis).T), full_matrices=False)
    return (basis @ u_small)[:, :rank], s[:rank], vt[:rank]


def truncated_svd(matrix, rank, seed=0, solver="auto"):
    """The ``rank`` largest singular triplets of a sparse (M, N) matrix, largest first.

    ``solver``: ``dense`` (LAPACK on the dense matrix), ``arpack`` (exact, iterative), ``randomized``
    (:func:`randomized_svd`, approximate and much faster on large graphs) or ``auto``: dense up to
    ``DENSE_SVD_MAX_ENTRIES`` entries, ARPACK above. Deterministic for a seed: ARPACK and the randomized
    solver start from seeded draws, and each pair of singular vectors is flipped so that the
    largest-magnitude entry of ``u`` is positive. Returns ``u`` (M, r), ``s`` (r,), ``vt`` (r, N)
    with ``r = min(rank, M, N)``.
    """
    if solver not in SVD_SOLVERS:
        raise ValueError(f"unknown SVD solver {solver!r}; choose one of {', '.join(SVD_SOLVERS)}")
    matrix = sp.csr_matrix(matrix, dtype=np.float64)
    rank = min(rank, *matrix.shape)
    if rank == 0:
        return np.zeros((matrix.shape[0], 0)), np.zeros(0), np.zeros((0, matrix.shape[1]))
    if solver == "auto":
        solver = "dense" if matrix.shape[0] * matrix.shape[1] <= DENSE_SVD_MAX_ENTRIES else "arpack"
    if solver == "arpack" and rank >= min(matrix.shape) - 1:
        solver = "dense"  # ARPACK needs rank < min(M, N)
    if solver == "dense":
        u, s, vt = np.linalg.svd(matrix.toarray(), full_matrices=False)
        u, s, vt = u[:, :rank], s[:rank], vt[:rank]
    elif solver == "randomized":
        u, s, vt = randomized_svd(matrix, rank, seed)
    else:
        start = np.random.default_rng(seed).standard_normal(min(matrix.shape))
        u, s, vt = scipy.sparse.linalg.svds(matrix, k=rank, v0=start)
        order = np.argsort(-s)
        u, s, vt = u[:, order], s[order], vt[order]
    signs = np.sign(u[np.abs(u).argmax(axis=0), np.arange(u.shape[1])])
    signs[signs == 0] = 1.0
    return u * signs, s, vt * signs[:, None]


def svd_structural_encodings(matrix, size, seed=0, solver="auto"):
    """Eq. (3): users ``U sqrt(S)`` (M, size) and items ``V sqrt(S)`` (N, size), from :func:`truncated_svd`.

    ``P_users @ P_items.T`` is the best rank-``size`` approximation of ``matrix``. Where the
    matrix allows fewer than ``size`` components the remaining columns are zero.
    """
    u, s, vt = truncated_svd(matrix, size, seed, solver)
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
