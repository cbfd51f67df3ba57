import numpy as np
import pytest
from dense_filters import assert_scores, dense_interactions, normalized

FILTERS = {
    "linear": lambda p: p,
    "second_order": lambda p: 2 * p - p @ p,
    "ideal_approx": lambda p: p + 0.01 * (-p @ p @ p + 10 * p @ p - 29 * p),
}


@pytest.mark.parametrize(
    "alpha,power,name",
    [
        (0.6, 0.7, "linear"),  # the authors' Gowalla setting
        (0.6, 1.0, "second_order"),  # Yelp2018's
        (0.5, 1.4, "linear"),  # Amazon-Book's
        (0.3, 0.8, "ideal_approx"),
        (0.5, 1.0, "ideal_approx"),  # power 1: the factored item graph
    ],
)
def test_scores_are_r_times_the_polynomial_of_the_powered_item_graph(tiny_setup, alpha, power, name):
    _, model, _, (train, _, _) = tiny_setup("TurboCF", alpha=alpha, power=power, filter=name)
    r = dense_interactions(train)
    rn = normalized(r, alpha, 1 - alpha)
    p = (rn.T @ rn) ** power
    assert model.graph.factored == (power == 1.0)
    assert_scores(model, r @ FILTERS[name](p))


def test_alpha_one_half_linear_power_one_is_gfcfs_linear_filter(tiny_setup):
    _, turbo, _, _ = tiny_setup("TurboCF", alpha=0.5, power=1.0, filter="linear")
    _, gfcf, _, _ = tiny_setup("GFCF", alpha=0.0, k=8)
    from dense_filters import all_scores

    np.testing.assert_allclose(all_scores(turbo), all_scores(gfcf), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize(
    "setting,message",
    [
        ({"filter": 2}, "unknown filter 2; choose one of linear, second_order, ideal_approx"),
        ({"alpha": 1.5}, r"alpha must be a number in \[0, 1\]"),
        ({"power": 0.0}, "power must be a number > 0"),
    ],
)
def test_bad_options_are_named(tiny_setup, setting, message):
    with pytest.raises(ValueError, match=message):
        tiny_setup("TurboCF", **setting)
