import numpy as np
import pytest
import scipy.sparse as sp

from recbole_mgformer.model.mgformer import structural
from recbole_mgformer.model.mgformer.structural import degree_buckets, n_degree_buckets, svd_structural_encodings


def random_interactions(m=30, n=40, density=0.15, seed=0):
    rng = np.random.default_rng(seed)
    return sp.csr_matrix((rng.random((m, n)) < density).astype(np.float32))


def best_rank_approximation(dense, rank):
    u, s, vt = np.linalg.svd(dense, full_matrices=False)
    return (u[:, :rank] * s[:rank]) @ vt[:rank], s


@pytest.mark.parametrize("dense_limit", [10**9, 0], ids=["dense-svd", "arpack"])
def test_encodings_reproduce_the_best_rank_d_approximation(dense_limit, monkeypatch):
    monkeypatch.setattr(structural, "DENSE_SVD_MAX_ENTRIES", dense_limit)
    matrix = random_interactions()
    users, items = svd_structural_encodings(matrix, 6, seed=0)
    expected, singular_values = best_rank_approximation(matrix.toarray().astype(np.float64), 6)
    np.testing.assert_allclose(users @ items.T, expected, atol=1e-4)
    error = np.linalg.norm(matrix.toarray() - users @ items.T)
    assert error == pytest.approx(np.sqrt((singular_values[6:] ** 2).sum()), rel=1e-4)


def low_rank_plus_noise(m=300, n=200, rank=8, noise=0.05, seed=0):
    """A sparse matrix whose spectrum has a clear gap after ``rank``, as interaction matrices roughly do."""
    rng = np.random.default_rng(seed)
    scales = np.linspace(3.0, 1.0, rank)  # distinct singular values, so each vector is well defined
    signal = (rng.random((m, rank)) < 0.3) * scales @ (rng.random((rank, n)) < 0.3)
    return sp.csr_matrix(signal + noise * (rng.random((m, n)) < 0.05))


def test_randomized_solver_matches_the_exact_singular_values_and_subspace():
    matrix = low_rank_plus_noise()
    exact_u, exact_s, _ = structural.truncated_svd(matrix, 6, solver="dense")
    u, s, vt = structural.truncated_svd(matrix, 6, seed=1, solver="randomized")
    np.testing.assert_allclose(s, exact_s, rtol=1e-3)
    # Same leading subspace: the projection of one basis onto the other keeps its norm.
    assert np.linalg.norm(exact_u.T @ u) ** 2 == pytest.approx(6, rel=1e-3)
    np.testing.assert_allclose(u.T @ u, np.eye(6), atol=1e-8)
    np.testing.assert_allclose(vt @ vt.T, np.eye(6), atol=1e-8)


def test_randomized_solver_is_deterministic_for_a_seed_and_varies_with_it():
    matrix = random_interactions(m=60, n=50, seed=5)
    a = structural.truncated_svd(matrix, 4, seed=3, solver="randomized")
    b = structural.truncated_svd(matrix, 4, seed=3, solver="randomized")
    c = structural.truncated_svd(matrix, 4, seed=4, solver="randomized")
    np.testing.assert_array_equal(a[0], b[0])
    assert not np.array_equal(a[0], c[0])


def test_unknown_solver_is_named_in_the_error():
    with pytest.raises(ValueError, match="unknown SVD solver 'lanczos'.*randomized"):
        structural.truncated_svd(random_interactions(), 3, solver="lanczos")


def test_size_beyond_the_rank_pads_with_zero_columns():
    matrix = random_interactions(m=5, n=7)
    users, items = svd_structural_encodings(matrix, 16)
    assert users.shape == (5, 16) and items.shape == (7, 16)
    assert not users[:, 5:].any() and not items[:, 5:].any()
    np.testing.assert_allclose(users @ items.T, matrix.toarray(), atol=1e-5)


def test_encodings_are_deterministic_and_sign_fixed():
    matrix = random_interactions(seed=3)
    a = svd_structural_encodings(matrix, 5, seed=7)
    b = svd_structural_encodings(-(-matrix), 5, seed=7)  # noqa: B002 (a negated copy, on purpose)
    np.testing.assert_array_equal(a[0], b[0])
    u = a[0]
    assert (u[np.abs(u).argmax(axis=0), np.arange(5)] > 0).all()


def test_degree_buckets_are_exact_then_logarithmic():
    degrees = np.array([0, 1, 7, 8, 15, 16, 31, 32, 1000])
    buckets = degree_buckets(degrees, max_exact_degree=8)
    assert buckets.tolist() == [0, 1, 7, 8, 8, 9, 9, 10, 14]
    assert buckets.max() < n_degree_buckets(1000, 8)
    assert n_degree_buckets(5, 8) == 8
