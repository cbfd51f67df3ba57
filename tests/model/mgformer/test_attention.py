import math

import pytest
import torch

from recbole_mgformer.model.mgformer.attention import (
    adjacency_kernel_attention,
    key_summary,
    masked_kernel_attention,
    query_readout,
)


def explicit_masked_attention(phi_q, phi_k, values, mask):
    """Eq. (8) computed directly: an explicit n x n mask times phi(Q) phi(K)^T, O(n^2)."""
    weights = mask * (phi_q @ phi_k.transpose(-2, -1))
    return (weights @ values) / weights.sum(-1, keepdim=True)


def sin_degree_mask(z_query, z_key):
    """Eq. (10): M_ij = sin(pi/2 * (z_i + z_j) / 2)."""
    return torch.sin(math.pi / 2 * (z_query[:, None] + z_key[None, :]) / 2)


def random_inputs(heads, n, m, v, seed=0):
    g = torch.Generator().manual_seed(seed)
    phi_q = torch.rand(heads, n, m, generator=g, dtype=torch.float64) + 0.01
    phi_k = torch.rand(heads, n, m, generator=g, dtype=torch.float64) + 0.01
    values = torch.randn(heads, n, v, generator=g, dtype=torch.float64)
    z = torch.rand(n, generator=g, dtype=torch.float64)
    return phi_q, phi_k, values, z


@pytest.mark.parametrize("heads", [1, 2])
def test_linear_time_eq_12_equals_eq_8_with_an_explicit_mask(heads):
    phi_q, phi_k, values, z = random_inputs(heads, n=23, m=6, v=5)
    fast = masked_kernel_attention(phi_q, phi_k, values, z, z)
    slow = explicit_masked_attention(phi_q, phi_k, values, sin_degree_mask(z, z))
    torch.testing.assert_close(fast, slow)


def test_the_sin_mask_changes_the_output():
    phi_q, phi_k, values, z = random_inputs(1, n=23, m=6, v=5)
    masked = masked_kernel_attention(phi_q, phi_k, values, z, z)
    unmasked = masked_kernel_attention(phi_q, phi_k, values)
    assert not torch.allclose(masked, unmasked)


def test_without_a_mask_it_is_eq_6():
    phi_q, phi_k, values, _ = random_inputs(2, n=17, m=4, v=3)
    slow = explicit_masked_attention(phi_q, phi_k, values, torch.ones(17, 17, dtype=torch.float64))
    torch.testing.assert_close(masked_kernel_attention(phi_q, phi_k, values), slow)


def test_queries_for_a_batch_read_the_same_key_sums():
    phi_q, phi_k, values, z = random_inputs(2, n=30, m=6, v=4)
    batch = torch.tensor([3, 0, 29, 3])
    summary = key_summary(phi_k, values, z)
    batch_out = query_readout(phi_q[:, batch], summary, z[batch])
    torch.testing.assert_close(batch_out, masked_kernel_attention(phi_q, phi_k, values, z, z)[:, batch])


@pytest.mark.parametrize("heads", [1, 2])
def test_adjacency_mask_equals_dense_zero_one_mask(heads):
    phi_q, phi_k, values, _ = random_inputs(heads, n=12, m=5, v=3)
    g = torch.Generator().manual_seed(5)
    mask = (torch.rand(12, 12, generator=g) < 0.3).double()
    mask.fill_diagonal_(1.0)
    rows, cols = mask.nonzero(as_tuple=True)
    fast = adjacency_kernel_attention(phi_q, phi_k, values, rows, cols)
    torch.testing.assert_close(fast, explicit_masked_attention(phi_q, phi_k, values, mask))


def test_random_feature_attention_approximates_softmax_attention():
    """With many features, Eq. (6) with SimRFs approaches exact softmax attention (Eq. 1)."""
    from recbole_mgformer.model.mgformer.feature_maps import apply_feature_map, draw_projection

    g = torch.Generator().manual_seed(0)
    k = 8
    q = 0.6 * torch.randn(1, 20, k, generator=g, dtype=torch.float64)
    keys = 0.6 * torch.randn(1, 50, k, generator=g, dtype=torch.float64)
    values = torch.randn(1, 50, 3, generator=g, dtype=torch.float64)
    exact = torch.softmax(q @ keys.transpose(-2, -1) / math.sqrt(k), dim=-1) @ values

    def mean_error(m):
        w = draw_projection("simrf", m, k, g, torch.float64)
        phi_q, phi_k = apply_feature_map("simrf", q, w, True), apply_feature_map("simrf", keys, w, False)
        return (masked_kernel_attention(phi_q, phi_k, values) - exact).abs().mean()

    few, many = mean_error(16), mean_error(8192)
    assert many < 0.01
    assert many < few / 3
