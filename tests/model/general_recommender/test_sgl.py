import copy

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from recbole.model.general_recommender.sgl import SGL as RecBoleSGL

from recbole_mgformer.model.general_recommender.sgl import SGL, entry_positions, normalized_values


def recbole_twin(model, config, train):
    """RecBole's own SGL with the same weights as ``model``."""
    twin = RecBoleSGL(config, train._dataset)
    twin.load_state_dict(model.state_dict())
    return twin


def fresh_views(*models, seed=11):
    for model in models:
        np.random.seed(seed)  # SGL draws its views from numpy's global generator
        model.graph_construction()


@pytest.mark.parametrize("view_type", ["ED", "ND", "RW"])
def test_loss_and_gradients_equal_recboles_sgl(tiny_setup, view_type):
    config, model, _, (train, _, _) = tiny_setup("SGL", type=view_type, ssl_weight=0.3)
    assert isinstance(model, SGL)
    twin = recbole_twin(model, config, train)
    fresh_views(model, twin)
    batch = next(iter(train))
    loss, expected = model.calculate_loss(batch), twin.calculate_loss(batch)
    torch.testing.assert_close(loss, expected)
    for got, want in zip(
        torch.autograd.grad(loss, list(model.parameters())), torch.autograd.grad(expected, list(twin.parameters()))
    ):
        torch.testing.assert_close(got, want)


def test_scores_equal_recboles_sgl(tiny_setup):
    config, model, _, (train, _, _) = tiny_setup("SGL")
    twin = recbole_twin(model, config, train)
    model.eval(), twin.eval()
    batch = next(iter(train))
    with torch.no_grad():
        torch.testing.assert_close(model.full_sort_predict(batch), twin.full_sort_predict(batch))
        torch.testing.assert_close(model.predict(batch), twin.predict(batch))


def dense_view(model, view_type):
    """One view written out densely from the next draws of numpy's global generator, made as RecBole makes them:
    the kept interactions' matrix A (n, n), symmetrised, normalised by D = rowsum + 1e-7."""
    n_users, n_items = model.n_users, model.n_items
    users, items = np.asarray(model._user), np.asarray(model._item)
    if view_type == "ND":
        weights = np.ones(len(users))
        for ids, count in ((users, n_users), (items, n_items)):
            dropped = np.random.choice(np.arange(count), size=int(count * model.drop_ratio), replace=False)
            weights *= ~np.isin(ids, dropped)
    else:
        kept = np.random.choice(np.arange(len(users)), size=int(len(users) * (1 - model.drop_ratio)), replace=False)
        weights = np.isin(np.arange(len(users)), kept).astype(float)
    a = np.zeros((n_users + n_items, n_users + n_items))
    for user, item, weight in zip(users, items, weights):
        a[user, n_users + item] += weight
    a = a + a.T
    scale = (a.sum(axis=1) + 1e-7) ** -0.5
    return scale[:, None] * a * scale[None, :]


def view_graphs(model):
    return [graph for view in model.views() for graph in (view if isinstance(view, list) else [view])]


@pytest.mark.parametrize("view_type", ["ED", "ND", "RW"])
def test_views_equal_the_dense_matrices_of_the_same_draws_and_are_written_in_place(tiny_setup, view_type):
    """Each view is the training graph's structure with the kept interactions' normalised values (zero where
    dropped): the matrix of RecBole's draws, written into the same buffer at every draw (a captured step reads it)."""
    _, model, _, _ = tiny_setup("SGL", type=view_type, drop_ratio=0.3)
    buffer = model.view_values.data_ptr()
    np.random.seed(5)
    expected = [dense_view(model, view_type) for _ in range(2 * model.n_layers if view_type == "RW" else 2)]
    fresh_views(model, seed=5)
    graphs = view_graphs(model)
    assert len(graphs) == len(expected)
    for graph, reference in zip(graphs, expected):
        assert graph.layout == torch.sparse_csr and torch.equal(graph.col_indices(), model.graph_col_indices)
        torch.testing.assert_close(graph.to_dense().double(), torch.from_numpy(reference), rtol=1e-6, atol=1e-7)
    assert (graphs[0].values() == 0).any() and not torch.equal(graphs[0].to_dense(), graphs[1].to_dense())
    before = model.view_values.clone()
    model.train()  # RecBole draws new views at each train()
    assert model.view_values.data_ptr() == buffer and not torch.equal(model.view_values, before)


def test_a_view_over_a_fixed_structure_counts_repeated_pairs_as_recbole_does():
    """A pair interacted with twice weighs 2, and a dropped interaction leaves an explicit zero: the values equal
    the dense D^-1/2 A D^-1/2 of the kept interactions on a graph with a repeated pair and an isolated node."""
    n_users = 3  # and 3 items
    users, items = np.array([0, 0, 0, 1, 1, 2]), np.array([0, 1, 1, 1, 2, 0])  # (0, 1) twice; item 2 only by user 1
    full = sp.csr_matrix((np.ones(6), (users, items + n_users)), shape=(6, 6))
    full = full + full.T
    crow, col = full.indptr, full.indices
    rows = np.repeat(np.arange(6), np.diff(crow))
    entries = np.stack(
        [entry_positions(crow, col, users, items + n_users), entry_positions(crow, col, items + n_users, users)]
    )
    kept = np.array([1.0, 1.0, 1.0, 1.0, 0.0, 0.0])  # (1, 2) and (2, 0) dropped: item 2 isolated
    weights = np.bincount(entries[0], kept, minlength=len(col)) + np.bincount(entries[1], kept, minlength=len(col))
    values = normalized_values(rows, col, weights, 6)
    a = np.zeros((6, 6))
    for user, item, weight in zip(users, items, kept):
        a[user, n_users + item] += weight
        a[n_users + item, user] += weight
    scale = (a.sum(axis=1) + 1e-7) ** -0.5
    expected = scale[:, None] * a * scale[None, :]
    assert len(values) == full.nnz and (values == 0).sum() == 4  # two dropped pairs, both directions
    np.testing.assert_allclose(sp.csr_matrix((values, col, crow), shape=(6, 6)).toarray(), expected, rtol=1e-6)
    assert np.isclose(expected[0, n_users + 1], 2 / 3)  # user 0: degree 3; item 1: degree 3 (twice by user 0)


def test_a_deep_copy_holds_its_own_views_and_computes_the_same_loss(tiny_setup):
    _, model, _, (train, _, _) = tiny_setup("SGL", type="RW")
    fresh_views(model)
    copied = copy.deepcopy(model)  # RecBole's get_flops deep-copies models
    assert copied.view_values is not model.view_values and torch.equal(copied.view_values, model.view_values)
    batch = next(iter(train))
    torch.testing.assert_close(copied.calculate_loss(batch), model.calculate_loss(batch), rtol=0, atol=0)


def test_an_unknown_view_type_is_refused(tiny_setup):
    with pytest.raises(ValueError, match=r"SGL: type='EDGE' must be one of ED, ND, RW"):
        tiny_setup("SGL", type="EDGE")
