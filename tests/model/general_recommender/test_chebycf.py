import math

import numpy as np
import pytest
from dense_filters import assert_scores, dense_interactions, normalized, right_singular_vectors, scaled

from recbole_mgformer.model.general_recommender.chebycf import interpolation_coefficients


def plateau_targets(order, phi):
    """The authors' target values: the plateau at the Chebyshev extreme points, rounded to 3 decimals."""
    x = np.round(np.cos((order - np.arange(order + 1)) / order * math.pi), 3)
    return np.round(np.where(x < 0, 0.5 + 0.5 * np.abs(x) ** phi, 0.5 - 0.5 * np.abs(x) ** phi), 3)


def interpolant(order, phi):
    """The degree-K polynomial through (nu_m, h_m) at the K + 1 Chebyshev nodes, by numpy's least squares
    (exact here: as many points as coefficients)."""
    nodes = np.cos((order + 1.5 - np.arange(1, order + 2)) / (order + 1) * math.pi)
    return np.polynomial.chebyshev.Chebyshev.fit(nodes, plateau_targets(order, phi), deg=order, domain=[-1, 1])


def spectral_filter(r, order, phi):
    """h(L~) by the eigendecomposition of L~ = I - 2 P~ (symmetric), the interpolant applied to its spectrum."""
    rn = normalized(r, 0.5, 0.5)
    laplacian = np.eye(r.shape[1]) - 2 * rn.T @ rn
    values, vectors = np.linalg.eigh(laplacian)
    return vectors @ np.diag(interpolant(order, phi)(values)) @ vectors.T


@pytest.mark.parametrize("order,phi", [(8, 1.5), (8, 10.0), (3, 15.0), (1, 2.0)])
def test_coefficients_interpolate_the_plateau_at_the_chebyshev_nodes(order, phi):
    np.testing.assert_allclose(interpolation_coefficients(order, phi), interpolant(order, phi).coef, atol=1e-10)


def test_filter_passes_low_and_stops_high_frequencies():
    poly = interpolant(8, 1.5)
    assert poly(-1.0) == pytest.approx(1.0, abs=0.02) and poly(1.0) == pytest.approx(0.0, abs=0.02)


@pytest.mark.parametrize(
    "order,phi,eta,alpha,beta",
    [
        (8, 1.5, 8, 0.2, 0.4),  # the authors' Gowalla setting (eta scaled down to the tiny graph)
        (8, 10.0, 8, 0.2, 0.0),  # Amazon-Book's: no degree normalisation
        (4, 3.0, 0, 0.0, 0.2),  # Chebyshev filter alone
        (2, 1.0, 5, 1.0, 1.0),
    ],
)
def test_scores_are_the_spectral_filter_plus_ideal_pass_within_degree_scaling(tiny_setup, order, phi, eta, alpha, beta):
    _, model, _, (train, _, _) = tiny_setup("ChebyCF", K=order, phi=phi, eta=eta, alpha=alpha, beta=beta)
    r = dense_interactions(train)
    degrees = r.sum(axis=0)
    x = r * scaled(degrees, -beta)[None, :]
    y = x @ spectral_filter(r, order, phi)
    if eta and alpha:
        vectors, gap = right_singular_vectors(normalized(r, 0.5, 0.5), eta)
        assert gap > 1e-6
        y = y + alpha * x @ vectors @ vectors.T
    assert_scores(model, y * scaled(degrees, beta)[None, :])


@pytest.mark.parametrize(
    "setting,message",
    [
        ({"K": 0}, "K must be a positive integer"),
        ({"eta": 100}, "eta = 100 singular vectors is impossible"),
        ({"phi": -1.0}, "phi must be a number > 0"),
        ({"beta": -0.1}, "beta must be a number >= 0"),
    ],
)
def test_bad_options_are_named(tiny_setup, setting, message):
    with pytest.raises(ValueError, match=message):
        tiny_setup("ChebyCF", **{"eta": 8, **setting})
