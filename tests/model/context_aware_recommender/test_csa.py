import math

import pytest
import torch
import torch.nn.functional as F
from conftest import CONTEXT_PROTOCOL, write_context_dataset

from recbole_mgformer import run_recommender
from recbole_mgformer.config.defaults import properties_dir
from recbole_mgformer.integration.registry import get_model
from recbole_mgformer.model.context_aware_recommender.csa import CSA, TransformerBlock, masked_attention
from recbole_mgformer.quick_start import build_config, prepare

# ---- direct, slow references -------------------------------------------------------------------------------


def direct_layer_norm(x, norm):
    mean = x.mean()
    var = ((x - mean) ** 2).mean()
    return (x - mean) / math.sqrt(var + norm.eps) * norm.weight + norm.bias


def direct_block(block, x, mask, scale):
    """Eq. (2)-(3) one token at a time: per-head loops, an explicit softmax over the present keys
    (none present: zero attention), residuals and post-LayerNorm written out. x (b, n, d), mask (b, n)."""
    b, n, d = x.shape
    h = block.n_heads
    k = d // h
    wq, wk, wv, wo = block.query.weight.T, block.key.weight.T, block.value.weight.T, block.out.weight.T
    w1, b1, w2, b2 = block.ffn[0].weight.T, block.ffn[0].bias, block.ffn[2].weight.T, block.ffn[2].bias
    out = torch.zeros_like(x)
    for batch in range(b):
        for i in range(n):
            heads = []
            for s in range(h):
                cols = slice(s * k, (s + 1) * k)
                q = x[batch, i] @ wq[:, cols]
                exps, values = [], []
                for j in range(n):
                    if mask[batch, j]:
                        exps.append(math.exp(float(q @ (x[batch, j] @ wk[:, cols])) * scale))
                        values.append(x[batch, j] @ wv[:, cols])
                head = torch.zeros(k)
                for e, v in zip(exps, values):
                    head = head + e / sum(exps) * v
                heads.append(head)
            attn = direct_layer_norm(x[batch, i] + torch.cat(heads) @ wo, block.attention_norm)
            ffn = torch.clamp(attn @ w1 + b1, min=0) @ w2 + b2
            out[batch, i] = direct_layer_norm(attn + ffn, block.ffn_norm)
    return out


# ---- the block ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("n_heads,attention_scale", [(1, "d"), (2, "d"), (4, "head"), (2, "head")])
def test_block_equals_the_direct_reference(n_heads, attention_scale):
    torch.manual_seed(0)
    d = 8
    block = TransformerBlock(d, n_heads, d_ff=16, dropout=0.2, attention_scale=attention_scale).eval()
    for p in block.parameters():  # LayerNorm's affine starts at (1, 0): make it matter
        torch.nn.init.normal_(p, std=0.5)
    x = torch.randn(3, 5, d)
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 0, 1, 0, 0], [0, 0, 0, 0, 0]], dtype=torch.bool)
    scale = 1 / math.sqrt(d if attention_scale == "d" else d // n_heads)
    with torch.no_grad():
        torch.testing.assert_close(block(x, mask), direct_block(block, x, mask, scale), atol=1e-5, rtol=1e-5)


def test_the_two_scales_differ_with_several_heads():
    torch.manual_seed(0)
    paper, usual = TransformerBlock(8, 4, 16, 0.0, "d").eval(), TransformerBlock(8, 4, 16, 0.0, "head").eval()
    usual.load_state_dict(paper.state_dict())
    x, mask = torch.randn(2, 4, 8) * 3, torch.ones(2, 4, dtype=torch.bool)
    assert paper.scale == pytest.approx(1 / math.sqrt(8)) and usual.scale == pytest.approx(1 / math.sqrt(2))
    assert not torch.allclose(paper(x, mask), usual(x, mask))


def test_masked_tokens_do_not_change_the_present_ones():
    torch.manual_seed(1)
    block = TransformerBlock(8, 2, 16, 0.0).eval()
    present = torch.randn(1, 3, 8)
    padded = torch.cat([present[:, :1], torch.randn(1, 2, 8) * 10, present[:, 1:], torch.randn(1, 1, 8)], dim=1)
    mask = torch.tensor([[1, 0, 0, 1, 1, 0]], dtype=torch.bool)
    expected = block(present, torch.ones(1, 3, dtype=torch.bool))
    torch.testing.assert_close(block(padded, mask)[:, mask[0]], expected)
    # the same extra tokens left unmasked do change them
    assert not torch.allclose(block(padded, torch.ones_like(mask))[:, mask[0]], expected)


def test_all_masked_rows_attend_to_nothing_without_nan():
    q, k, v = (torch.randn(2, 2, 3, 4, requires_grad=True) for _ in range(3))
    mask = torch.tensor([[0, 0, 0], [1, 0, 1]], dtype=torch.bool)
    out = masked_attention(q, k, v, mask, scale=0.5)
    assert torch.equal(out[0], torch.zeros(2, 3, 4))
    weights = torch.softmax((q[1] @ k[1].transpose(-2, -1) * 0.5).masked_fill(~mask[1], -math.inf), dim=-1)
    torch.testing.assert_close(out[1], weights @ v[1])
    out.sum().backward()
    assert all(torch.isfinite(t.grad).all() for t in (q, k, v))


# ---- the model on a small context dataset ---------------------------------------------------------------------

CONTEXT_TOY = {
    **CONTEXT_PROTOCOL,
    "metrics": ["AUC", "LogLoss"],
    "embedding_size": 8,
    "n_heads": 2,
    "d_ff": 16,
    "epochs": 1,
    "show_progress": False,
    "state": "WARNING",
}


@pytest.fixture
def toy(tmp_path):
    data = write_context_dataset(tmp_path / "data")

    def make(**overrides):
        config, _ = build_config("CSA", "toyctx", config_dict={**CONTEXT_TOY, "data_path": str(data), **overrides})
        model, _, (train, _, _) = prepare(config)
        torch.manual_seed(0)
        with torch.no_grad():  # theta starts at zero (every logit 0): give the scores something to show
            model.theta.weight.normal_()
            model.theta.bias.normal_()
        dataset = train._dataset
        batch = dataset.join(dataset.inter_feat)  # every interaction with its user and item features
        return model.eval(), batch

    return make


def test_csa_is_a_context_model_found_by_name():
    from recbole.model.abstract_recommender import ContextRecommender

    assert get_model("csa") is CSA and issubclass(CSA, ContextRecommender)


def test_each_feature_is_one_value_weighted_token(toy):
    model, batch = toy()
    assert model.user_tokens.fields == ["user_id", "gender", "score"]
    assert model.item_tokens.fields == ["item_id", "genres", "year"]
    users, user_mask = model.user_tokens(batch)
    items, item_mask = model.item_tokens(batch)
    genres_len = batch["genres"].shape[1]
    assert users.shape == (len(batch), 3, 8) and items.shape == (len(batch), 2 + genres_len, 8)
    assert torch.equal(user_mask[:, 1], batch["gender"] != 0) and (batch["gender"] == 0).any()  # missing: masked
    # Eq. (1): the float token is the value times the field's embedding; its mask is value != 0
    score, bucket = batch["score"][:, 0], batch["score"][:, 1].long()
    row = model.user_tokens.table.weight[model.user_tokens.offsets[2] + bucket]
    torch.testing.assert_close(users[:, 2], score.unsqueeze(-1) * row)
    assert torch.equal(user_mask[:, 2], score != 0) and (score == 0).any() and (score != 0).any()
    # every genre of an item is its own token; padding is masked
    assert torch.equal(item_mask[:, 1 : 1 + genres_len], batch["genres"] != 0)
    assert item_mask[:, 1 : 1 + genres_len].sum(1).max() == 3 and (item_mask[:, 1 : 1 + genres_len].sum(1) == 0).any()


def test_absent_features_do_not_change_the_score(toy):
    model, batch = toy()
    before = model.predict(batch)
    users, items = model.user_tokens, model.item_tokens
    with torch.no_grad():  # rewrite what an absent feature would read: the [PAD] rows and the float's row
        for side in (users, items):
            for offset in side.offsets:
                side.table.weight[offset].normal_(std=5.0)
        users.table.weight[users.offsets[2] + 1].normal_(std=5.0)
    after = model.predict(batch)
    zero_score = batch["score"][:, 0] == 0
    torch.testing.assert_close(after[zero_score], before[zero_score])
    assert not torch.allclose(after[~zero_score], before[~zero_score])  # a non-zero float does read its row


def test_longer_padding_of_a_sequence_does_not_change_the_score(toy):
    model, batch = toy()
    before = model.predict(batch)
    batch.interaction["genres"] = F.pad(batch["genres"], (0, 4))
    torch.testing.assert_close(model.predict(batch), before)


def test_a_user_without_any_feature_scores_the_bias_without_nan(toy):
    model, batch = toy()
    for field in ("user_id", "gender"):
        batch.interaction[field] = torch.zeros_like(batch[field])
    batch.interaction["score"] = torch.zeros_like(batch["score"])
    logits = model(batch)
    torch.testing.assert_close(logits, model.theta.bias.expand_as(logits))
    model.train()
    loss = model.calculate_loss(batch)
    loss.backward()
    assert torch.isfinite(loss) and all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


def test_first_order_option_adds_a_weight_per_feature_value(toy):
    plain, batch = toy()
    assert not hasattr(plain, "first_order_linear")
    model, _ = toy(first_order=True)
    with torch.no_grad():
        for parameter in model.first_order_linear.parameters():
            parameter.normal_()
    first_order = model.first_order_linear(batch).squeeze(-1)
    assert first_order.std() > 0  # varies with the features
    logits = model(batch)
    model.first_order = False
    torch.testing.assert_close(logits, model(batch) + first_order)


def test_l2_term_is_half_lambda_times_the_squared_norm(toy):
    model, batch = toy(reg_weight=0.3, dropout_prob=0.0)
    model.train()
    logistic = F.binary_cross_entropy_with_logits(model(batch), batch["label"])
    norm = sum(float(p.detach().pow(2).sum()) for p in model.parameters())
    assert model.calculate_loss(batch).item() == pytest.approx(logistic.item() + 0.15 * norm, rel=1e-5)


@pytest.mark.parametrize(
    "overrides,message",
    [
        ({"embedding_size": 10, "n_heads": 4}, "divisible by n_heads"),
        ({"attention_scale": "sqrt"}, "unknown attention_scale"),
        ({"dropout_prob": 1.0}, "dropout_prob"),
        ({"n_layers": 0}, "n_layers must be a positive integer"),
        ({"reg_weight": -1}, "reg_weight"),
    ],
)
def test_bad_options_fail_with_a_clear_error(toy, overrides, message):
    with pytest.raises(ValueError, match=message):
        toy(**overrides)


# ---- end to end ---------------------------------------------------------------------------------------------

CONTEXT_FILES = [str(properties_dir() / "dataset" / "ml-100k-ctx-0.8.yaml")]  # the protocol on RecBole's ml-100k


def test_context_protocol_is_the_papers_split():
    config, _ = build_config("LR", "ml-100k-ctx-0.2")
    train, valid, test = config["eval_args"]["split"]["RS"]
    assert (train + valid, test) == pytest.approx((0.2, 0.8)) and train / valid == pytest.approx(7 / 3)
    assert config["eval_args"]["group_by"] is None
    assert config["eval_args"]["mode"] == {"valid": "labeled", "test": "labeled"}
    assert config["threshold"] == {"rating": 4} and config["valid_metric"] == "AUC"


@pytest.mark.slow
def test_csa_learns_on_ml_100k_above_logistic_regression():
    fast = {"epochs": 3, "show_progress": False, "state": "WARNING"}
    csa = run_recommender("CSA", "ml-100k", config_file_list=CONTEXT_FILES, config_dict=fast)
    lr = run_recommender("LR", "ml-100k", config_file_list=CONTEXT_FILES, config_dict=fast)
    assert csa["test_result"]["auc"] > 0.62
    assert csa["test_result"]["auc"] > lr["test_result"]["auc"] + 0.02
