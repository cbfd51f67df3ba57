import pytest
import torch
from recbole.model.general_recommender.lightgcn import LightGCN as RecBoleLightGCN
from references import dense_lightgcn, direct_bpr_and_reg

from recbole_mgformer.integration.registry import get_model
from recbole_mgformer.model.general_recommender.lightgcn import LightGCN


def test_the_registry_gives_this_projects_lightgcn():
    assert get_model("LightGCN") is LightGCN


def test_forward_averages_layers_zero_to_l_of_the_dense_propagation(tiny_setup, dense_adjacency):
    _, model, _, (train, _, _) = tiny_setup("LightGCN", n_layers=3)
    expected = dense_lightgcn(model, dense_adjacency(train), 3)
    with torch.no_grad():
        users, items = model()
    torch.testing.assert_close(torch.cat([users, items]), expected)


def test_loss_is_bpr_plus_l2_on_the_batchs_ego_embeddings(tiny_setup, dense_adjacency):
    _, model, _, (train, _, _) = tiny_setup("LightGCN", n_layers=2, reg_weight=0.01, require_pow=True)
    batch = next(iter(train))
    nodes = dense_lightgcn(model, dense_adjacency(train), 2)
    expected = direct_bpr_and_reg(model, batch, *nodes.split([model.n_users, model.n_items]))
    torch.testing.assert_close(model.calculate_loss(batch), expected)


@pytest.mark.parametrize("require_pow", [False, True])
def test_recboles_lightgcn_with_the_same_weights_gives_the_same_loss_gradients_and_scores(tiny_setup, require_pow):
    config, model, _, (train, _, test) = tiny_setup("LightGCN", n_layers=3, reg_weight=0.01, require_pow=require_pow)
    recbole = RecBoleLightGCN(config, train._dataset)
    recbole.load_state_dict(model.state_dict())
    batch = next(iter(train))
    ours, theirs = model.calculate_loss(batch), recbole.calculate_loss(batch)
    torch.testing.assert_close(ours, theirs.squeeze(), rtol=1e-5, atol=1e-6)
    ours.backward()
    theirs.backward()
    for name, parameter in model.named_parameters():
        torch.testing.assert_close(parameter.grad, recbole.get_parameter(name).grad, rtol=1e-4, atol=1e-7)

    model.eval(), recbole.eval()
    users = next(iter(test))[0]
    with torch.no_grad():
        torch.testing.assert_close(model.full_sort_predict(users), recbole.full_sort_predict(users))
        torch.testing.assert_close(model.predict(batch), recbole.predict(batch))


def test_zero_layers_is_matrix_factorisation(tiny_setup):
    _, model, _, _ = tiny_setup("LightGCN", n_layers=0)
    users, items = model()
    assert torch.equal(users, model.user_embedding.weight) and torch.equal(items, model.item_embedding.weight)


@pytest.mark.parametrize("key, value", [("n_layers", -1), ("embedding_size", 0), ("reg_weight", -0.1)])
def test_impossible_settings_are_refused_naming_the_key(tiny_setup, key, value):
    with pytest.raises(ValueError, match=key):
        tiny_setup("LightGCN", **{key: value})
