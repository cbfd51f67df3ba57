"""IMC and ContextNeuMF, CSA's baselines: forward against direct references, learning, clear errors."""

import pytest
import torch
import torch.nn.functional as F
from conftest import write_context_dataset
from recbole.model.abstract_recommender import ContextRecommender
from test_csa import CONTEXT_TOY as CSA_TOY

from recbole_mgformer.integration.registry import get_model
from recbole_mgformer.model.context_aware_recommender.contextneumf import ContextNeuMF
from recbole_mgformer.model.context_aware_recommender.imc import IMC
from recbole_mgformer.quick_start import build_config, prepare

CONTEXT_TOY = {key: value for key, value in CSA_TOY.items() if key not in ("n_heads", "d_ff")}
NO_DROPOUT = {"IMC": {}, "ContextNeuMF": {"dropout_prob": 0.0}}


@pytest.fixture
def toy(tmp_path):
    data = write_context_dataset(tmp_path / "data")

    def make(model_name, **overrides):
        config, _ = build_config(model_name, "toyctx", config_dict={**CONTEXT_TOY, "data_path": str(data), **overrides})
        model, _, (train, _, _) = prepare(config)
        dataset = train._dataset
        return model, dataset.join(dataset.inter_feat)

    return make


def feature_vector(tokens, batch, row):
    """A side's multi-hot (value-weighted) feature vector x over the side's whole table, built by hand."""
    x = torch.zeros(tokens.table.num_embeddings)
    for field, kind, offset in zip(tokens.fields, tokens.kinds, tokens.offsets):
        value = batch[field][row]
        if kind == "token":
            if int(value):
                x[offset + int(value)] += 1
        elif kind == "token_seq":
            for v in value.tolist():
                if v:
                    x[offset + v] += 1
        else:  # float: (value, bucket)
            x[offset + int(value[1])] += float(value[0])
    return x


def test_both_are_context_models_found_by_name():
    assert get_model("imc") is IMC and get_model("contextneumf") is ContextNeuMF
    assert issubclass(IMC, ContextRecommender) and issubclass(ContextNeuMF, ContextRecommender)
    assert get_model("NeuMF").__module__.startswith("recbole.")  # RecBole's general NeuMF is not shadowed


def test_imc_score_is_x_u_U_V_y_i(toy):
    model, batch = toy("IMC")
    with torch.no_grad():
        model.bias.fill_(0.3)
    model.eval()
    assert model.user_tokens.fields == ["user_id", "gender", "score"]
    logits = model(batch)
    U, V = model.user_tokens.table.weight, model.item_tokens.table.weight
    for row in range(len(batch)):
        x = feature_vector(model.user_tokens, batch, row)
        y = feature_vector(model.item_tokens, batch, row)
        expected = float(x @ U @ V.T @ y) + 0.3
        assert float(logits[row]) == pytest.approx(expected, rel=1e-4, abs=1e-5)
    torch.testing.assert_close(model.predict(batch), torch.sigmoid(logits))


def test_imc_without_bias_has_no_bias(toy):
    model, batch = toy("IMC", bias=False)
    assert model.bias is None
    x = feature_vector(model.user_tokens, batch, 0)
    y = feature_vector(model.item_tokens, batch, 0)
    U, V = model.user_tokens.table.weight, model.item_tokens.table.weight
    assert float(model.eval()(batch)[0]) == pytest.approx(float(x @ U @ V.T @ y), rel=1e-4, abs=1e-5)


def test_neumf_score_is_gmf_and_mlp_over_the_feature_representations(toy):
    model, batch = toy("ContextNeuMF", mlp_hidden_size=[6, 4])
    model.eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_()
    logits = model(batch)
    for row in range(len(batch)):

        def rep(tokens, row=row):
            return feature_vector(tokens, batch, row) @ tokens.table.weight

        gmf = rep(model.gmf_user) * rep(model.gmf_item)
        h = torch.cat([rep(model.mlp_user), rep(model.mlp_item)])
        for layer in model.mlp.mlp_layers:
            if isinstance(layer, torch.nn.Linear):
                h = torch.clamp(h @ layer.weight.T + layer.bias, min=0)  # every MLPLayers layer is ReLU'd
        w, b = model.predict_layer.weight[0], model.predict_layer.bias[0]
        expected = float(torch.cat([gmf, h]) @ w + b)
        assert float(logits[row]) == pytest.approx(expected, rel=1e-4, abs=1e-4)


@pytest.mark.parametrize("name", ["IMC", "ContextNeuMF"])
def test_l2_term_is_half_lambda_times_the_squared_norm(toy, name):
    model, batch = toy(name, reg_weight=0.3, **NO_DROPOUT[name])
    model.train()
    logistic = F.binary_cross_entropy_with_logits(model(batch), batch["label"])
    norm = sum(float(p.detach().pow(2).sum()) for p in model.parameters())
    assert model.calculate_loss(batch).item() == pytest.approx(logistic.item() + 0.15 * norm, rel=1e-5)


@pytest.mark.parametrize("name", ["IMC", "ContextNeuMF"])
def test_a_few_steps_reduce_the_loss(toy, name):
    torch.manual_seed(0)
    model, batch = toy(name, **NO_DROPOUT[name])
    model.train()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    first = model.calculate_loss(batch).item()
    for _ in range(30):
        optimizer.zero_grad()
        loss = model.calculate_loss(batch)
        loss.backward()
        optimizer.step()
    assert model.calculate_loss(batch).item() < first - 0.05


@pytest.mark.parametrize(
    "name,overrides,message",
    [
        ("IMC", {"embedding_size": 0}, "embedding_size"),
        ("IMC", {"bias": "yes"}, "bias must be True or False"),
        ("IMC", {"reg_weight": -1}, "reg_weight"),
        ("ContextNeuMF", {"mlp_hidden_size": []}, "mlp_hidden_size must be a non-empty list"),
        ("ContextNeuMF", {"mlp_hidden_size": [8, 0]}, "mlp_hidden_size"),
        ("ContextNeuMF", {"dropout_prob": 1.0}, "dropout_prob"),
    ],
)
def test_bad_options_fail_with_a_clear_error(toy, name, overrides, message):
    with pytest.raises(ValueError, match=message):
        toy(name, **overrides)
