"""MGFormer: Masked Graph Transformer (Chen et al., SIGIR 2024), section 3.2.

Every user and item is a token ``x = [e, p]`` (Eq. 2-4): a learned embedding joined with a fixed
SVD structural encoding. One layer of masked kernel attention (Eq. 5-12) mixes all ``n`` nodes in
linear time, and the DirectAU loss (Eq. 13) trains it. Shapes: ``n`` nodes, ``b`` batch nodes,
``d`` embedding size, ``w`` token width (2d with structural encodings), ``h`` heads, ``m`` features.
"""

import numpy as np
import torch
import torch.nn as nn
from recbole.model.abstract_recommender import GeneralRecommender
from recbole.model.init import xavier_normal_initialization
from recbole.utils import InputType

from recbole_mgformer.model.abstract_recommender import CachedRepresentations, SharedSparseBuffers
from recbole_mgformer.model.attention import adjacency_kernel_attention, masked_kernel_attention, query_readout
from recbole_mgformer.model.attention_options import AttentionBlock, AttentionOptions, set_query_temperature
from recbole_mgformer.model.compilation import CompiledOrEager
from recbole_mgformer.model.feature_maps import FEATURE_MAPS, RANDOM_FEATURE_MAPS, apply_feature_map, draw_projection
from recbole_mgformer.model.filter_residual import FILTER_RESIDUAL_OPTIONS, matched_residual, residual_filter
from recbole_mgformer.model.graph import edges_leaving, graph_with_self_loops, lightgcn_propagate, normalized_adjacency
from recbole_mgformer.model.key_summary import EAGER, ChunkFunctions, chunked_key_summary, eager_region_key_summary
from recbole_mgformer.model.loss import directau_loss_of_pairs
from recbole_mgformer.model.options import choice, non_negative_int, positive_float, positive_int
from recbole_mgformer.model.precision import PRECISIONS, matmul, resolve_precision
from recbole_mgformer.model.sizing import block_size, uniformity_block_rows
from recbole_mgformer.model.structural import (
    SVD_SOLVERS,
    degree_buckets,
    n_degree_buckets,
    svd_structural_encodings,
)


class MaskedAttentionLayer(nn.Module):
    """One layer of masked kernel attention: ``Q = X W_Q``, ``K = X W_K``, ``V = X`` (Eq. 5)."""

    def __init__(self, width, n_heads, feature_map, n_features, focusing_factor, residual,
                 attention_weight, layer_norm, qk_init, generator, compile=False, matmul_dtype=torch.float32,
                 key_chunk_size=0, keep_key_features=False):
        super().__init__()
        if width % n_heads:
            raise ValueError(f"MGFormer: n_heads={n_heads} must divide the token width {width}")
        self.n_heads, self.head_size = n_heads, width // n_heads
        self.feature_map, self.focusing_factor = feature_map, focusing_factor
        self.n_features = n_features or self.head_size
        self.residual, self.attention_weight = residual, attention_weight
        self.query = nn.Linear(width, width, bias=False)
        self.key = nn.Linear(width, width, bias=False)
        self.norm = nn.LayerNorm(width) if layer_norm else nn.Identity()
        self.qk_init = qk_init
        self.register_buffer("projection", torch.empty(n_heads, self.n_features, self.head_size))
        self.redraw_features(generator)
        self.matmul_dtype = matmul_dtype
        # The fused key side (model/key_summary.py) serves the random feature maps; 0 keeps the autograd form.
        self.key_chunk_size = key_chunk_size if feature_map in RANDOM_FEATURE_MAPS else 0
        if compile or keep_key_features:
            self.chunk_functions = ChunkFunctions(compile=compile, keep=keep_key_features)
        else:
            self.chunk_functions = EAGER
        # dynamic=True: the batch and key-sample sizes vary, one graph serves them all.
        self.mix = CompiledOrEager(self._mix, "MGFormer attention", dynamic=True) if compile else self._mix
        # compiled, the adjacency mask's per-edge products are fused into their sums instead of materialising
        # (edges, m) and (edges, w) tensors: a faster Beauty step (the figure: results/performance/performance.md)
        self.mix_edges = (CompiledOrEager(self._mix_edges, "MGFormer adjacency attention", dynamic=True) if compile
                          else self._mix_edges)

    def reset_qk(self):
        """``identity`` starts the attention as a kernel on token similarity ``x_i^T x_j``."""
        for linear in (self.query, self.key):
            if self.qk_init == "identity":
                nn.init.eye_(linear.weight)
            else:
                nn.init.xavier_normal_(linear.weight)

    def redraw_features(self, generator):
        if self.feature_map in RANDOM_FEATURE_MAPS:
            draws = [draw_projection(self.feature_map, self.n_features, self.head_size, generator)
                     for _ in range(self.n_heads)]
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
            summary = key_summary(key_learned, key_fixed, self.key.weight, self.projection, key_z, self.matmul_dtype,
                                  self.key_chunk_size, self.chunk_functions)
            mixed = query_readout(phi_q, summary, query_z)
        else:
            x_key = key_learned if key_fixed is None else torch.cat([key_learned, key_fixed], dim=1)
            phi_k = self.features(self.split_heads(matmul(x_key, self.key.weight.T, self.matmul_dtype)),
                                  is_query=False)
            mixed = masked_kernel_attention(phi_q, phi_k, self.split_heads(x_key), query_z, key_z)
        return self._combine(x_query, mixed)

    def _combine(self, x_query, mixed):  # mixed (h, b, w/h) -> (b, w)
        mixed = mixed.transpose(0, 1).reshape(x_query.shape)
        out = x_query + self.attention_weight * mixed if self.residual else mixed
        return self.norm(out)


# From this many nodes on, ``compile: auto`` compiles: the key side's elementwise work over all n nodes then
# outweighs compilation's one-off cost (about 30 s per process) within a few epochs (Beauty, 34k nodes: 4 s an
# epoch saved); on smaller graphs the step is the loss's, and compiling would only add the wait.
COMPILE_MIN_NODES = 10_000


def compile_choice(value, n_nodes):
    """The ``compile`` option: True, False, or ``auto`` (True from ``COMPILE_MIN_NODES`` nodes on)."""
    if not (isinstance(value, bool) or value == "auto"):
        raise ValueError(f"MGFormer: unknown compile {value!r}; choose one of False, True, auto "
                         f"(set it in a config file or with --compile=...)")
    return n_nodes >= COMPILE_MIN_NODES if value == "auto" else value


# ``key_chunk_size: auto`` on a CPU: 2048 rows, whose (h, r, g m) temporaries a core's L2 or L3 cache holds
# (results/performance/step_time-amazon-beauty.md); on a GPU one chunk while it fits (model/sizing.py).
CPU_KEY_CHUNK_SIZE = 2048


def chunk_bytes_per_row(width, features_width, sin_mask):
    """Memory of one key row of a chunk, forward and backward together, in fp32 (for ``key_chunk_size: auto``):
    tokens and keys (w each), features and their gradients (h m each), the gated features and their gradients
    (g h m each, g = 2 with the sin mask); twice that as headroom for the allocator."""
    branches = 2 if sin_mask else 1
    return 2 * 4 * (3 * width + (2 + 2 * branches) * features_width)


# ``key_features: auto`` keeps the fused key side's keys and features for backward while all layers' take at most
# this much memory: keeping spares backward two matmuls and the exponentials per chunk (the key side's forward and
# backward 17-20% faster, fp32, one thread, Beauty) and costs 35 MB there; at 10^6 nodes (1 GB) backward
# recomputes them instead.
KEEP_KEY_FEATURES_MAX_BYTES = 512 * 2**20


def key_features_kept(value, kept_bytes):
    """The ``key_features`` option (recompute, keep, or ``auto``: keep up to ``KEEP_KEY_FEATURES_MAX_BYTES``)
    -> True to keep them."""
    return kept_bytes <= KEEP_KEY_FEATURES_MAX_BYTES if value == "auto" else value == "keep"


class MGFormer(SharedSparseBuffers, CachedRepresentations, GeneralRecommender):
    r"""Masked Graph Transformer trained with the DirectAU loss; see ``properties/model/MGFormer.yaml``."""

    input_type = InputType.POINTWISE
    # Options that act only inside the attention layers: with ``attention: False`` none changes the model, so the
    # control of a variant (what its attention adds: the leaderboards' "Attention:" lines) drops them. Not
    # ``precision``: the DirectAU loss's Gram matrices run in it too.
    ATTENTION_OPTIONS = frozenset({
        "n_layers", "n_heads", "feature_map", "n_features", "feature_redraw_interval", "focusing_factor",
        "degree_mask", "degree_embedding_size", "max_exact_degree", "residual", "attention_weight", "layer_norm",
        "qk_init", "key_sample_size", "attention_temperature", "learn_temperature", "value_projection",
        "degree_gate", "residual_scale", "compile", "key_chunk_size", "key_features"})
    # Options that act only on the scores after training (the filter residual, model/filter_residual.py): a run
    # with them trains as the same entry without them, so the benchmark gives it that entry's tuned settings.
    SCORING_OPTIONS = FILTER_RESIDUAL_OPTIONS
    # Its step has static shapes and decides nothing on the host but the redraw clock, which before_step() keeps
    # (recbole_mgformer/cuda_graph.py); cuda_graph_blocker() names the options that break this.
    CUDA_GRAPH_SAFE = True
    step_hook = False  # True while a trainer calls before_step() before every training step

    def __init__(self, config, dataset):
        super().__init__(config, dataset)
        self.embedding_size = positive_int(config, "embedding_size", "MGFormer")
        self.structural_encoding = choice(config, "structural_encoding", ("svd", "none"), "MGFormer")
        svd_solver = choice(config, "svd_solver", SVD_SOLVERS, "MGFormer")
        self.use_attention = choice(config, "attention", (True, False), "MGFormer")
        self.degree_mask = choice(config, "degree_mask", ("sin", "none", "adjacency"), "MGFormer")
        feature_map = choice(config, "feature_map", FEATURE_MAPS, "MGFormer")
        self.score = choice(config, "score", ("dot", "cosine"), "MGFormer")
        qk_init = choice(config, "qk_init", ("xavier", "identity"), "MGFormer")
        n_layers = positive_int(config, "n_layers", "MGFormer")
        n_heads = positive_int(config, "n_heads", "MGFormer")
        n_features = positive_int(config, "n_features", "MGFormer", optional=True)
        self.uniformity_weight = float(config["uniformity_weight"])
        self.feature_redraw_interval = int(config["feature_redraw_interval"] or 0)
        self.key_sample_size = non_negative_int(config, "key_sample_size", "MGFormer")
        if self.key_sample_size and self.degree_mask == "adjacency":
            raise ValueError("MGFormer: key_sample_size applies to degree_mask sin or none; the adjacency mask is "
                             "already sparse (set key_sample_size: 0)")
        self.seed = int(config["seed"])
        compile_attention = compile_choice(config["compile"], self.n_users + self.n_items)
        self.precision = choice(config, "precision", PRECISIONS, "MGFormer")
        self.matmul_dtype = resolve_precision(self.precision, config["device"])
        key_features = choice(config, "key_features", ("recompute", "keep", "auto"), "MGFormer")
        options = AttentionOptions(config, feature_map, RANDOM_FEATURE_MAPS)  # beyond the paper (issue 25)
        self.token_propagation = options.token_propagation

        # Training interactions only: the dataset handed to a model is the training split.
        interactions = dataset.inter_matrix(form="csr").astype(np.float32)
        self.n_nodes = self.n_users + self.n_items
        self.user_embedding = nn.Embedding(self.n_users, self.embedding_size)
        self.item_embedding = nn.Embedding(self.n_items, self.embedding_size)
        width = self.embedding_size
        if self.structural_encoding == "svd":
            # q, the SVD rank: Eq. (3) has q = d; q < d is the PureSVD recommender's own knob on dense data.
            rank = positive_int(config, "structural_size", "MGFormer", optional=True) or self.embedding_size
            users_p, items_p = svd_structural_encodings(interactions, rank, self.seed, svd_solver)
            scale = positive_float(config, "structural_scale", "MGFormer")
            self.register_buffer("structural", scale * torch.from_numpy(np.concatenate([users_p, items_p])))
            width += rank
        self.width = width
        if self.token_propagation:
            self._set_up_propagation(interactions)

        degrees = np.concatenate([interactions.getnnz(axis=1), interactions.getnnz(axis=0)])
        max_exact_degree = positive_int(config, "max_exact_degree", "MGFormer")
        self.register_buffer("degree_bucket", torch.from_numpy(degree_buckets(degrees, max_exact_degree)))
        self.degree_embedding = nn.Embedding(
            n_degree_buckets(int(degrees.max(initial=0)), max_exact_degree),
            positive_int(config, "degree_embedding_size", "MGFormer"),
        )
        self.degree_projection = nn.Linear(self.degree_embedding.embedding_dim, 1)
        if self.degree_mask == "adjacency":
            row_pointers, columns = graph_with_self_loops(interactions)
            # rebuilt from the data, not saved
            self.register_buffer("edge_row_pointers", row_pointers, persistent=False)
            self.register_buffer("edge_columns", columns, persistent=False)

        # keys (n, w) and features (n, h m) of every layer, in fp32
        features_width = n_heads * (n_features or width // n_heads)
        # all n keys: evaluation attends to every node, with or without a training key sample
        key_chunk_size = block_size(config, "key_chunk_size", "MGFormer", self.n_nodes,
                                    chunk_bytes_per_row(width, features_width, self.degree_mask == "sin"),
                                    CPU_KEY_CHUNK_SIZE, zero_means="the unfused autograd form")
        self.uniformity_block_rows = uniformity_block_rows(config, "MGFormer")
        keep_features = key_features_kept(key_features, 4 * n_layers * self.n_nodes * (width + features_width))
        self.generator = torch.Generator().manual_seed(self.seed)
        plain = not options.needs_block  # else an AttentionBlock adds the residual and the norm around each layer
        self.layers = nn.ModuleList(
            MaskedAttentionLayer(width, n_heads, feature_map, n_features, float(config["focusing_factor"]),
                                 bool(config["residual"]) and plain, float(config["attention_weight"]),
                                 bool(config["layer_norm"]) and plain, qk_init, self.generator, compile_attention,
                                 self.matmul_dtype, key_chunk_size, keep_features)
            for _ in range(n_layers)
        )
        if options.needs_block:
            log_degree = torch.log1p(torch.from_numpy(degrees).float()) if options.degree_gate else None
            self.layers = nn.ModuleList(
                AttentionBlock(layer, width, n_heads, options.residual, float(config["attention_weight"]),
                               options.residual_scale, options.value_projection, log_degree, bool(config["layer_norm"]))
                for layer in self.layers)
        self.register_buffer("feature_draws", torch.zeros((), dtype=torch.long))
        self.training_steps = 0
        self.key_generator = torch.Generator().manual_seed(self.seed)

        self.other_parameter_name = ["restore_user_e", "restore_item_e", "training_steps"]  # steps: the redraw clock
        self.apply(xavier_normal_initialization)
        for layer in self.layers:
            attention = layer.attention if options.needs_block else layer
            attention.reset_qk()
            if options.has_temperature:
                set_query_temperature(attention, options.temperature, options.learn_temperature)
        # beyond the papers (issue 55): fitted last, it draws nothing from torch's generators, so the embeddings and
        # the training are those of the same model without it
        self.residual_filter, self.filter_residual_weight = residual_filter(config, dataset)

    def _set_up_propagation(self, interactions):
        """``token_propagation: K``: the normalised training graph, and the propagation of the fixed ``P``, once."""
        self.register_buffer("adjacency", normalized_adjacency(interactions), persistent=False)  # from the data
        if self.structural_encoding == "svd":
            propagated = lightgcn_propagate(self.adjacency, self.structural, self.token_propagation)
            self.register_buffer("propagated_structural", propagated, persistent=False)

    def propagated_token_parts(self):
        """``token_propagation: K``: LightGCN's mean of layers ``0..K`` of ``A_hat E`` (learned) and of ``A_hat P``
        (fixed, cached), (n, d) each; P's part is None without structural encodings."""
        embeddings = torch.cat([self.user_embedding.weight, self.item_embedding.weight])
        learned = lightgcn_propagate(self.adjacency, embeddings, self.token_propagation)
        return learned, (self.propagated_structural if self.structural_encoding == "svd" else None)

    def token_parts(self):
        """The two parts of Eq. (4): learned embeddings ``E`` (n, d) and structural encodings ``P`` (n, d) or None."""
        if self.token_propagation:
            return self.propagated_token_parts()
        embeddings = torch.cat([self.user_embedding.weight, self.item_embedding.weight])
        return embeddings, (self.structural if self.structural_encoding == "svd" else None)

    def node_tokens(self, nodes=None):
        """Eq. (4): ``X = [E, P]``, (n, w), or its rows ``nodes`` (b,), gathered without building all n rows
        (propagated tokens need all n)."""
        if self.token_propagation:
            learned, fixed = self.token_parts()
            tokens = learned if fixed is None else torch.cat([learned, fixed], dim=1)
            return tokens if nodes is None else tokens[nodes]
        if nodes is None:
            learned, fixed = self.token_parts()
        else:
            is_item = (nodes >= self.n_users).unsqueeze(-1)
            user_rows = self.user_embedding(nodes.clamp(max=self.n_users - 1))
            item_rows = self.item_embedding((nodes - self.n_users).clamp(min=0))
            learned = torch.where(is_item, item_rows, user_rows)
            fixed = None if self.structural_encoding == "none" else self.structural[nodes]
        return learned if fixed is None else torch.cat([learned, fixed], dim=1)

    def degree_centrality(self):
        """Eq. (10): ``z = sigmoid(proj(embedding(deg)))`` in (0, 1), (n,)."""
        return torch.sigmoid(self.degree_projection(self.degree_embedding(self.degree_bucket))).squeeze(-1)

    def forward(self, query_nodes=None, key_nodes=None):
        """Outputs for ``query_nodes`` (b,) (all n nodes when None), attending to ``key_nodes`` (s,)
        (all n nodes when None, as in Eq. 12)."""
        if not self.use_attention:
            return self.node_tokens(query_nodes)
        learned, fixed = self.token_parts()
        z = self.degree_centrality() if self.degree_mask == "sin" else None
        edges = (self.edge_row_pointers, self.edge_columns) if self.degree_mask == "adjacency" else None
        for depth, layer in enumerate(self.layers):
            last = depth == len(self.layers) - 1
            learned, fixed = layer(learned, fixed, z, query_nodes if last else None, edges, key_nodes), None
        return learned

    def sample_keys(self):
        """``key_sample_size`` distinct nodes drawn uniformly for one training step, or None for all.

        Eq. (12) sums over all n keys; a uniform sample estimates both of its sums with the same scale,
        which cancels in the ratio, so a step costs O(s m d) instead of O(n m d). Evaluation always uses all keys.
        """
        if not self.key_sample_size or self.key_sample_size >= self.n_nodes:
            return None
        keys = torch.randperm(self.n_nodes, generator=self.key_generator)[: self.key_sample_size]
        return keys.to(self.user_embedding.weight.device)

    def cuda_graph_blocker(self):
        """Why this configuration's training step cannot be one CUDA graph, or None."""
        if self.key_sample_size and self.key_sample_size < self.n_nodes:
            return ("key_sample_size draws each step's keys on the host, which a graph would freeze; set "
                    "key_sample_size: 0")
        if self.use_attention and self.degree_mask == "adjacency":
            return ("degree_mask: adjacency gathers the edges leaving each batch, a number that changes from batch "
                    "to batch; use degree_mask: sin or none")
        return None

    def before_step(self):
        """The trainer's hook before each training step, outside any CUDA graph: the redraw clock ticks, and a due
        redraw writes the new features into the layers' buffers in place, where a replayed graph reads them."""
        self._maybe_redraw_features()

    def _maybe_redraw_features(self):
        self.training_steps += 1
        if self.feature_redraw_interval and self.training_steps % self.feature_redraw_interval == 0:
            self.feature_draws += 1
            generator = torch.Generator().manual_seed(self.seed + int(self.feature_draws))
            for layer in self.layers:
                layer.redraw_features(generator)

    def calculate_loss(self, interaction):
        self.restore_user_e, self.restore_item_e = None, None
        if not self.step_hook:  # called without the trainer's hook (RecBole's own loop, a benchmark): tick here
            self._maybe_redraw_features()
        users, items = interaction[self.USER_ID], interaction[self.ITEM_ID]
        outputs = self.forward(torch.cat([users, items + self.n_users]), self.sample_keys())
        # (2b, w) -> (2, b, w): users then items, one normalisation and one uniformity call for both
        return directau_loss_of_pairs(outputs.view(2, len(users), -1), self.uniformity_weight, self.matmul_dtype,
                                      self.uniformity_block_rows)

    def _scoring(self, outputs):
        return nn.functional.normalize(outputs, dim=-1) if self.score == "cosine" else outputs

    def predict(self, interaction):
        users, items = interaction[self.USER_ID], interaction[self.ITEM_ID]
        outputs = self._scoring(self.forward(torch.cat([users, items + self.n_users])))
        user_e, item_e = outputs.split([len(users), len(items)])
        scores = (user_e * item_e).sum(dim=-1)
        if self.residual_filter is None:
            return scores
        # the residual standardises over all items: each distinct user's whole row, then the pairs' entries
        unique, row = torch.unique(users, return_inverse=True)
        all_users, all_items = self.representations()
        residual = self._filter_residual(unique, all_users[unique] @ all_items.T)  # (distinct users, items)
        return scores + self.filter_residual_weight * residual[row, items]

    def scoring_representations(self):
        return self._scoring(self.forward()).split([self.n_users, self.n_items])

    def _filter_residual(self, users, model_scores):
        """``filter_residual``'s term of ``users`` (b,) given the model's scores of them, (b, items)."""
        with torch.no_grad():
            filter_scores = self.residual_filter.score_users(users)
        return matched_residual(model_scores, filter_scores)

    def full_sort_predict(self, interaction):
        scores = super().full_sort_predict(interaction)
        if self.residual_filter is None:
            return scores
        users = interaction[self.USER_ID]
        scores = scores.view(len(users), -1)  # (b, items)
        return (scores + self.filter_residual_weight * self._filter_residual(users, scores)).view(-1)
