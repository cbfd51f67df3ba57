import pytest
import torch
import torch.nn.functional as F
from references import ML100K_SHORT_FAST_RATE, dense_lightgcn

from recbole_mgformer import run_recommender
from recbole_mgformer.model.general_recommender.directau import DirectAU


def direct_directau_loss(users, items, gamma):
    """DirectAU's loss as its paper writes it: L_uniform averages the user and item terms."""
    users, items = F.normalize(users, dim=1), F.normalize(items, dim=1)
    align = (users - items).norm(dim=1).pow(2).mean()

    def uniform(x):
        return torch.pdist(x).pow(2).mul(-2).exp().mean().log()

    return align + gamma * (uniform(users) + uniform(items)) / 2


def test_lightgcn_encoder_equals_the_dense_reference(tiny_setup, dense_adjacency):
    _, model, _, (train, _, _) = tiny_setup("DirectAU", encoder="LightGCN", n_layers=3)
    expected = dense_lightgcn(model, dense_adjacency(train), 3)
    with torch.no_grad():
        users, items = model()
    torch.testing.assert_close(torch.cat([users, items]), expected)


def test_mf_encoder_is_the_embeddings(tiny_setup):
    _, model, _, _ = tiny_setup("DirectAU", encoder="MF")
    users, items = model()
    assert torch.equal(users, model.user_embedding.weight) and torch.equal(items, model.item_embedding.weight)


@pytest.mark.parametrize("encoder", ["MF", "LightGCN"])
def test_loss_is_directau_as_its_paper_writes_it(tiny_setup, encoder):
    _, model, _, (train, _, _) = tiny_setup("DirectAU", encoder=encoder, gamma=0.7, precision="fp32")
    batch = next(iter(train))
    users, items = model()
    expected = direct_directau_loss(users[batch[model.USER_ID]], items[batch[model.ITEM_ID]], 0.7)
    torch.testing.assert_close(model.calculate_loss(batch), expected)


def test_bf16_loss_is_within_bf16_rounding_of_fp32(tiny_setup):
    _, exact, _, (train, _, _) = tiny_setup("DirectAU", precision="fp32")
    _, rounded, _, _ = tiny_setup("DirectAU", precision="bf16")
    rounded.load_state_dict(exact.state_dict())
    batch = next(iter(train))
    torch.testing.assert_close(rounded.calculate_loss(batch), exact.calculate_loss(batch), rtol=1e-2, atol=1e-3)


@pytest.mark.parametrize("encoder", ["MF", "LightGCN"])
def test_both_encoders_train(tiny_setup, encoder):
    _, model, trainer, (train, _, _) = tiny_setup("DirectAU", encoder=encoder, learning_rate=0.01)
    batch = next(iter(train))
    before = model.calculate_loss(batch).item()
    for _ in range(3):
        trainer._train_epoch(train, 0, show_progress=False)
    assert model.calculate_loss(batch).item() < before


def test_unknown_encoder_is_refused(tiny_setup):
    with pytest.raises(ValueError, match="DirectAU: unknown encoder 'GCN'; choose one of MF, LightGCN"):
        tiny_setup("DirectAU", encoder="GCN")


@pytest.mark.slow
def test_learns_on_ml_100k_far_above_popularity(ml100k_pop):
    config = {**ML100K_SHORT_FAST_RATE, "epochs": 6, "stopping_step": 6, "encoder": "MF", "gamma": 0.5}
    result = run_recommender(DirectAU, "ml-100k", config_dict=config)
    assert result["test_result"]["ndcg@20"] > 1.3 * ml100k_pop["test_result"]["ndcg@20"]


def test_the_graph_is_held_once_as_dense_parts_also_after_a_cast(tiny_setup, dense_adjacency):
    """The sparse adjacency holds the dense CSR buffers that torch.compile takes: one copy of the graph, on any
    device and in any dtype the model is moved to."""
    _, model, _, (train, _, _) = tiny_setup("DirectAU")
    model.double()
    assert model.adjacency.values().data_ptr() == model.adjacency_values.data_ptr()
    assert model.adjacency.col_indices().data_ptr() == model.adjacency_col_indices.data_ptr()
    assert model.adjacency.dtype == torch.float64
    torch.testing.assert_close(model.adjacency.to_dense(), dense_adjacency(train).double())


def test_the_loss_compiles_whole_with_the_eager_loss_and_gradients(tiny_setup):
    """No graph break (the graph is propagated as dense parts through one custom op), and the compiled loss and
    its gradients equal the eager ones (aot_eager: the graph AOTAutograd traces, without code generation)."""
    _, model, _, (train, _, _) = tiny_setup("DirectAU", encoder="LightGCN", precision="fp32")
    batch = next(iter(train))
    torch._dynamo.reset()
    compiled = torch.compile(model.calculate_loss, fullgraph=True, backend="aot_eager")
    loss = compiled(batch)
    gradients = torch.autograd.grad(loss, [model.user_embedding.weight, model.item_embedding.weight])
    eager_loss = model.calculate_loss(batch)
    eager_gradients = torch.autograd.grad(eager_loss, [model.user_embedding.weight, model.item_embedding.weight])
    torch._dynamo.reset()
    torch.testing.assert_close(loss, eager_loss)
    for compiled_gradient, eager_gradient in zip(gradients, eager_gradients):
        torch.testing.assert_close(compiled_gradient, eager_gradient)
