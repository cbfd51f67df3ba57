import math

import pytest
import torch

from recbole_mgformer.model.mgformer.attention_options import (
    AttentionBlock,
    QueryTemperature,
    degree_gate,
    project_values,
)
from recbole_mgformer.model.mgformer.feature_maps import apply_feature_map, draw_projection


def test_degree_gate_is_the_sigmoid_of_a_log_degree_line():
    degrees = torch.tensor([0.0, 1.0, 5.0, 300.0])
    slope, bias = torch.tensor(-0.8), torch.tensor(0.4)
    expected = [1 / (1 + math.exp(-(-0.8 * math.log(1 + d) + 0.4))) for d in degrees.tolist()]
    torch.testing.assert_close(degree_gate(torch.log1p(degrees), slope, bias), torch.tensor(expected))
    gate = degree_gate(torch.log1p(degrees), slope, bias)
    assert (gate[:-1] > gate[1:]).all()  # a negative slope: the colder the node, the more attention


def test_values_projected_after_the_attention_equal_attention_over_projected_values():
    torch.manual_seed(0)
    heads, head_size, n, b = 2, 3, 9, 4
    weights = torch.rand(heads, b, n)  # any non-negative attention weights
    x = torch.randn(n, heads * head_size)
    value_weight = torch.randn(heads, head_size, head_size)
    block_diagonal = torch.block_diag(*value_weight)
    normalised = weights / weights.sum(-1, keepdim=True)

    def attend(values):
        return torch.cat([normalised[h] @ values[:, h * head_size : (h + 1) * head_size] for h in range(heads)], dim=1)

    torch.testing.assert_close(project_values(attend(x), value_weight), attend(x @ block_diagonal))


def test_query_temperature_sharpens_the_random_feature_kernel_as_exp_qk_over_tau():
    """Scaling the queries by 1/tau makes the estimated attention softmax(q.k / (tau sqrt(k)))."""
    generator = torch.Generator().manual_seed(0)
    k, n, m, tau = 4, 6, 200_000, 0.5
    # small vectors: the estimator's variance grows as exp(|q|^2 + |k|^2)
    queries, keys = 0.6 * torch.randn(3, k, generator=generator), 0.6 * torch.randn(n, k, generator=generator)
    projection = draw_projection("prf", m, k, generator)
    temperature = QueryTemperature(tau, learned=False)
    scaled_queries = queries @ temperature(torch.eye(k)).T
    phi_q = apply_feature_map("prf", scaled_queries, projection, is_query=True)
    phi_k = apply_feature_map("prf", keys, projection, is_query=False)
    estimated = phi_q @ phi_k.T
    estimated = estimated / estimated.sum(-1, keepdim=True)
    exact = torch.softmax(queries @ keys.T / (tau * math.sqrt(k)), dim=-1)
    torch.testing.assert_close(estimated, exact, atol=0.02, rtol=0.0)
    plain = torch.softmax(queries @ keys.T / math.sqrt(k), dim=-1)
    assert (estimated - plain).abs().max() > 0.05  # the check tells tau = 0.5 from tau = 1
    entropy = lambda p: -(p * p.log()).sum(-1)  # noqa: E731
    assert (entropy(exact) < entropy(plain)).all()


def test_a_learned_temperature_is_a_parameter_and_a_fixed_one_a_buffer():
    learned, fixed = QueryTemperature(2.0, learned=True), QueryTemperature(2.0, learned=False)
    assert [name for name, _ in learned.named_parameters()] == ["log_temperature"]
    assert list(fixed.parameters()) == [] and "log_temperature" in fixed.state_dict()
    torch.testing.assert_close(learned.temperature, torch.tensor(2.0))


class _FixedAttention(torch.nn.Module):
    """Stands in for the attention layer: returns given attention outputs for the queries."""

    def __init__(self, outputs):
        super().__init__()
        self.outputs = outputs

    def forward(self, learned, fixed=None, z=None, query_index=None, edges=None, key_index=None):
        return self.outputs if query_index is None else self.outputs[query_index]


def test_the_block_adds_the_scaled_gated_projected_attention_to_the_tokens():
    torch.manual_seed(1)
    n, d, heads = 5, 3, 2
    learned, fixed = torch.randn(n, d), torch.randn(n, d)
    attention = torch.randn(n, 2 * d)
    log_degree = torch.log1p(torch.tensor([0.0, 1.0, 2.0, 10.0, 50.0]))
    block = AttentionBlock(
        _FixedAttention(attention),
        2 * d,
        heads,
        attention_weight=0.7,
        residual_scale="learned",
        value_projection=True,
        log_degree=log_degree,
    )
    with torch.no_grad():
        block.gate_slope.fill_(-0.5), block.gate_bias.fill_(0.2), block.residual_scale.fill_(1.3)
        block.value_weight.add_(0.1 * torch.randn_like(block.value_weight))
    gate = torch.sigmoid(-0.5 * log_degree + 0.2)
    expected = torch.cat([learned, fixed], 1) + 1.3 * gate[:, None] * (
        attention @ torch.block_diag(*block.value_weight)
    )
    torch.testing.assert_close(block(learned, fixed), expected)
    queries = torch.tensor([3, 0, 3])
    torch.testing.assert_close(block(learned, fixed, query_index=queries), expected[queries])


def test_the_block_at_its_defaults_is_the_plain_residual():
    attention = torch.randn(4, 6)
    block = AttentionBlock(_FixedAttention(attention), 6, 1, attention_weight=0.4)
    learned = torch.randn(4, 6)
    torch.testing.assert_close(block(learned), learned + 0.4 * attention)
    assert list(block.parameters()) == []


def test_a_gate_or_learned_scale_without_a_residual_is_an_error():
    with pytest.raises(ValueError, match="set residual: True"):
        AttentionBlock(_FixedAttention(torch.zeros(2, 2)), 2, 1, residual=False, residual_scale="learned")
    with pytest.raises(ValueError, match="unknown residual_scale 'free'"):
        AttentionBlock(_FixedAttention(torch.zeros(2, 2)), 2, 1, residual_scale="free")
