"""Masked kernel attention (Eq. 6, 8, 10-12) in linear time, as small pure functions.

Shapes: ``h`` heads, ``n`` key nodes, ``b`` query nodes, ``m`` features, ``v`` value size.
The degree mask ``M_ij = sin(pi/2 * (z_i + z_j)/2)`` is never built: with
``a = pi/4 * z`` it splits into ``sin(a_i)cos(a_j) + cos(a_i)sin(a_j)`` (Eq. 11), so each
side carries ``2m`` features and the key-side sums are computed once for all queries (Eq. 12).
"""

import math

import torch


def degree_mask_gates(z):
    """``(sin(pi z / 4), cos(pi z / 4))`` for centralities ``z`` in (0, 1): (n,) -> (n, 1) each."""
    angle = (math.pi / 4) * z.unsqueeze(-1)
    return torch.sin(angle), torch.cos(angle)


def key_summary(key_features, values, key_z=None):
    """Key-side sums of Eq. (12), with the normaliser as an extra value column.

    key_features (h, n, m), values (h, n, v), key_z (n,) or None (no mask: Eq. 6)
    -> (h, 2m, v + 1) with the mask, (h, m, v + 1) without.
    """
    values_and_ones = torch.cat([values, values.new_ones(values.shape[:-1] + (1,))], dim=-1)
    if key_z is not None:
        sin_k, cos_k = degree_mask_gates(key_z)
        # One matmul serves both branches: [phi cos | phi sin]^T [V | 1].
        key_features = torch.cat([key_features * cos_k, key_features * sin_k], dim=-1)
    return key_features.transpose(-2, -1) @ values_and_ones


def query_readout(query_features, summary, query_z=None, eps=1e-12):
    """Eq. (12) for the queries: query_features (h, b, m), summary from :func:`key_summary`,
    query_z (b,) or None -> (h, b, v)."""
    if query_z is not None:
        sin_q, cos_q = degree_mask_gates(query_z)
        query_features = torch.cat([query_features * sin_q, query_features * cos_q], dim=-1)
    weighted = query_features @ summary
    return weighted[..., :-1] / weighted[..., -1:].clamp_min(eps)


def masked_kernel_attention(query_features, key_features, values, query_z=None, key_z=None):
    """Eq. (8) with the sin degree mask of Eq. (10), computed as Eq. (12) in O(n m v)."""
    return query_readout(query_features, key_summary(key_features, values, key_z), query_z)


def adjacency_kernel_attention(query_features, key_features, values, query_index, key_index, eps=1e-12):
    """Eq. (8) with a sparse 0/1 mask given as edges ``query_index[e] -> key_index[e]``: O(|E| m).

    query_features (h, b, m) indexed by query_index in [0, b), key_features (h, n, m),
    values (h, n, v) -> (h, b, v). A query with no edge gets a zero output.
    """
    weights = (query_features[:, query_index] * key_features[:, key_index]).sum(-1)  # (h, E)
    heads, n_queries, value_size = query_features.shape[0], query_features.shape[1], values.shape[-1]
    numerator = values.new_zeros(heads, n_queries, value_size)
    numerator.index_add_(1, query_index, weights.unsqueeze(-1) * values[:, key_index])
    denominator = values.new_zeros(heads, n_queries).index_add_(1, query_index, weights)
    return numerator / denominator.clamp_min(eps).unsqueeze(-1)
