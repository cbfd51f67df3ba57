"""MGFormer's attention layers: one layer of masked kernel attention (Eq. 5-12) and the stack the model runs.

Shapes: ``n`` nodes, ``b`` batch nodes, ``d`` embedding size, ``w`` token width, ``h`` heads, ``m`` features.
"""

import torch
import torch.nn as nn

from recbole_mgformer.model.graph import edges_leaving
from recbole_mgformer.model.mgformer.attention import adjacency_kernel_attention, masked_kernel_attention, query_readout
from recbole_mgformer.model.mgformer.attention_options import AttentionBlock, set_query_temperature
from recbole_mgformer.model.mgformer.compilation import CompiledOrEager
from recbole_mgformer.model.mgformer.feature_maps import RANDOM_FEATURE_MAPS, apply_feature_map, draw_projection
from recbole_mgformer.model.mgformer.key_summary import (
    EAGER,
    ChunkFunctions,
    chunked_key_summary,
    eager_region_key_summary,
)
from recbole_mgformer.model.precision import matmul


class MaskedAttentionLayer(nn.Module):
    """One layer of masked kernel attention: ``Q = X W_Q``, ``K = X W_K``, ``V = X`` (Eq. 5), over tokens ``width``
    wide split into ``n_heads`` heads. ``residual`` and ``layer_norm``: ``norm(x + attention_weight * Attn(X))``
    (else ``Attn(X)`` alone, for an :class:`AttentionBlock` to wrap); the rest as in ``MGFormerOptions``.
    ``generator`` draws the random features."""

    def __init__(
        self,
        *,
        width,
        n_heads,
        feature_map,
        n_features,
        focusing_factor,
        residual,
        attention_weight,
        layer_norm,
        qk_init,
        generator,
        compile=False,
        matmul_dtype=torch.float32,
        key_chunk_size=0,
        keep_key_features=False,
    ):
        super().__init__()  # n_heads divides width: MGFormerOptions checks it
        self.n_heads, self.head_size = n_heads, width // n_heads
        self.feature_map, self.focusing_factor = feature_map, focusing_factor
        self.n_features = n_features or self.head_size
        self.residual, self.attention_weight = residual, attention_weight
        self.query = nn.Linear(width, width, bias=False)
        self.key = nn.Linear(width, width, bias=False)
        self.norm = nn.LayerNorm(width) if layer_norm else nn.Identity()
        self.qk_init = qk_init
        # zeros, not empty: the deterministic maps never draw it, and a checkpoint must not carry stray memory
        self.register_buffer("projection", torch.zeros(n_heads, self.n_features, self.head_size))
        self.redraw_features(generator)
        self.matmul_dtype = matmul_dtype
        # The fused key side (model/mgformer/key_summary.py) serves the random feature maps; 0 keeps the autograd form.
        self.key_chunk_size = key_chunk_size if feature_map in RANDOM_FEATURE_MAPS else 0
        if compile or keep_key_features:
            self.chunk_functions = ChunkFunctions(compile=compile, keep=keep_key_features)
        else:
            self.chunk_functions = EAGER
        # dynamic=True: the batch and key-sample sizes vary, one graph serves them all.
        self.mix = CompiledOrEager(self._mix, "MGFormer attention", dynamic=True) if compile else self._mix
        # compiled, the adjacency mask's per-edge products are fused into their sums instead of materialising
        # (edges, m) and (edges, w) tensors: a faster Beauty step (the figure: results/performance/performance.md)
        self.mix_edges = (
            CompiledOrEager(self._mix_edges, "MGFormer adjacency attention", dynamic=True)
            if compile
            else self._mix_edges
        )

    def reset_qk(self, temperature=None, learn_temperature=False):
        """``W_Q`` and ``W_K`` initialised (``identity`` starts the attention as a kernel on token similarity
        ``x_i^T x_j``), then the query temperature of ``attention_options.QueryTemperature`` where ``temperature``
        is given. Once, at construction (a second temperature would stack on the first)."""
        for linear in (self.query, self.key):
            if self.qk_init == "identity":
                nn.init.eye_(linear.weight)
            else:
                nn.init.xavier_normal_(linear.weight)
        if temperature is not None:
            set_query_temperature(self, temperature, learn_temperature)

    def redraw_features(self, generator):
        if self.feature_map in RANDOM_FEATURE_MAPS:
            draws = [
                draw_projection(self.feature_map, self.n_features, self.head_size, generator)
                for _ in range(self.n_heads)
            ]
            self.projection.copy_(torch.stack(draws))

    def split_heads(self, x):  # (b, w) -> (h, b, w/h)
        return x.view(x.shape[0], self.n_heads, self.head_size).transpose(0, 1)

    def features(self, x, is_query):
        return apply_feature_map(self.feature_map, x, self.projection, is_query, self.focusing_factor)

    def forward(self, learned, fixed=None, z=None, query_index=None, edges=None, key_index=None):
        """Tokens ``x = [learned, fixed]``: learned (n, d) columns that train, fixed (n, d') or None (the structural
        encodings, which get no gradient); z (n,) degree centralities or None; query_index (b,) or None for all
        nodes; edges (row_pointers, columns): the adjacency mask in CSR form; key_index (s,) keys to attend to, or
        None for all n. Returns (b, w)."""

        def tokens(index=None):
            rows = learned if index is None else learned[index]
            return rows if fixed is None else torch.cat([rows, fixed if index is None else fixed[index]], dim=1)

        x_query = tokens(query_index)
        if edges is not None:
            # Only the edges leaving the queries: a training step costs O(batch edges m), not O(E m).
            x = tokens()
            queries = torch.arange(len(x), device=x.device) if query_index is None else query_index
            return self.mix_edges(x_query, x, *edges_leaving(*edges, queries))
        query_z = z if z is None or query_index is None else z[query_index]
        if key_index is not None:
            learned, fixed = learned[key_index], None if fixed is None else fixed[key_index]
            z = None if z is None else z[key_index]
        return self.mix(x_query, learned, fixed, query_z, z)

    def _mix_edges(self, x_query, x, positions, neighbours):
        """Eq. (8) under the adjacency mask: x_query (b, w), x (n, w), the edges ``positions[e] -> neighbours[e]``
        leaving the queries -> (b, w)."""
        phi_q = self.features(self.split_heads(self.query(x_query)), is_query=True)
        phi_k = self.features(self.split_heads(self.key(x)), is_query=False)
        mixed = adjacency_kernel_attention(phi_q, phi_k, self.split_heads(x), positions, neighbours)
        return self._combine(x_query, mixed)

    def _mix(self, x_query, key_learned, key_fixed, query_z, key_z):
        """Eq. (5)-(12) for the sin mask (or none): x_query (b, w), keys' token columns (s, d) and (s, d') or None,
        z's (b,), (s,) or None -> (b, w)."""
        phi_q = self.features(self.split_heads(matmul(x_query, self.query.weight.T, self.matmul_dtype)), is_query=True)
        if self.key_chunk_size:
            key_summary = eager_region_key_summary if self.chunk_functions.compiled else chunked_key_summary
            summary = key_summary(
                key_learned,
                key_fixed,
                self.key.weight,
                self.projection,
                key_z,
                self.matmul_dtype,
                self.key_chunk_size,
                self.chunk_functions,
            )
            mixed = query_readout(phi_q, summary, query_z)
        else:
            x_key = key_learned if key_fixed is None else torch.cat([key_learned, key_fixed], dim=1)
            phi_k = self.features(self.split_heads(matmul(x_key, self.key.weight.T, self.matmul_dtype)), is_query=False)
            mixed = masked_kernel_attention(phi_q, phi_k, self.split_heads(x_key), query_z, key_z)
        return self._combine(x_query, mixed)

    def _combine(self, x_query, mixed):  # mixed (h, b, w/h) -> (b, w)
        mixed = mixed.transpose(0, 1).reshape(x_query.shape)
        out = x_query + self.attention_weight * mixed if self.residual else mixed
        return self.norm(out)


def attention_layers(options, *, generator, log_degree=None):
    """``options.n_layers`` attention layers (``MGFormerOptions``), their random features drawn from ``generator``.

    With a value projection, a degree gate or a learned residual scale (``options.needs_block``), each layer is an
    :class:`AttentionBlock` around a bare layer (no residual, no norm: the block adds both); ``log_degree`` (n,)
    ``log(1 + deg)`` feeds the degree gate. The layers draw from torch's generator and ``generator`` in order,
    layer after layer; a block draws nothing."""
    block = options.needs_block

    def layer():
        attention = MaskedAttentionLayer(
            width=options.width,
            n_heads=options.n_heads,
            feature_map=options.feature_map,
            n_features=options.n_features,
            focusing_factor=options.focusing_factor,
            residual=options.residual and not block,
            attention_weight=options.attention_weight,
            layer_norm=options.layer_norm and not block,
            qk_init=options.qk_init,
            generator=generator,
            compile=options.compile,
            matmul_dtype=options.matmul_dtype,
            key_chunk_size=options.key_chunk_size,
            keep_key_features=options.keep_key_features,
        )
        if not block:
            return attention
        return AttentionBlock(
            attention,
            options.width,
            options.n_heads,
            residual=options.residual,
            attention_weight=options.attention_weight,
            residual_scale=options.residual_scale,
            value_projection=options.value_projection,
            log_degree=log_degree if options.degree_gate else None,
            layer_norm=options.layer_norm,
        )

    return nn.ModuleList(layer() for _ in range(options.n_layers))
