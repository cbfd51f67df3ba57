"""Shared pieces of the training-free graph filters (GF-CF, BSPM, Turbo-CF, ChebyCF).

Each of them scores a user by passing the user's row of the binary interaction matrix ``R`` (users x items)
through an item-item filter built from ``R`` alone. Here ``R`` is the training split's; ``R~ = D_U^-a R D_I^-b``
is a degree-normalised copy (a zero degree gives a zero scale, never an inf), ``P~ = R~^T R~`` the item-item
graph, and ``D_I^-1/2 V_k V_k^T D_I^1/2`` the ideal low-pass filter of the top-``k`` right singular vectors
``V_k`` of ``R~`` (GF-CF's and BSPM's; ChebyCF applies ``V_k V_k^T`` inside its own degree scaling).

Nothing users x users and, unless a model asks for it, nothing items x items is formed: ``x P~`` is two sparse
products ``(x R~^T) R~`` per block of users, and the ideal filter is two thin dense products through ``V_k``.
:class:`ClosedFormRecommender` fits once in its constructor (RecBole's traditional-model path: one epoch of
RecBole's ``TraditionalTrainer`` with a fake loss, as RecBole's EASE) and scores users in blocks of
``filter_batch_size``.
"""

import time
from logging import getLogger

import numpy as np
import scipy.sparse as sp
import torch
import torch.nn as nn
from recbole.model.abstract_recommender import GeneralRecommender
from recbole.utils import InputType, ModelType
from scipy.sparse.linalg import svds

from recbole_mgformer.model.abstract_recommender import SharedSparseBuffers
from recbole_mgformer.model.graph import to_torch_csr
from recbole_mgformer.model.options import positive_int

SOLVERS = ("euler", "rk4")


# ------------------------------------------------------------------------------------------------ matrices


def binary_interactions(dataset):
    """The training split's ``R`` as a float64 scipy CSR matrix of ones (users x items, padding id 0 included):
    the papers' implicit feedback, a repeated interaction counted once."""
    matrix = dataset.inter_matrix(form="csr").astype(np.float64)
    matrix.sum_duplicates()
    matrix.data[:] = 1.0
    matrix.eliminate_zeros()
    return matrix


def degree_power(degree, power):
    """``degree ** power`` elementwise, 0 where the degree is 0 (for either sign of ``power``)."""
    degree = np.asarray(degree, dtype=np.float64).ravel()
    scale = np.zeros_like(degree)
    positive = degree > 0
    scale[positive] = degree[positive] ** power
    return scale


def normalized_interactions(matrix, user_power, item_power):
    """``D_U^-user_power R D_I^-item_power`` (scipy CSR, float64)."""
    users = degree_power(matrix.sum(axis=1), -user_power)
    items = degree_power(matrix.sum(axis=0), -item_power)
    return sp.csr_matrix(sp.diags(users) @ matrix @ sp.diags(items))


def item_degrees(matrix):
    return np.asarray(matrix.sum(axis=0), dtype=np.float64).ravel()


def top_right_singular_vectors(matrix, k, seed, model, key="k"):
    """``V_k`` (items x k, float64): the right singular vectors of the ``k`` largest singular values of
    ``matrix``, by ARPACK (``scipy.sparse.linalg.svds``) from a seeded start vector, so a fit is deterministic.
    Their order and signs are ARPACK's; the filters use ``V_k V_k^T`` alone, which neither changes."""
    limit = min(matrix.shape) - 1
    if not 1 <= k <= limit:
        raise ValueError(
            f"{model}: {key} = {k} singular vectors is impossible for a {matrix.shape[0]} x "
            f"{matrix.shape[1]} interaction matrix (users and items with the padding id); "
            f"ARPACK needs 1 <= {key} <= {limit}. Set a smaller --{key}=..."
        )
    start = np.random.default_rng(seed).uniform(-1.0, 1.0, size=min(matrix.shape))
    _, _, vt = svds(matrix, k=k, v0=start)
    return vt.T.copy()


# ------------------------------------------------------------------------------------------------ operators


class ItemGraph(nn.Module):
    """``x -> x P`` for an item-item matrix ``P`` applied to rows ``x`` (block x items): either factored,
    ``P = N^T N`` with ``N`` sparse (users x items), as two sparse products that never form ``P``; or ``P``
    itself (sparse items x items), for the models whose ``P`` is not such a product (Turbo-CF's power)."""

    def __init__(self, factor=None, matrix=None):
        super().__init__()
        if (factor is None) == (matrix is None):
            raise ValueError("ItemGraph takes a factor N (P = N^T N) or the matrix P, exactly one")
        self.factored = factor is not None
        if self.factored:
            self.register_buffer("factor", to_torch_csr(factor), persistent=False)  # (users, items)
            self.register_buffer("factor_t", to_torch_csr(factor.T), persistent=False)  # (items, users)
        else:
            self.register_buffer("matrix_t", to_torch_csr(matrix.T), persistent=False)  # (items, items)

    def forward(self, x):  # (block, items) -> (block, items)
        x_t = x.T.contiguous()  # (items, block)
        if self.factored:
            return torch.sparse.mm(self.factor_t, torch.sparse.mm(self.factor, x_t)).T
        return torch.sparse.mm(self.matrix_t, x_t).T


class LowRankFilter(nn.Module):
    """``x -> x left right`` with ``left`` (items x k) and ``right`` (k x items) dense: the ideal low-pass
    filter ``D^-1/2 V_k V_k^T D^1/2`` (or ``V_k V_k^T``) without its items x items product."""

    def __init__(self, left, right):
        super().__init__()
        self.register_buffer("left", torch.from_numpy(np.ascontiguousarray(left)).float(), persistent=False)
        self.register_buffer("right", torch.from_numpy(np.ascontiguousarray(right)).float(), persistent=False)

    def forward(self, x):
        return (x @ self.left) @ self.right


def ideal_low_pass(normalized, degrees, k, seed, model, item_power=0.5, key="k"):
    """GF-CF's ideal low-pass filter ``D_I^-p V_k V_k^T D_I^p`` as a :class:`LowRankFilter`: ``V_k`` the
    top-``k`` right singular vectors of ``normalized`` (``R~``), ``D_I`` the item ``degrees`` of ``R``,
    ``p = item_power`` (0: ``V_k V_k^T``). An item of degree 0 gets a zero row and column."""
    vectors = top_right_singular_vectors(normalized, k, seed, model, key)  # (items, k)
    left = degree_power(degrees, -item_power)[:, None] * vectors
    right = vectors.T * degree_power(degrees, item_power)[None, :]
    return LowRankFilter(left, right)


def integrate(derivative, state, horizon, steps, solver):
    """The states at ``t_1 .. t_steps`` (a list) of ``dr/dt = derivative(r)`` from ``r(0) = state`` over
    ``[0, horizon]`` in ``steps`` equal steps: ``euler`` or classic ``rk4``. For the linear, autonomous ODEs
    of BSPM each step multiplies by the Taylor polynomial of ``exp(h A)`` of the solver's order, which is also
    what torchdiffeq's fixed-grid ``euler`` and ``rk4`` (its 3/8 rule) compute on ``linspace(0, T, K + 1)``."""
    h = horizon / steps
    states = []
    for _ in range(steps):
        if solver == "euler":
            state = state + h * derivative(state)
        else:
            k1 = derivative(state)
            k2 = derivative(state + h / 2 * k1)
            k3 = derivative(state + h / 2 * k2)
            k4 = derivative(state + h * k3)
            state = state + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        states.append(state)
    return states


# ------------------------------------------------------------------------------------------------ base model


class ClosedFormRecommender(SharedSparseBuffers, GeneralRecommender):
    """A filter fitted once from the training interactions; subclasses build it in :meth:`fit` and map a
    block of users' interaction rows (block x items, float32) to their scores in :meth:`filter_rows`."""

    input_type = InputType.POINTWISE
    type = ModelType.TRADITIONAL

    def __init__(self, config, dataset):
        super().__init__(config, dataset)
        name = type(self).__name__
        self.filter_batch_size = positive_int(config, "filter_batch_size", name)
        # RecBole's trainer needs a parameter to optimise; it is never used (RecBole's EASE does the same).
        self.fake_loss = nn.Parameter(torch.zeros(1))
        self.interactions = binary_interactions(dataset)  # (users, items) scipy CSR, on the CPU
        self._blocks = {}  # block number -> its scores: the last block made, or every one with keep_scores
        self.keep_scores = False
        started = time.perf_counter()
        self.fit(self.interactions, config)
        # the fit happens here, before the trainer's one epoch: its time is not in the epoch's
        self.fit_seconds = time.perf_counter() - started
        getLogger().info(f"{name}: fitted in {self.fit_seconds:.1f} s")

    def fit(self, interactions, config):
        raise NotImplementedError

    def filter_rows(self, rows):
        raise NotImplementedError

    def forward(self):
        raise NotImplementedError(f"{type(self).__name__} is closed-form: use predict or full_sort_predict")

    def calculate_loss(self, interaction):
        return self.fake_loss.sum() * 0.0  # one epoch of TraditionalTrainer; nothing to learn

    def user_rows(self, users):
        """The interaction rows of ``users`` (a 1-d tensor of ids) as a dense float32 tensor on the device."""
        rows = self.interactions[users.cpu().numpy()].toarray()
        return torch.from_numpy(rows).float().to(self.fake_loss.device)

    def score_block(self, block):
        """Scores (filter_batch_size x items, fewer in the last block) of users ``block * filter_batch_size`` on.
        The last block stays cached: RecBole's full-sort evaluation asks for a few users at a time, in id order
        (eval_batch_size // items of them: one at a time on 40,000 items), and each sparse product costs about
        the same for one user as for a thousand. With ``keep_scores`` every block stays (users x items float32):
        a model that adds these scores to its own at every evaluation (MGFormer's filter residual) filters once."""
        if block not in self._blocks:
            if not self.keep_scores:
                self._blocks.clear()
            start = block * self.filter_batch_size
            users = torch.arange(start, min(start + self.filter_batch_size, self.n_users))
            self._blocks[block] = self.filter_rows(self.user_rows(users))
        return self._blocks[block]

    def score_users(self, users):  # (n,) -> (n, items)
        users = users.cpu()
        blocks = torch.div(users, self.filter_batch_size, rounding_mode="floor")
        scores = torch.empty(len(users), self.n_items, device=self.fake_loss.device)
        for block in torch.unique(blocks).tolist():  # ascending: one computation per block
            rows = (blocks == block).nonzero().squeeze(1)
            offsets = (users[rows] - block * self.filter_batch_size).to(scores.device)
            scores[rows.to(scores.device)] = self.score_block(block)[offsets]
        return scores

    def _apply(self, fn, *args, **kwargs):
        self._blocks = {block: fn(scores) for block, scores in self._blocks.items()}  # to another device or dtype
        return super()._apply(fn, *args, **kwargs)

    def __deepcopy__(self, memo):
        for scores in self._blocks.values():  # never written once made: a copy shares them (4.6 GiB on Gowalla)
            memo[id(scores)] = scores
        return super().__deepcopy__(memo)

    @torch.no_grad()
    def full_sort_predict(self, interaction):
        return self.score_users(interaction[self.USER_ID]).reshape(-1)

    @torch.no_grad()
    def predict(self, interaction):
        users, items = interaction[self.USER_ID], interaction[self.ITEM_ID]
        unique, row = torch.unique(users, return_inverse=True)
        return self.score_users(unique)[row, items.to(row.device)]
