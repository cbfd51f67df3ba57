import copy

import numpy as np
import pytest
import torch
from recbole.model.general_recommender.sgl import SGL as RecBoleSGL

from recbole_mgformer.model.general_recommender.sgl import SGL


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
    for got, want in zip(torch.autograd.grad(loss, list(model.parameters())),
                         torch.autograd.grad(expected, list(twin.parameters()))):
        torch.testing.assert_close(got, want)


def test_scores_equal_recboles_sgl(tiny_setup):
    config, model, _, (train, _, _) = tiny_setup("SGL")
    twin = recbole_twin(model, config, train)
    model.eval(), twin.eval()
    batch = next(iter(train))
    with torch.no_grad():
        torch.testing.assert_close(model.full_sort_predict(batch), twin.full_sort_predict(batch))
        torch.testing.assert_close(model.predict(batch), twin.predict(batch))


def test_graphs_are_csr_and_a_deep_copy_shares_them(tiny_setup):
    _, model, _, _ = tiny_setup("SGL", type="RW")
    model.train()
    assert model.train_graph.layout == torch.sparse_csr
    copied = copy.deepcopy(model)  # RecBole's get_flops deep-copies models
    assert copied.train_graph is model.train_graph and copied.sub_graph1[0] is model.sub_graph1[0]
    assert copied.user_embedding.weight is not model.user_embedding.weight

