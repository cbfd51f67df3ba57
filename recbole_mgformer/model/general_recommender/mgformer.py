"""MGFormer: Masked Graph Transformer (Chen et al., SIGIR 2024), section 3.2.

Every user and item is a token ``x = [e, p]`` (Eq. 2-4): a learned embedding joined with a fixed
SVD structural encoding. One layer of masked kernel attention (Eq. 5-12) mixes all ``n`` nodes in
linear time, and the DirectAU loss (Eq. 13) trains it. Shapes: ``n`` nodes, ``b`` batch nodes,
``d`` embedding size, ``w`` token width (2d with structural encodings), ``h`` heads, ``m`` features.
"""

from __future__ import annotations

from dataclasses import dataclass
from logging import getLogger

import numpy as np
import torch
import torch.nn as nn
from recbole.model.abstract_recommender import GeneralRecommender
from recbole.model.init import xavier_normal_initialization
from recbole.utils import InputType

from recbole_mgformer.model.abstract_recommender import CachedRepresentations, ModelContract, SharedSparseBuffers
from recbole_mgformer.model.filter_residual import (
    keep_filter_scores,
    matched_residual,
    residual_filter,
    residual_in_training,
    softmax_cross_entropy,
    training_residual,
    user_batches,
)
from recbole_mgformer.model.graph import graph_with_self_loops, lightgcn_propagate, normalized_adjacency
from recbole_mgformer.model.loss import directau_loss_of_pairs, uniformity_of_users_and_items
from recbole_mgformer.model.mgformer.layer import attention_layers
from recbole_mgformer.model.mgformer.option_names import FILTER_RESIDUAL_OPTIONS, TRAINING_LOSS_OPTIONS
from recbole_mgformer.model.mgformer.options import MGFormerOptions
from recbole_mgformer.model.mgformer.structural import degree_buckets, n_degree_buckets, svd_structural_encodings


@dataclass(frozen=True)
class GraphInputs:
    """What MGFormer computes once from the training graph. ``structural``: P (n, q), scaled, or None;
    ``degrees``: (n,) numpy; ``adjacency``: the normalised graph for ``token_propagation`` and
    ``propagated_structural`` its propagation of P, or None; ``edges``: (row pointers, columns) of the graph with
    self-loops for the adjacency mask, or None."""

    structural: torch.Tensor | None
    degrees: np.ndarray
    adjacency: torch.Tensor | None
    propagated_structural: torch.Tensor | None
    edges: tuple | None


def warn_of_zero_encodings(shape, structural_size):
    """A (M, N) matrix has at most min(M, N) singular values: the encodings' columns beyond them are zero (Eq. 3's
    padding), so they widen every token and add nothing."""
    rank_bound = min(shape)
    if structural_size > rank_bound:
        getLogger().warning(
            f"MGFormer: structural_size {structural_size} is above the {rank_bound} singular values the training "
            f"matrix ({shape[0]} users x {shape[1]} items, padding included) can have: its last "
            f"{structural_size - rank_bound} columns of structural encodings are zero; set structural_size "
            f"{rank_bound} or less"
        )


def graph_inputs(interactions, options):
    """The SVD encodings (Eq. 3), the degrees (Eq. 10) and the graphs ``options`` need, from ``interactions``
    (users, items), the training split only. Draws from no torch generator (the SVD's from ``options.seed``)."""
    structural = adjacency = propagated = edges = None
    if options.structural_encoding == "svd":
        warn_of_zero_encodings(interactions.shape, options.structural_size)
        users_p, items_p = svd_structural_encodings(
            interactions, options.structural_size, options.seed, options.svd_solver
        )
        structural = options.structural_scale * torch.from_numpy(np.concatenate([users_p, items_p]))
    if options.token_propagation:
        adjacency = normalized_adjacency(interactions)
        if structural is not None:
            propagated = lightgcn_propagate(adjacency, structural, options.token_propagation)
    if options.degree_mask == "adjacency":
        edges = graph_with_self_loops(interactions)
    degrees = np.concatenate([interactions.getnnz(axis=1), interactions.getnnz(axis=0)])
    return GraphInputs(structural, degrees, adjacency, propagated, edges)


class MGFormer(ModelContract, SharedSparseBuffers, CachedRepresentations, GeneralRecommender):
    r"""Masked Graph Transformer trained with the DirectAU loss; see ``properties/model/MGFormer.yaml``
    (``MGFormerOptions``; the options that act only inside the attention: ``option_names.ATTENTION_OPTIONS``)."""

    input_type = InputType.POINTWISE
    # Options that act only on the scores after training (the filter residual, model/filter_residual.py): a run
    # with them trains as the same entry without them, so the benchmark gives it that entry's tuned settings.
    SCORING_OPTIONS = FILTER_RESIDUAL_OPTIONS

    @classmethod
    def scoring_options_of(cls, overrides):
        """With ``filter_residual_in_training`` the filter options change training: none is scoring-only."""
        return frozenset() if overrides.get("filter_residual_in_training") is True else cls.SCORING_OPTIONS

    @classmethod
    def tuned_as(cls, overrides):
        """A hybrid trained as one model (and its control, ``loss: softmax`` alone) takes its tokens' tuned settings:
        the entry less the filter and training-loss options."""
        left_out = FILTER_RESIDUAL_OPTIONS | TRAINING_LOSS_OPTIONS
        return {key: value for key, value in overrides.items() if key not in left_out}

    # Its step has static shapes and decides nothing on the host but the redraw clock, which before_step() keeps
    # (recbole_mgformer/training/cuda_graph.py); cuda_graph_blocker() names the options that break this.
    CUDA_GRAPH_SAFE = True
    # train_protocol: user batches each user's pairs together, for loss: softmax (data/user_batches.py)
    TRAIN_PROTOCOLS = ("prefix", "user")
    step_hook = False  # True while a trainer calls before_step() before every training step

    def __init__(self, config, dataset):
        super().__init__(config, dataset)
        self.n_nodes = self.n_users + self.n_items
        self.options = options = MGFormerOptions.from_config(config, self.n_nodes)
        # read by the methods below, by experiments/ and by tests
        self.embedding_size, self.structural_encoding, self.width = (
            options.embedding_size,
            options.structural_encoding,
            options.width,
        )
        self.use_attention, self.degree_mask, self.score = options.attention, options.degree_mask, options.score
        self.uniformity_weight, self.uniformity_block_rows = options.uniformity_weight, options.uniformity_block_rows
        self.feature_redraw_interval, self.key_sample_size = options.feature_redraw_interval, options.key_sample_size
        self.seed, self.token_propagation = options.seed, options.token_propagation
        self.precision, self.matmul_dtype = options.precision, options.matmul_dtype

        # Training interactions only: the dataset handed to a model is the training split.
        graph = graph_inputs(dataset.inter_matrix(form="csr").astype(np.float32), options)
        # Modules and buffers in this order: it sets the draws from torch's generator and the state dict's keys.
        self.user_embedding = nn.Embedding(self.n_users, self.embedding_size)
        self.item_embedding = nn.Embedding(self.n_items, self.embedding_size)
        if graph.structural is not None:
            self.register_buffer("structural", graph.structural)
        if graph.adjacency is not None:  # rebuilt from the data, not saved
            self.register_buffer("adjacency", graph.adjacency, persistent=False)
            if graph.propagated_structural is not None:
                self.register_buffer("propagated_structural", graph.propagated_structural, persistent=False)
        self.register_buffer("degree_bucket", torch.from_numpy(degree_buckets(graph.degrees, options.max_exact_degree)))
        self.degree_embedding = nn.Embedding(
            n_degree_buckets(int(graph.degrees.max(initial=0)), options.max_exact_degree), options.degree_embedding_size
        )
        self.degree_projection = nn.Linear(self.degree_embedding.embedding_dim, 1)
        if graph.edges is not None:  # rebuilt from the data, not saved
            self.register_buffer("edge_row_pointers", graph.edges[0], persistent=False)
            self.register_buffer("edge_columns", graph.edges[1], persistent=False)

        self.generator = torch.Generator().manual_seed(self.seed)
        self.layers = attention_layers(
            options, generator=self.generator, log_degree=torch.log1p(torch.from_numpy(graph.degrees).float())
        )
        self.register_buffer("feature_draws", torch.zeros((), dtype=torch.long))
        self.training_steps = 0
        self.key_generator = torch.Generator().manual_seed(self.seed)

        self.other_parameter_name = ["restore_user_e", "restore_item_e", "training_steps"]  # steps: the redraw clock
        self.apply(xavier_normal_initialization)
        # after the xavier pass above, whose draws come first: W_Q and W_K, then each layer's query temperature
        for layer in self.layers:
            layer.reset_qk(options.temperature if options.has_temperature else None, options.learn_temperature)
        # beyond the papers (issue 55): fitted last, it draws nothing from torch's generators, so the embeddings and
        # the training are those of the same model without it
        self.residual_filter, self.filter_residual_weight = residual_filter(config, dataset)
        if self.residual_filter is not None:  # before training_residual, which then fills what it keeps
            self.residual_filter.keep_scores = keep_filter_scores(config, self.residual_filter)
        self.loss, self.softmax_temperature = options.loss, options.softmax_temperature
        self.residual_in_training = residual_in_training(config, options.loss, self.residual_filter)
        self.user_batches = user_batches(config, options.loss)
        if self.residual_in_training:  # derived from the data, not saved; (users, items) fp16
            self.register_buffer("training_residual", training_residual(self.residual_filter), persistent=False)

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
        # Layer 1's tokens are [E, P]: E learned, P fixed (no gradient; the fused key side skips its columns).
        learned, fixed = self.token_parts()
        z = self.degree_centrality() if self.degree_mask == "sin" else None
        edges = (self.edge_row_pointers, self.edge_columns) if self.degree_mask == "adjacency" else None
        for depth, layer in enumerate(self.layers):
            last = depth == len(self.layers) - 1
            outputs = layer(learned, fixed, z, query_nodes if last else None, edges, key_nodes)  # (n or b, w)
            # From layer 2 on, a token is the previous layer's whole output: all of it learned, nothing fixed.
            learned, fixed = outputs, None
        return outputs

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
            return (
                "key_sample_size draws each step's keys on the host, which a graph would freeze; set key_sample_size: 0"
            )
        if self.use_attention and self.degree_mask == "adjacency":
            return (
                "degree_mask: adjacency gathers the edges leaving each batch, a number that changes from batch "
                "to batch; use degree_mask: sin or none"
            )
        if self.user_batches:
            return "train_protocol: user batches users' pairs, a number that changes from batch to batch"
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
        if self.loss == "softmax":
            return self._softmax_loss(users, items)
        outputs = self.forward(torch.cat([users, items + self.n_users]), self.sample_keys())
        # (2b, w) -> (2, b, w): users then items, one normalisation and one uniformity call for both
        return directau_loss_of_pairs(
            outputs.view(2, len(users), -1), self.uniformity_weight, self.matmul_dtype, self.uniformity_block_rows
        )

    def _softmax_loss(self, users, items):
        """``loss: softmax``: each pair's item against every item (all items' outputs each step), the filter's
        residual in the scores with ``filter_residual_in_training`` (model/filter_residual.py). Under
        ``train_protocol: user`` a batch holds all pairs of its users: each user's logits are made once, and the
        users' uniformity term weights each user by its pairs (a user repeated k times would add k(k-1) pairs at
        distance 0; once, it would get a k-th of the uniformity RecBole's random pairs give it)."""
        rows = user_counts = None
        if self.user_batches:  # each distinct user once: its row of every pair, its number of pairs
            users, rows, user_counts = torch.unique(users, return_inverse=True, return_counts=True)
        every_item = torch.arange(self.n_users, self.n_nodes, device=users.device)
        outputs = self.forward(torch.cat([users, every_item]), self.sample_keys())
        user_outputs, item_outputs = outputs.split([len(users), self.n_items])
        residual = self.training_residual[users] if self.residual_in_training else None
        scoring = self.softmax_temperature, residual, self.filter_residual_weight, self.matmul_dtype
        cross_entropy = softmax_cross_entropy(user_outputs, item_outputs, items, *scoring, rows=rows)
        user_counts = None if user_counts is None else user_counts.to(user_outputs.dtype)
        uniformity = uniformity_of_users_and_items(
            user_outputs, item_outputs[items], self.matmul_dtype, self.uniformity_block_rows, user_counts
        )
        return cross_entropy + self.uniformity_weight * uniformity

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
