import numpy as np
import pytest
import scipy.sparse as sp
from dense_filters import assert_predict_is_full_sort, assert_scores, dense_interactions
from recbole.model.general_recommender.ease import EASE as RecBoleEASE

from recbole_mgformer.integration.registry import get_model
from recbole_mgformer.model.general_recommender.ease import ease_weights, fill_lower_from_upper


def direct_ease(r, reg_weight):
    """Eq. 8 of the paper in float64: B = I - P diagMat(1 / diag(P)), P = (R^T R + lambda I)^-1."""
    p = np.linalg.inv(r.T @ r + reg_weight * np.eye(r.shape[1]))
    return np.eye(r.shape[1]) - p / np.diag(p)


def test_the_registry_gives_this_projects_ease_with_recboles_interface():
    cls = get_model("EASE")
    assert cls.__module__ == "recbole_mgformer.model.general_recommender.ease" and issubclass(cls, RecBoleEASE)


@pytest.mark.parametrize("reg_weight", [250.0, 0.5])
def test_scores_are_the_papers_closed_form(tiny_setup, reg_weight):
    _, model, _, (train, _, _) = tiny_setup("EASE", reg_weight=reg_weight)
    r = dense_interactions(train)
    assert_scores(model, r @ direct_ease(r, reg_weight))


def test_weights_match_recboles_lu_inverse_on_a_larger_random_graph():
    rng = np.random.default_rng(0)
    r = sp.csr_matrix((rng.random((300, 200)) < 0.05).astype(np.float32))
    gram = (r.T @ r).toarray() + 10.0 * np.eye(200, dtype=np.float32)
    p = np.linalg.inv(gram)  # RecBole's route
    expected = p / (-np.diag(p))
    np.fill_diagonal(expected, 0.0)
    weights = ease_weights(r, 10.0)
    np.testing.assert_allclose(weights, expected, rtol=1e-4, atol=1e-6)
    # C order: scipy's sparse-dense product (the scoring) copies any other operand at every call
    assert weights.flags.c_contiguous


@pytest.mark.parametrize("max_threaded_size, one_thread", [(100, True), (1000, False)])
def test_a_large_gram_matrix_is_factored_on_one_blas_thread(monkeypatch, max_threaded_size, one_thread):
    from threadpoolctl import threadpool_info, threadpool_limits

    import recbole_mgformer.model.general_recommender.ease as ease

    monkeypatch.setattr(ease, "_THREADED_LAPACK_MAX_SIZE", max_threaded_size)
    threads_seen = []
    get_lapack_funcs = ease.lapack.get_lapack_funcs

    def recording(names, arrays):
        def watched(function):
            def call(*args, **kwargs):
                threads_seen.append(
                    max(pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas")
                )
                return function(*args, **kwargs)

            return call

        return tuple(watched(function) for function in get_lapack_funcs(names, arrays))

    monkeypatch.setattr(ease.lapack, "get_lapack_funcs", recording)
    rng = np.random.default_rng(0)
    r = sp.csr_matrix((rng.random((300, 200)) < 0.05).astype(np.float32))
    with threadpool_limits(limits=2, user_api="blas"):  # as a 2-core machine runs it
        weights = ease.ease_weights(r, 10.0)
    assert threads_seen == ([1, 1] if one_thread else [2, 2])  # potrf, then potri
    # the same weights either way: Eq. 8 (B = I - P diagMat(1 / diag(P)), zero on the diagonal)
    np.testing.assert_allclose(weights, direct_ease(r.toarray().astype(np.float64), 10.0), rtol=1e-3, atol=1e-5)


def test_the_lower_triangle_is_filled_across_block_edges(monkeypatch):
    import recbole_mgformer.model.general_recommender.ease as ease

    monkeypatch.setattr(ease, "_SYMMETRISE_BLOCK", 3)
    rng = np.random.default_rng(1)
    symmetric = rng.random((8, 8))
    symmetric = symmetric + symmetric.T
    garbage_below = np.triu(symmetric) + np.tril(rng.random((8, 8)), -1)
    fill_lower_from_upper(garbage_below)
    np.testing.assert_array_equal(garbage_below, symmetric)


def test_predict_is_the_full_sort_score_of_each_pair(tiny_setup):
    _, model, _, _ = tiny_setup("EASE")
    assert_predict_is_full_sort(model)


@pytest.mark.parametrize("reg_weight", [0.0, -1.0])
def test_a_ridge_that_is_not_positive_is_refused(reg_weight):
    with pytest.raises(ValueError, match="reg_weight must be > 0"):
        ease_weights(sp.csr_matrix(np.eye(3, dtype=np.float32)), reg_weight)
