import numpy as np
import pytest
import torch
from dense_filters import all_scores, assert_scores, dense_interactions, ideal_low_pass, normalized
from recbole.data.interaction import Interaction


def test_linear_filter_alone_is_r_times_normalised_item_graph(tiny_setup):
    _, model, _, (train, _, _) = tiny_setup("GFCF", alpha=0.0, k=8)
    r = dense_interactions(train)
    rn = normalized(r, 0.5, 0.5)
    assert model.ideal is None  # alpha 0: no SVD
    assert_scores(model, r @ rn.T @ rn)


@pytest.mark.parametrize("alpha,k", [(0.3, 8), (2.0, 5)])
def test_scores_are_linear_plus_weighted_ideal_low_pass(tiny_setup, alpha, k):
    _, model, _, (train, _, _) = tiny_setup("GFCF", alpha=alpha, k=k)
    r = dense_interactions(train)
    rn = normalized(r, 0.5, 0.5)
    assert_scores(model, r @ (rn.T @ rn + alpha * ideal_low_pass(r, k)))


def test_blocks_of_users_change_nothing(tiny_setup):
    _, whole, _, _ = tiny_setup("GFCF", k=8, filter_batch_size=1000)
    _, blocked, _, _ = tiny_setup("GFCF", k=8, filter_batch_size=3)
    np.testing.assert_allclose(all_scores(blocked), all_scores(whole), rtol=1e-6, atol=1e-7)


def test_predict_is_the_full_sort_score_of_each_pair(tiny_setup):
    _, model, _, _ = tiny_setup("GFCF", k=8)
    users, items = torch.tensor([3, 1, 3, 7]), torch.tensor([5, 2, 9, 0])
    scores = model.predict(Interaction({model.USER_ID: users, model.ITEM_ID: items}))
    np.testing.assert_allclose(scores.numpy(), all_scores(model)[users, items], rtol=1e-6)


def test_fit_is_deterministic(tiny_setup):
    _, first, _, _ = tiny_setup("GFCF", k=8)
    _, second, _, _ = tiny_setup("GFCF", k=8)
    assert np.array_equal(all_scores(first), all_scores(second))


def test_checkpoint_holds_no_fitted_matrices(tiny_setup):
    _, model, _, _ = tiny_setup("GFCF", k=8)
    assert list(model.state_dict()) == ["fake_loss"]  # refitted from the data on load


@pytest.mark.parametrize(
    "setting,message",
    [
        ({"k": 41}, "ARPACK needs 1 <= k <= 40"),  # 40 users + padding: 41 rows
        ({"k": 0}, "k must be a positive integer"),
        ({"alpha": -1.0}, "alpha must be a number >= 0"),
        ({"filter_batch_size": 0}, "filter_batch_size must be a positive integer"),
    ],
)
def test_bad_options_are_named(tiny_setup, setting, message):
    with pytest.raises(ValueError, match=message):
        tiny_setup("GFCF", **{"k": 8, **setting})
