import logging

import numpy as np
import pytest
import torch

from recbole_mgformer.model.general_recommender.mgformer import MGFormer
from recbole_mgformer.model.mgformer.option_names import ATTENTION_OPTIONS
from recbole_mgformer.model.mgformer.structural import svd_structural_encodings


def test_structural_encodings_come_from_the_training_split_only(tiny_setup):
    _, model, _, (train, _, _) = tiny_setup()
    matrix = train._dataset.inter_matrix(form="csr").astype(np.float32)
    users, items = svd_structural_encodings(matrix, model.embedding_size, seed=model.seed)
    np.testing.assert_array_equal(model.structural.numpy(), np.concatenate([users, items]))
    assert not model.structural.requires_grad
    full = train._dataset.inter_num  # the training split is smaller than the whole data
    assert full < 40 * 12


def test_tokens_join_embeddings_and_encodings(tiny_setup):
    _, model, _, _ = tiny_setup()
    x = model.node_tokens()
    assert x.shape == (model.n_users + model.n_items, 2 * model.embedding_size)
    torch.testing.assert_close(x[: model.n_users, model.embedding_size :], model.structural[: model.n_users])


@pytest.mark.parametrize("degree_mask", ["sin", "adjacency"])
def test_batch_queries_equal_rows_of_the_full_forward(tiny_setup, degree_mask):
    _, model, _, _ = tiny_setup(n_heads=2, degree_mask=degree_mask, precision="fp32")
    nodes = torch.tensor([1, 5, 41, 1, 60])
    with torch.no_grad():
        torch.testing.assert_close(model(nodes), model()[nodes])


def test_sampled_keys_equal_eq_8_over_those_keys_with_an_explicit_mask(tiny_setup):
    import math

    _, model, _, _ = tiny_setup(key_sample_size=7, precision="fp32")
    queries, keys = torch.tensor([0, 3, 45, 50]), torch.tensor([2, 9, 30, 44, 51, 58, 60])
    with torch.no_grad():
        x, z, layer = model.node_tokens(), model.degree_centrality(), model.layers[0]
        phi_q = layer.features(layer.query(x[queries])[None], is_query=True)[0]
        phi_k = layer.features(layer.key(x[keys])[None], is_query=False)[0]
        mask = torch.sin(math.pi / 2 * (z[queries, None] + z[None, keys]) / 2)
        weights = (phi_q @ phi_k.T) * mask
        expected = x[queries] + weights @ x[keys] / weights.sum(1, keepdim=True)
        torch.testing.assert_close(model(queries, keys), expected)


def test_adjacency_mask_equals_eq_8_with_the_training_graph_as_an_explicit_mask(tiny_setup):
    _, model, _, (train, _, _) = tiny_setup(degree_mask="adjacency")
    binary = torch.from_numpy(train._dataset.inter_matrix(form="coo").toarray() > 0).float()
    mask = torch.eye(model.n_nodes)
    mask[: model.n_users, model.n_users :], mask[model.n_users :, : model.n_users] = binary, binary.T
    queries = torch.tensor([0, 3, 45, 3, 50])
    with torch.no_grad():
        x, layer = model.node_tokens(), model.layers[0]
        phi_q = layer.features(layer.query(x[queries])[None], is_query=True)[0]
        phi_k = layer.features(layer.key(x)[None], is_query=False)[0]
        weights = (phi_q @ phi_k.T) * mask[queries]
        expected = x[queries] + weights @ x / weights.sum(1, keepdim=True)
        torch.testing.assert_close(model(queries), expected)


def test_keys_are_sampled_from_the_seed_in_training_and_evaluation_uses_all(tiny_setup):
    _, model, _, (train, _, test) = tiny_setup(key_sample_size=7, seed=5)
    _, same, _, _ = tiny_setup(key_sample_size=7, seed=5)
    draws = [model.sample_keys() for _ in range(3)]
    assert all(len(d) == 7 and len(set(d.tolist())) == 7 for d in draws)
    assert not torch.equal(draws[0], draws[1])
    assert torch.equal(draws[0], same.sample_keys())
    _, everything, _, _ = tiny_setup(key_sample_size=10_000)
    assert everything.sample_keys() is None
    # Training attends to the sample only; full-sort scores come from all keys.
    model.calculate_loss(next(iter(train)))
    _, exact, _, _ = tiny_setup(seed=5)
    exact.load_state_dict(model.state_dict())
    model.eval(), exact.eval()
    interaction = next(iter(test))[0]
    with torch.no_grad():
        torch.testing.assert_close(model.full_sort_predict(interaction), exact.full_sort_predict(interaction))


def test_attention_false_returns_the_tokens(tiny_setup):
    _, model, _, _ = tiny_setup(attention=False)
    with torch.no_grad():
        torch.testing.assert_close(model(), model.node_tokens())


def test_degree_centrality_is_in_the_open_unit_interval_and_learnable(tiny_setup):
    _, model, _, (train, _, _) = tiny_setup()
    z = model.degree_centrality()
    assert ((z > 0) & (z < 1)).all()
    loss = model.calculate_loss(next(iter(train)))
    loss.backward()
    assert model.degree_embedding.weight.grad.abs().sum() > 0


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"attention": False},
        {"structural_encoding": "none"},
        {"degree_mask": "none"},
        {"degree_mask": "adjacency"},
        {"feature_map": "elu"},
        {"feature_map": "focused"},
        {"feature_map": "relu"},
        {"feature_map": "orf"},
        {"feature_map": "prf", "n_features": 24},
        {"n_layers": 2, "n_heads": 2},
        {"residual": False},
        {"layer_norm": True, "qk_init": "identity", "score": "cosine"},
        {"svd_solver": "randomized"},
        {"key_sample_size": 16},
        {"key_sample_size": 16, "degree_mask": "none"},
        {"key_chunk_size": 0},
        {"key_chunk_size": 7, "n_heads": 2},
        {"precision": "bf16"},
        {"key_features": "keep"},
        # the options beyond the paper (model/mgformer/attention_options.py, token_propagation)
        {"token_propagation": 2, "key_sample_size": 16},
        {"token_propagation": 1, "degree_mask": "adjacency"},
        {"token_propagation": 1, "structural_encoding": "none"},
        {"token_propagation": 1, "key_chunk_size": 0},
        {"attention_temperature": 0.5, "learn_temperature": True, "feature_map": "prf", "n_features": 24},
        {"value_projection": True, "degree_gate": True, "residual_scale": "learned", "n_layers": 2, "n_heads": 2},
        {"degree_gate": True, "degree_mask": "adjacency"},
        {"value_projection": True, "residual": False},
        {"value_projection": True, "precision": "bf16"},
    ],
    ids=str,
)
def test_every_option_trains_and_scores_consistently(tiny_setup, overrides):
    _, model, _, (train, _, test) = tiny_setup(**{"precision": "fp32", **overrides})
    batch = next(iter(train))
    loss = model.calculate_loss(batch)
    assert torch.isfinite(loss)
    loss.backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
    model.eval()
    with torch.no_grad():
        interaction, _, _, positive_items = next(iter(test))
        scores = model.full_sort_predict(interaction).view(len(interaction), -1)
        users = interaction[model.USER_ID]
        pairs = type(interaction)({model.USER_ID: users, model.ITEM_ID: positive_items[: len(users)]})
        # bf16 rounds a batch's matmuls apart from the full forward's: agreement to its 8 significant bits.
        tolerance = {"rtol": 2e-2, "atol": 2e-2} if model.precision == "bf16" else {"rtol": 1e-4, "atol": 1e-5}
        torch.testing.assert_close(
            model.predict(pairs), scores[torch.arange(len(users)), pairs[model.ITEM_ID]], **tolerance
        )


def test_full_sort_cache_is_cleared_when_training_resumes(tiny_setup):
    _, model, _, (train, _, test) = tiny_setup()
    interaction = next(iter(test))[0]
    model.eval()  # the base class's cache (CachedRepresentations) holds evaluation's representations only
    with torch.no_grad():
        scores = model.full_sort_predict(interaction)
        cached = model.restore_user_e
        assert cached is not None
        torch.testing.assert_close(model.full_sort_predict(interaction), scores)
        assert model.restore_user_e is cached
    model.calculate_loss(next(iter(train)))
    assert model.restore_user_e is None and model.restore_item_e is None
    model.eval()
    with torch.no_grad():
        model.full_sort_predict(interaction)
    model.train()
    assert model.restore_user_e is None and model.restore_item_e is None


def test_large_norm_inputs_give_finite_outputs_and_gradients(tiny_setup):
    _, model, _, _ = tiny_setup()
    with torch.no_grad():
        model.user_embedding.weight.mul_(0).add_(1e3)
        model.layers[0].query.weight.mul_(50)
        model.layers[0].key.weight.mul_(50)
    out = model(torch.arange(10))
    out.sum().backward()
    assert torch.isfinite(out).all()
    assert torch.isfinite(model.layers[0].query.weight.grad).all()
    assert torch.isfinite(model.user_embedding.weight.grad).all()


def test_random_features_are_seeded_saved_and_redrawn_on_schedule(tiny_setup):
    _, first, _, (train, _, _) = tiny_setup(seed=11)
    _, second, _, _ = tiny_setup(seed=11)
    _, other, _, _ = tiny_setup(seed=12)
    assert torch.equal(first.layers[0].projection, second.layers[0].projection)
    assert not torch.equal(first.layers[0].projection, other.layers[0].projection)
    assert "layers.0.projection" in first.state_dict()

    _, redrawing, _, _ = tiny_setup(seed=11, feature_redraw_interval=2)
    before = redrawing.layers[0].projection.clone()
    batch = next(iter(train))
    redrawing.calculate_loss(batch)
    assert torch.equal(before, redrawing.layers[0].projection)
    redrawing.calculate_loss(batch)
    assert not torch.equal(before, redrawing.layers[0].projection)


def test_a_deterministic_feature_map_saves_a_zero_projection_not_stray_memory(tiny_setup):
    for _ in range(2):  # a fresh allocation each time: left uninitialised, it held whatever memory it got
        _, model, _, _ = tiny_setup(feature_map="elu")
        assert torch.equal(model.state_dict()["layers.0.projection"], torch.zeros(1, 16, 16))


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"feature_map": "gaussian"}, "unknown feature_map 'gaussian'; choose one of simrf"),
        ({"embedding_size": -4}, "embedding_size (must be a positive integer|is -4: it must be a whole number)"),
        ({"degree_mask": "full"}, "unknown degree_mask 'full'"),
        ({"n_heads": 3}, "n_heads=3 must divide the token width 16"),
        ({"score": "l2"}, "unknown score"),
        ({"svd_solver": "lanczos"}, "unknown svd_solver 'lanczos'"),
        ({"key_sample_size": -1}, "key_sample_size must be a non-negative integer"),
        ({"key_sample_size": 8, "degree_mask": "adjacency"}, "the adjacency mask is already sparse"),
        ({"compile": "yes"}, "unknown compile .yes.; choose one of False, True, auto"),
        ({"precision": "fp16"}, "unknown precision 'fp16'; choose one of fp32, bf16, auto"),
        ({"key_chunk_size": -2}, "key_chunk_size must be a non-negative integer .* or auto"),
        ({"key_features": "store"}, "unknown key_features 'store'; choose one of recompute, keep, auto"),
        ({"structural_scale": 0}, "structural_scale must be a number > 0"),
        ({"structural_size": 0}, "structural_size must be a positive integer or ~"),
        ({"structural_size": 2, "n_heads": 3}, "n_heads=3 must divide the token width 10"),
    ],
)
def test_bad_options_raise_clear_errors(tiny_setup, overrides, message):
    with pytest.raises(ValueError, match=message):
        tiny_setup(**overrides)


def test_model_is_a_pointwise_general_recommender():
    from recbole.model.abstract_recommender import GeneralRecommender
    from recbole.utils import InputType

    assert issubclass(MGFormer, GeneralRecommender)
    assert MGFormer.input_type == InputType.POINTWISE


@pytest.mark.slow
@pytest.mark.parametrize("degree_mask, path", [("sin", "mix"), ("adjacency", "mix_edges")])
def test_compiled_attention_gives_the_eager_loss_and_gradients(tiny_setup, degree_mask, path):
    _, eager, _, (train, _, _) = tiny_setup(seed=3, degree_mask=degree_mask)
    _, compiled, _, _ = tiny_setup(seed=3, degree_mask=degree_mask, compile=True)
    assert getattr(compiled.layers[0], path).active
    batch = next(iter(train))
    losses = [model.calculate_loss(batch) for model in (eager, compiled)]
    torch.testing.assert_close(losses[1], losses[0])
    for loss in losses:
        loss.backward()
    for (name, p_eager), (_, p_compiled) in zip(eager.named_parameters(), compiled.named_parameters()):
        torch.testing.assert_close(p_compiled.grad, p_eager.grad, msg=name)
    assert getattr(compiled.layers[0], path).active  # it really ran compiled, with no fallback
    for model in (eager, compiled):
        model.eval()
    torch.testing.assert_close(compiled.full_sort_predict(batch), eager.full_sort_predict(batch))  # all n queries


def test_structural_scale_multiplies_the_encodings(tiny_setup):
    _, plain, _, _ = tiny_setup()
    _, scaled, _, _ = tiny_setup(structural_scale=4.0)
    torch.testing.assert_close(scaled.structural, 4.0 * plain.structural)


def test_structural_size_sets_the_svd_rank_and_the_token_width(tiny_setup):
    _, model, _, (train, _, _) = tiny_setup(structural_size=3, n_heads=1)
    matrix = train._dataset.inter_matrix(form="csr").astype(np.float32)
    users, items = svd_structural_encodings(matrix, 3, seed=model.seed)
    np.testing.assert_array_equal(model.structural.numpy(), np.concatenate([users, items]))
    assert model.node_tokens().shape == (model.n_nodes, model.embedding_size + 3)
    with torch.no_grad():
        assert model().shape == (model.n_nodes, model.embedding_size + 3)
    _, paper, _, _ = tiny_setup(structural_size=None)  # ~: q = d, as Eq. (3)
    assert paper.structural.shape == (paper.n_nodes, paper.embedding_size)


@pytest.mark.parametrize("structural_size, warned", [(41, False), (42, True), (500, True)])
def test_a_structural_size_above_the_matrix_rank_is_warned_about(tiny_setup, caplog, structural_size, warned):
    with caplog.at_level(logging.WARNING):
        _, model, _, _ = tiny_setup(structural_size=structural_size, n_heads=1)  # 41 users x 61 items, padding in
    assert model.structural.shape[1] == structural_size
    assert ("columns of structural encodings are zero" in caplog.text) == warned
    if warned:
        assert f"structural_size {structural_size} is above the 41 singular values" in caplog.text
        assert not model.structural[:, 41:].any()


def test_key_features_auto_keeps_them_on_a_small_graph(tiny_setup):
    _, model, _, _ = tiny_setup()  # the default, key_features: auto, on a small graph
    assert model.layers[0].chunk_functions.keep is True
    _, model, _, _ = tiny_setup(key_features="recompute")
    assert model.layers[0].chunk_functions.keep is False


def test_compile_auto_leaves_a_small_graph_eager(tiny_setup):
    _, model, _, _ = tiny_setup(seed=3)  # the default, compile: auto
    assert model.layers[0].mix == model.layers[0]._mix


# A value other than the default for each of ATTENTION_OPTIONS.
CHANGED_ATTENTION_OPTIONS = {
    "n_layers": 2,
    "n_heads": 2,
    "feature_map": "elu",
    "n_features": 8,
    "feature_redraw_interval": 1,
    "focusing_factor": 2,
    "degree_mask": "none",
    "degree_embedding_size": 4,
    "max_exact_degree": 2,
    "residual": False,
    "attention_weight": 0.5,
    "layer_norm": True,
    "qk_init": "identity",
    "key_sample_size": 5,
    "attention_temperature": 0.5,
    "learn_temperature": True,
    "value_projection": True,
    "degree_gate": True,
    "residual_scale": "learned",
    "compile": True,
    "key_chunk_size": 0,
    "key_features": "keep",
}


def test_attention_options_change_nothing_without_attention(tiny_setup):
    """The leaderboards' control of a variant drops these options: that is only right while each is inert with
    ``attention: False`` (the same tokens, loss and gradients from the same embeddings). Building attention layers
    draws from the global generator, so an option may change the embeddings' initial draw, as another seed would:
    the embeddings are copied from the reference."""
    assert set(CHANGED_ATTENTION_OPTIONS) == ATTENTION_OPTIONS

    def outputs(model, train):
        loss = model.calculate_loss(next(iter(train)))
        loss.backward()
        with torch.no_grad():
            return model(), loss.detach(), model.user_embedding.weight.grad, model.item_embedding.weight.grad

    _, reference, _, (train, _, _) = tiny_setup(attention=False)
    expected = outputs(reference, train)
    for key, value in CHANGED_ATTENTION_OPTIONS.items():
        _, model, _, (train, _, _) = tiny_setup(attention=False, **{key: value})
        with torch.no_grad():
            model.user_embedding.weight.copy_(reference.user_embedding.weight)
            model.item_embedding.weight.copy_(reference.item_embedding.weight)
        for want, got in zip(expected, outputs(model, train)):
            torch.testing.assert_close(got, want, msg=lambda text, key=key, value=value: f"{key}={value!r}: {text}")


# The state dict's keys as saved before MGFormer's options and layers were reorganised: a checkpoint from then
# loads into the model of today (strict load_state_dict compares exactly these).
SAVED_KEYS = [
    "structural",
    "degree_bucket",
    "feature_draws",
    "user_embedding.weight",
    "item_embedding.weight",
    "degree_embedding.weight",
    "degree_projection.weight",
    "degree_projection.bias",
]
PLAIN_LAYER = ["layers.0.projection", "layers.0.query.weight", "layers.0.key.weight"]
TEMPERATURE_LAYER = [
    "layers.0.projection",
    "layers.0.query.parametrizations.weight.original",
    "layers.0.query.parametrizations.weight.0.log_temperature",
    "layers.0.key.weight",
]
BLOCKS = [
    f"layers.{i}.{name}"
    for i in (0, 1)
    for name in (
        "residual_scale",
        "value_weight",
        "gate_slope",
        "gate_bias",
        "attention.projection",
        "attention.query.weight",
        "attention.key.weight",
    )
]


@pytest.mark.parametrize(
    "overrides, layer_keys",
    [
        ({}, PLAIN_LAYER),
        ({"attention_temperature": 0.5, "learn_temperature": True, "feature_map": "prf"}, TEMPERATURE_LAYER),
        (
            {"value_projection": True, "degree_gate": True, "residual_scale": "learned", "n_layers": 2, "n_heads": 2},
            BLOCKS,
        ),
    ],
    ids=["paper", "temperature", "blocks"],
)
def test_the_state_dict_keeps_the_keys_checkpoints_were_saved_with(tiny_setup, overrides, layer_keys):
    _, model, _, _ = tiny_setup(**overrides)
    assert list(model.state_dict()) == SAVED_KEYS + layer_keys
