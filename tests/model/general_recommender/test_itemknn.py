import numpy as np
import pytest
import scipy.sparse as sp
from dense_filters import all_scores, assert_predict_is_full_sort, assert_scores, dense_interactions
from recbole.model.general_recommender.itemknn import ItemKNN as RecBoleItemKNN

from recbole_mgformer.integration.registry import get_model
from recbole_mgformer.model.general_recommender.itemknn import knn_weights


def direct_cosine(r, shrink):
    """Every pair's shrunk cosine in float64, ``r_i . r_j / (|r_i| |r_j| + shrink)`` over the columns of ``r``,
    a node's similarity with itself 0 (the neighbours of a node are the others)."""
    norms = np.sqrt((r**2).sum(axis=0))
    similarity = (r.T @ r) / (norms[:, None] * norms[None, :] + shrink + 1e-6)
    np.fill_diagonal(similarity, 0.0)
    return similarity


def test_the_registry_gives_this_projects_itemknn_with_recboles_interface():
    cls = get_model("ItemKNN")
    assert cls.__module__ == "recbole_mgformer.model.general_recommender.itemknn"
    assert issubclass(cls, RecBoleItemKNN)


@pytest.mark.parametrize("method", ["item", "user"])
@pytest.mark.parametrize("shrink", [0.0, 3.0])
def test_with_every_neighbour_kept_the_scores_are_the_cosine_formula(tiny_setup, method, shrink):
    _, model, _, (train, _, _) = tiny_setup("ItemKNN", k=10_000, shrink=shrink, knn_method=method)
    r = dense_interactions(train)
    if method == "item":
        expected = r @ direct_cosine(r, shrink)  # X_u W
    else:
        expected = direct_cosine(r.T, shrink) @ r  # W_u X
    assert np.abs(expected).sum() > 1.0
    assert_scores(model, expected)


@pytest.mark.parametrize("method", ["item", "user"])
@pytest.mark.parametrize("k, shrink", [(3, 0.0), (5, 10.0), (100, 1.0)])
def test_scores_are_recboles_itemknn_scores(tiny_setup, method, k, shrink):
    config, model, _, (train, _, _) = tiny_setup("ItemKNN", k=k, shrink=shrink, knn_method=method)
    recbole = RecBoleItemKNN(config, train._dataset)
    expected = recbole.pred_mat.toarray()
    assert np.abs(expected).sum() > 1.0
    np.testing.assert_allclose(all_scores(model), expected, rtol=1e-5, atol=1e-6)
    assert not hasattr(model, "pred_mat")  # no all-users score matrix is kept


def test_each_node_keeps_its_k_most_similar_neighbours():
    rng = np.random.default_rng(0)
    r = rng.random((40, 30)) * (rng.random((40, 30)) < 0.3)  # real-valued: no ties at the k-th neighbour
    weights = knn_weights(sp.csr_matrix(r, dtype=np.float32), k=4, shrink=2.0).toarray()
    similarity = direct_cosine(r, 2.0)
    for item in range(30):
        kept = np.flatnonzero(weights[:, item])
        expected = np.argsort(-similarity[:, item])[:4]
        assert set(kept) == set(expected[similarity[expected, item] > 0])
        np.testing.assert_allclose(weights[kept, item], similarity[kept, item], rtol=1e-5)


@pytest.mark.parametrize("method", ["item", "user"])
def test_predict_is_the_full_sort_score_of_each_pair(tiny_setup, method):
    _, model, _, _ = tiny_setup("ItemKNN", k=5, knn_method=method)
    assert_predict_is_full_sort(model)


@pytest.mark.parametrize(
    "option, value, message",
    [
        ("k", 0, "k must be a whole number >= 1"),
        ("k", 2.5, "k must be a whole number >= 1"),
        ("shrink", -1.0, "shrink must be a number >= 0"),
        ("shrink", "some", "shrink must be a number >= 0"),
        ("method", "items", "knn_method must be one of item, user"),
    ],
)
def test_bad_options_are_refused(option, value, message):
    options = dict(k=5, shrink=0.0, method="item")
    options[option] = value
    with pytest.raises(ValueError, match=message):
        knn_weights(sp.csr_matrix(np.eye(3, dtype=np.float32)), **options)
