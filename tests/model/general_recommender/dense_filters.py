"""Slow dense numpy (float64) references of the training-free filters, written from their papers' formulas
(see each model's module docstring), and helpers to compare a fitted model with them."""

import numpy as np
import torch
from recbole.data.interaction import Interaction


def dense_interactions(train):
    """The training split's binary ``R`` (users x items, padding id 0 included), float64."""
    return (np.asarray(train._dataset.inter_matrix(form="coo").todense()) > 0).astype(np.float64)


def scaled(degrees, power):
    return np.array([d**power if d > 0 else 0.0 for d in degrees])


def normalized(r, user_power, item_power):
    return np.diag(scaled(r.sum(axis=1), -user_power)) @ r @ np.diag(scaled(r.sum(axis=0), -item_power))


def right_singular_vectors(matrix, k):
    """Top-k right singular vectors by a dense SVD, and the gap after the k-th singular value (V_k V_k^T is
    unique only when it is positive)."""
    _, values, vt = np.linalg.svd(matrix)
    return vt[:k].T, values[k - 1] - values[k]


def ideal_low_pass(r, k):
    """``D_I^-1/2 V_k V_k^T D_I^1/2`` (items x items)."""
    vectors, gap = right_singular_vectors(normalized(r, 0.5, 0.5), k)
    assert gap > 1e-6, "pick a k with distinct singular values"
    degrees = r.sum(axis=0)
    return np.diag(scaled(degrees, -0.5)) @ vectors @ vectors.T @ np.diag(scaled(degrees, 0.5))


def all_scores(model):
    """The model's full-sort scores of every user, (users, items), float64."""
    users = torch.arange(model.n_users)
    with torch.no_grad():
        scores = model.full_sort_predict(Interaction({model.USER_ID: users}))
    return scores.reshape(model.n_users, model.n_items).double().numpy()


def assert_scores(model, expected):
    np.testing.assert_allclose(all_scores(model), expected, rtol=1e-4, atol=1e-5)


def assert_predict_is_full_sort(model, rtol=1e-5, atol=1e-6):
    """``predict`` of a few (user, item) pairs, a user repeated, equals those pairs' full-sort scores (not all 0)."""
    users, items = torch.tensor([3, 1, 3, 7]), torch.tensor([5, 2, 9, 0])
    scores = model.predict(Interaction({model.USER_ID: users, model.ITEM_ID: items}))
    full = all_scores(model)
    assert np.abs(full).sum() > 0
    np.testing.assert_allclose(scores.numpy(), full[users, items], rtol=rtol, atol=atol)
