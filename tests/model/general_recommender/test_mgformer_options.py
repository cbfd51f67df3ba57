"""MGFormer's options beyond the paper (issue 25, model/mgformer/attention_options.py): each against a direct reference,
each changes the outputs, and each at its neutral setting is the paper's form."""

import copy
import math

import numpy as np
import pytest
import torch

from recbole_mgformer.model.mgformer.attention_options import AttentionBlock, query_temperature


def explicit_attention(layer, x_query, x_keys, values, z_query=None, z_keys=None):
    """Eq. (8) written out per head with an explicit (b, n) weight matrix and the sin mask: (b, w)."""
    phi_q = layer.features(layer.split_heads(x_query @ layer.query.weight.T), is_query=True)
    phi_k = layer.features(layer.split_heads(x_keys @ layer.key.weight.T), is_query=False)
    weights = phi_q @ phi_k.transpose(-2, -1)  # (h, b, n)
    if z_query is not None:
        weights = weights * torch.sin(math.pi / 2 * (z_query[:, None] + z_keys[None, :]) / 2)
    mixed = weights @ layer.split_heads(values) / weights.sum(-1, keepdim=True)
    return mixed.transpose(0, 1).reshape(len(x_query), -1)


def degrees_of(train):
    matrix = train._dataset.inter_matrix(form="csr")
    return torch.from_numpy(np.concatenate([matrix.getnnz(axis=1), matrix.getnnz(axis=0)])).float()


def test_propagated_tokens_are_the_mean_of_normalised_adjacency_powers(tiny_setup, dense_adjacency):
    _, model, _, (train, _, _) = tiny_setup(token_propagation=2, attention=False, precision="fp32")
    adjacency = dense_adjacency(train)
    x0 = torch.cat(
        [
            model.user_embedding.weight,
            model.item_embedding.weight,
        ],
        0,
    )
    x0 = torch.cat([x0, model.structural], 1)
    expected = (x0 + adjacency @ x0 + adjacency @ adjacency @ x0) / 3
    with torch.no_grad():
        torch.testing.assert_close(model(), expected, rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(model(torch.tensor([4, 50, 4])), expected[[4, 50, 4]], rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(model.node_tokens(), expected, rtol=1e-4, atol=1e-5)
    _, plain, _, _ = tiny_setup(attention=False, precision="fp32")
    assert not torch.allclose(plain(), expected, atol=1e-3)


def test_attention_over_propagated_tokens_equals_eq_8_on_them(tiny_setup, dense_adjacency):
    _, model, _, (train, _, _) = tiny_setup(token_propagation=1, n_heads=2, precision="fp32")
    adjacency = dense_adjacency(train)
    queries = torch.tensor([0, 7, 45, 59])
    with torch.no_grad():
        x = torch.cat([model.user_embedding.weight, model.item_embedding.weight], 0)
        x = torch.cat([x, model.structural], 1)
        x = (x + adjacency @ x) / 2
        z = model.degree_centrality()
        expected = x[queries] + explicit_attention(model.layers[0], x[queries], x, x, z[queries], z)
        torch.testing.assert_close(model(queries), expected, rtol=1e-4, atol=1e-5)


def test_the_propagated_structural_part_is_cached_and_the_embeddings_get_gradients(tiny_setup):
    _, model, _, (train, _, _) = tiny_setup(token_propagation=2)
    assert not model.propagated_structural.requires_grad
    assert "propagated_structural" not in model.state_dict() and "adjacency" not in model.state_dict()
    model.calculate_loss(next(iter(train))).backward()
    assert model.user_embedding.weight.grad.abs().sum() > 0


def test_a_query_temperature_divides_the_queries(tiny_setup):
    _, model, _, _ = tiny_setup(attention_temperature=0.25, precision="fp32")
    layer = model.layers[0]
    raw_query = layer.query.parametrizations.weight.original
    queries = torch.tensor([1, 30, 59])
    with torch.no_grad():
        x, z = model.node_tokens(), model.degree_centrality()
        torch.testing.assert_close(layer.query.weight, raw_query / 0.25)
        expected = x[queries] + explicit_attention(layer, x[queries], x, x, z[queries], z)
        torch.testing.assert_close(model(queries), expected)
    torch.testing.assert_close(query_temperature(layer), torch.tensor(0.25))
    assert query_temperature(tiny_setup()[1].layers[0]) is None


def test_the_degree_gate_weighs_the_attention_per_node(tiny_setup):
    _, model, _, (train, _, _) = tiny_setup(degree_gate=True, attention_weight=0.8, precision="fp32")
    block = model.layers[0]
    assert isinstance(block, AttentionBlock)
    with torch.no_grad():
        block.gate_slope.fill_(-0.6), block.gate_bias.fill_(0.5)
        x, z = model.node_tokens(), model.degree_centrality()
        gate = torch.sigmoid(-0.6 * torch.log1p(degrees_of(train)) + 0.5)
        expected = x + 0.8 * gate[:, None] * explicit_attention(block.attention, x, x, x, z, z)
        torch.testing.assert_close(model(), expected)


def test_the_value_projection_is_attention_over_x_w_v(tiny_setup):
    _, model, _, _ = tiny_setup(value_projection=True, n_heads=2, precision="fp32")
    block = model.layers[0]
    with torch.no_grad():
        block.value_weight.add_(0.3 * torch.randn_like(block.value_weight))
        x, z = model.node_tokens(), model.degree_centrality()
        values = x @ torch.block_diag(*block.value_weight)
        expected = x + explicit_attention(block.attention, x, x, values, z, z)
        torch.testing.assert_close(model(), expected)


@pytest.mark.parametrize(
    "option",
    [
        {"value_projection": True},
        {"residual_scale": "learned"},
        {"learn_temperature": True},
        {"degree_gate": True, "attention_weight": 2.0},
        {"layer_norm": True, "value_projection": True},
    ],
    ids=str,
)
def test_each_option_at_its_start_is_the_papers_form(tiny_setup, option):
    """W_V = I, s = attention_weight, tau = 1 and g = 1/2 (with the weight doubled) start where the paper starts."""
    reference = {"attention_weight": option.get("attention_weight", 2.0) / 2} if "degree_gate" in option else {}
    if "layer_norm" in option:
        reference = {"layer_norm": True}
    _, model, _, _ = tiny_setup(seed=4, precision="fp32", **option)
    _, paper, _, _ = tiny_setup(seed=4, precision="fp32", **reference)
    with torch.no_grad():
        torch.testing.assert_close(model(), paper())


@pytest.mark.parametrize(
    "option",
    [
        {"token_propagation": 2},
        {"attention_temperature": 0.3},
        {"value_projection": True},
        {"residual_scale": "learned"},
        {"learn_temperature": True},
        {"degree_gate": True},
    ],
    ids=str,
)
def test_each_option_changes_the_outputs_after_a_training_step(tiny_setup, option):
    _, model, _, (train, _, _) = tiny_setup(seed=2, precision="fp32", **option)
    _, paper, _, _ = tiny_setup(seed=2, precision="fp32")
    for each in (model, paper):
        optimizer = torch.optim.SGD(each.parameters(), lr=0.5)
        each.calculate_loss(next(iter(train))).backward()
        optimizer.step()
    with torch.no_grad():
        assert (model() - paper()).abs().max() > 1e-3
    own = {
        "value_projection": "value_weight",
        "residual_scale": "residual_scale",
        "degree_gate": "gate_slope",
        "learn_temperature": "log_temperature",
    }
    for key, name in own.items():
        if key in option:  # the option's own parameter trains
            grads = [p.grad for n, p in model.named_parameters() if n.endswith(name)]
            assert grads and all(g is not None and g.abs().sum() > 0 for g in grads)


def test_options_survive_a_weights_only_checkpoint_and_a_deep_copy(tiny_setup, tmp_path):
    options = {
        "token_propagation": 1,
        "learn_temperature": True,
        "degree_gate": True,
        "value_projection": True,
        "residual_scale": "learned",
        "precision": "fp32",
    }
    _, model, _, (train, _, _) = tiny_setup(seed=1, **options)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    model.calculate_loss(next(iter(train))).backward()
    optimizer.step()
    torch.save(model.state_dict(), tmp_path / "model.pth")
    _, restored, _, _ = tiny_setup(seed=1, **options)  # the same data split: the graph is rebuilt from it
    restored.load_state_dict(torch.load(tmp_path / "model.pth", weights_only=True))
    copied = copy.deepcopy(model)  # RecBole's run_recbole deep-copies a model to count its FLOPs
    with torch.no_grad():
        torch.testing.assert_close(restored(), model())
        torch.testing.assert_close(copied(), model())


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"token_propagation": -1}, "token_propagation must be a non-negative integer"),
        ({"token_propagation": 1.5}, "token_propagation must be a non-negative integer"),
        ({"attention_temperature": 0}, "attention_temperature must be a number > 0"),
        ({"learn_temperature": "yes"}, "unknown learn_temperature 'yes'; choose one of False, True"),
        ({"value_projection": 1}, "unknown value_projection 1; choose one of False, True"),
        ({"degree_gate": "on"}, "unknown degree_gate 'on'"),
        ({"residual_scale": "free"}, "unknown residual_scale 'free'; choose one of fixed, learned"),
        ({"attention_temperature": 0.5, "feature_map": "relu"}, "apply to the random feature maps"),
        ({"learn_temperature": True, "feature_map": "elu"}, "feature_map elu has no temperature"),
        ({"degree_gate": True, "residual": False}, "set residual: True"),
        ({"residual_scale": "learned", "residual": False}, "set residual: True"),
    ],
)
def test_bad_option_values_raise_clear_errors(tiny_setup, overrides, message):
    with pytest.raises(ValueError, match=message):
        tiny_setup(**overrides)


@pytest.mark.slow
def test_compiled_attention_with_the_options_gives_the_eager_loss_and_gradients(tiny_setup):
    options = {
        "learn_temperature": True,
        "value_projection": True,
        "degree_gate": True,
        "token_propagation": 1,
        "precision": "fp32",
    }
    _, eager, _, (train, _, _) = tiny_setup(seed=3, **options)
    _, compiled, _, _ = tiny_setup(seed=3, compile=True, **options)
    batch = next(iter(train))
    losses = [model.calculate_loss(batch) for model in (eager, compiled)]
    torch.testing.assert_close(losses[1], losses[0])
    for loss in losses:
        loss.backward()
    for (name, p_eager), (_, p_compiled) in zip(eager.named_parameters(), compiled.named_parameters()):
        if p_eager.grad is not None:
            torch.testing.assert_close(p_compiled.grad, p_eager.grad, msg=name)
    assert compiled.layers[0].attention.mix.active  # compiled with the temperature's parametrization, no fallback
