import numpy as np
import pytest
import scipy.sparse as sp
from dense_filters import assert_predict_is_full_sort, dense_interactions
from recbole.model.general_recommender.slimelastic import SLIMElastic as RecBoleSLIMElastic
from sklearn.linear_model import ElasticNet

from recbole_mgformer.integration.registry import get_model
from recbole_mgformer.model.general_recommender.slimelastic import slim_weights


def reference_weights(r, alpha, l1_ratio, positive_only, hide_item):
    """RecBole's problem solved per item on the whole dense matrix (column j zeroed under hide_item) to a tight
    tolerance with cyclic selection, so the reference is the optimum itself, not one random path's stopping point."""
    weights = np.zeros((r.shape[1], r.shape[1]))
    for j in range(r.shape[1]):
        design = r.copy()
        if hide_item:
            design[:, j] = 0
        fit = ElasticNet(
            alpha=alpha,
            l1_ratio=l1_ratio,
            positive=positive_only,
            fit_intercept=False,
            selection="cyclic",
            max_iter=100000,
            tol=1e-12,
        ).fit(design, r[:, j])
        weights[:, j] = fit.coef_
    return weights


def random_interactions(seed=0, users=80, items=40, density=0.12):
    rng = np.random.default_rng(seed)
    return (rng.random((users, items)) < density).astype(np.float64)


def test_the_registry_gives_this_projects_slimelastic_with_recboles_interface():
    cls = get_model("SLIMElastic")
    assert cls.__module__ == "recbole_mgformer.model.general_recommender.slimelastic"
    assert issubclass(cls, RecBoleSLIMElastic)


@pytest.mark.parametrize("positive_only", [True, False])
@pytest.mark.parametrize("hide_item", [True, False])
def test_weights_are_the_optimum_of_recboles_problem(positive_only, hide_item):
    r = random_interactions()
    got = slim_weights(
        sp.csr_matrix(r), 0.01, 0.3, positive_only, hide_item, max_iter=10000, tol=1e-10, random_state=0
    ).toarray()
    expected = reference_weights(r, 0.01, 0.3, positive_only, hide_item)
    assert np.abs(expected).sum() > 1.0  # not a vacuous all-zero comparison
    np.testing.assert_allclose(got, expected, atol=2e-4)
    if hide_item:
        assert not np.diag(got).any()
    if positive_only:
        assert (got >= 0).all()
    elif hide_item:  # (without hide_item w ~ e_j explains X_j alone)
        assert (got < 0).any()  # negative weights were allowed and used


def test_items_that_never_share_a_user_with_j_get_zero_weight_under_positive_only():
    # two disjoint blocks of items: the optimum of the full problem gives no cross-block weight (KKT argument in
    # the module docstring), so restricting the candidates loses nothing
    r = np.zeros((60, 20))
    r[:30, :10] = random_interactions(1, 30, 10, 0.4)
    r[30:, 10:] = random_interactions(2, 30, 10, 0.4)
    expected = reference_weights(r, 0.005, 0.5, True, True)
    assert not expected[:10, 10:].any() and not expected[10:, :10].any()
    got = slim_weights(sp.csr_matrix(r), 0.005, 0.5, True, True, max_iter=10000, tol=1e-10).toarray()
    np.testing.assert_allclose(got, expected, atol=2e-4)


@pytest.mark.parametrize("positive_only", [True, False])
@pytest.mark.parametrize("hide_item", [True, False])
def test_the_model_with_recboles_settings_matches_recboles_model(tiny_setup, positive_only, hide_item):
    settings = dict(alpha=0.05, l1_ratio=0.2, positive_only=positive_only, hide_item=hide_item)
    config, model, _, (train, _, _) = tiny_setup("SLIMElastic", **settings)
    recbole = RecBoleSLIMElastic(config, train._dataset)
    r = dense_interactions(train)
    expected = reference_weights(r, **settings)
    # both stop at tol 1e-4 of the duality gap after a random sweep order: close to the optimum, not on it
    np.testing.assert_allclose(model.item_similarity.toarray(), expected, atol=5e-3)
    np.testing.assert_allclose(recbole.item_similarity.toarray(), expected, atol=5e-3)


def test_predict_is_the_full_sort_score_of_each_pair(tiny_setup):
    _, model, _, _ = tiny_setup("SLIMElastic", alpha=0.05, l1_ratio=0.2)
    assert_predict_is_full_sort(model)


@pytest.mark.parametrize(
    "option, value, message",
    [
        ("alpha", 0.0, "alpha must be a number > 0"),
        ("alpha", "big", "alpha must be a number > 0"),
        ("l1_ratio", 1.5, r"l1_ratio must be a number in \[0, 1\]"),
        ("positive_only", "yes", "positive_only must be true or false"),
        ("hide_item", 1, "hide_item must be true or false"),
    ],
)
def test_bad_options_are_refused(option, value, message):
    options = dict(alpha=0.1, l1_ratio=0.5, positive_only=True, hide_item=True)
    options[option] = value
    with pytest.raises(ValueError, match=message):
        slim_weights(sp.csr_matrix(np.eye(3)), **options)
