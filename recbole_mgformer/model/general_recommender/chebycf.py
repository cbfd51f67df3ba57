r"""ChebyCF (Kim et al., "Graph Spectral Filtering with Chebyshev Interpolation for Recommendation", SIGIR 2025),
training-free.

With GF-CF's ``R~ = D_U^{-1/2} R D_I^{-1/2}`` and ``P~ = R~^T R~`` (eigenvalues in [0, 1]), the rescaled Laplacian
``L~ = 2 (I - P~) - I = I - 2 P~`` has its spectrum in [-1, 1], low frequencies (``P~``'s eigenvalue 1) at -1.
A user's row ``r_u`` of ``R`` is scored as

    x   = r_u D_I^{-beta}                                               (degree-based pre-normalisation)
    y   = sum_{j=0..K} c_j T_j(L~) x  +  alpha x V_eta V_eta^T          (Chebyshev filter + ideal pass filter)
    s_u = y D_I^{beta}                                                  (post-normalisation)

with ``T_j`` the Chebyshev polynomials (``T_0 x = x``, ``T_1 x = x L~``, ``T_j x = 2 T_{j-1} x L~ - T_{j-2} x``,
never forming ``L~``), ``V_eta`` the top-``eta`` right singular vectors of ``R~`` (``alpha = 0`` or ``eta = 0``
drops the ideal pass filter) and ``c_j`` the Chebyshev interpolation coefficients of the "plateau" transfer
function ``h(x) = 1/2 + 1/2 (-x)^phi`` for ``x < 0``, ``1/2 - 1/2 x^phi`` for ``x >= 0`` (1 at the lowest
frequency, 0 at the highest, flatter as ``phi`` grows):

    c_j = (2 - [j = 0]) / (K + 1) sum_{m=1..K+1} h_m T_j(nu_m),   nu_m = cos((K + 3/2 - m) pi / (K + 1))

These are the paper's Chebyshev-interpolated filter, ideal pass filter and degree normalisation (the paper is not
on this machine, so its equation numbers are not quoted here). Every detail was checked against the authors' code
(chanwoo0806/ChebyCF, ``src/module.py``: ``Laplacian``, ``ChebyFilter``, ``IdealFilter``, ``DegreeNorm``) and
configs (Gowalla: K 8, phi 1.5, eta 512, alpha 0.2, beta 0.4; Amazon-Book: K 8, phi 10, eta 512, alpha 0.2, beta 0;
Last.fm: K 8, phi 15, eta 256, alpha 0.1, beta 0.2), including one detail of theirs kept so the published numbers
are reproducible: the target values ``h_m`` are the plateau at the Chebyshev extreme points ``cos((K - m + 1) pi /
K)``, not at the nodes ``nu_m`` they are paired with, each abscissa and value rounded to 3 decimals.
An item with no training interaction scales to 0 (as theirs).
"""

import math

import numpy as np
import torch

from recbole_mgformer.model.filters import (
    ClosedFormRecommender,
    ItemGraph,
    LowRankFilter,
    degree_power,
    item_degrees,
    normalized_interactions,
    top_right_singular_vectors,
)
from recbole_mgformer.model.options import non_negative_float, non_negative_int, positive_float, positive_int


def plateau(x, phi):
    """The target transfer function on the rescaled Laplacian's spectrum [-1, 1]."""
    x = np.asarray(x, dtype=np.float64)
    return np.where(x < 0, 0.5 + 0.5 * np.abs(x) ** phi, 0.5 - 0.5 * np.abs(x) ** phi)


def chebyshev_values(x, order):
    """``[T_0(x), ..., T_order(x)]`` (rows) at the points ``x``."""
    values = [np.ones_like(x), np.asarray(x, dtype=np.float64)]
    for _ in range(2, order + 1):
        values.append(2 * x * values[-1] - values[-2])
    return np.stack(values[: order + 1])


def interpolation_coefficients(order, phi):
    """``c_0 .. c_K`` of the plateau filter (see the module docstring)."""
    m = np.arange(1, order + 2)
    nodes = np.cos((order + 1.5 - m) / (order + 1) * math.pi)
    extremes = np.round(np.cos((order - np.arange(order + 1)) / order * math.pi), 3)
    target = np.round(plateau(extremes, phi), 3)
    coefficients = chebyshev_values(nodes, order) @ target * (2 / (order + 1))
    coefficients[0] /= 2
    return coefficients


class ChebyCF(ClosedFormRecommender):
    r"""ChebyCF; see ``properties/model/ChebyCF.yaml`` for its options."""

    def fit(self, interactions, config):
        self.order = positive_int(config, "K", "ChebyCF")
        self.phi = positive_float(config, "phi", "ChebyCF")
        self.eta = non_negative_int(config, "eta", "ChebyCF")
        self.alpha = non_negative_float(config, "alpha", "ChebyCF")
        self.beta = non_negative_float(config, "beta", "ChebyCF")
        self.coefficients = [float(c) for c in interpolation_coefficients(self.order, self.phi)]
        normalized = normalized_interactions(interactions, 0.5, 0.5)  # R~
        self.graph = ItemGraph(factor=normalized)
        degrees = item_degrees(interactions)
        self.register_buffer("pre_scale", self.scale(degrees, -self.beta), persistent=False)
        self.register_buffer("post_scale", self.scale(degrees, self.beta), persistent=False)
        self.ideal = None
        if self.eta > 0 and self.alpha > 0:
            vectors = top_right_singular_vectors(normalized, self.eta, config["seed"], "ChebyCF", key="eta")
            self.ideal = LowRankFilter(vectors, vectors.T)

    @staticmethod
    def scale(degrees, power):  # (items,) D_I^power, 0 for an item without interactions
        return torch.from_numpy(degree_power(degrees, power)).float()

    def laplacian(self, x):  # x L~ = x - 2 x P~
        return x - 2 * self.graph(x)

    def filter_rows(self, rows):  # (block, items) -> (block, items)
        x = rows * self.pre_scale
        previous, current = x, self.laplacian(x)
        output = self.coefficients[0] * previous + self.coefficients[1] * current
        for c in self.coefficients[2:]:
            previous, current = current, 2 * self.laplacian(current) - previous
            output = output + c * current
        if self.ideal is not None:
            output = output + self.alpha * self.ideal(x)
        return output * self.post_scale
