"""EA-GPS: External Attentive Graph convolution with Positional prompts for Sequential recommendation
(Zhang, Li and Zhao, TOIS 2024), following the paper's equations rather than the authors' code.

Three stages (section 3.2):

1. Graph (Eq. 2, 4): items and users are nodes; user-item edges both ways and one-way edges from each item
   to the next item of a training sequence; ``A_hat = D^-1/2 (M + I) D^-1/2``.
2. Encoder (Eq. 3, 13-18): ``eta`` propagation steps over ``A_hat``; at each step the item rows also go
   through external attention against two memories shared by all steps, fused by
   ``LayerNorm(E + delta * Z)``; the output is the mean of steps ``0..eta``.
3. Decoder (Eq. 19-27): each position's prompt embedding (1x1 convolution) is joined with its item's
   embedding, projected with a ReLU, a fraction of the positions is replaced by a learned mask token
   (training only), a soft attention against the last position pools the sequence, the user embedding is
   appended and a linear layer scores every item; cross-entropy trains it (Eq. 28).

Shapes: ``m`` items (RecBole's padding item 0 included), ``n`` users, ``N = m + n`` nodes (items first, as
in Eq. 2), ``d`` embedding size, ``alpha`` memory slots, ``h`` heads, ``B`` batch, ``L`` max sequence length.

The stages' pieces live in ``model/eagps/`` (``graph``, ``external``, ``decoder``); this file holds the model.

The training step computes the same function as the straightforward form (``experiments/eagps_reference.py``,
held equal by ``tests/model/sequential_recommender/test_eagps_step.py``) with less work: the external attention with the
l2 norm in its collapsed form (two (d/h, d/h) matrices a head in place of the (m, h, alpha) scores, the same function:
:func:`recbole_mgformer.model.eagps.external.collapsed_l2_external_attention`), otherwise its heads as one
block-diagonal matmul with a written-out l2 backward; Eq. 20 only at the real, unmasked positions
(packed), with its item half multiplied once per item rather than per position; masked positions summed per
sequence; dropout from uniform draws (:mod:`recbole_mgformer.model.dropout`, the same distribution); the mask from
one sort; the full-item cross-entropy a cached block of rows at a time
(:func:`recbole_mgformer.model.loss.linear_cross_entropy`).

``train_protocol: sequence`` (:mod:`recbole_mgformer.data.sequence_windows`) trains on whole windows, with the loss
of Eq. 28 at every position: Eq. 21-24 for every prefix of a window at once (each prefix its own mask draw and its
last position as the query: ``prefix_masks``, ``causal_soft_attention`` in ``eagps/decoder.py``), the graph encoder
once a step as before. A protocol, off by default (``prefix``, RecBole's), its accuracy compared with RecBole's
protocol on the sequential page. ``precision: bf16`` rounds the inputs of the training loss's output-layer matmuls
and runs the external attention (Eq. 13-14) in bf16 in training where it forms the scores (not the collapsed form).
"""

import numpy as np
import torch
import torch.nn as nn
from recbole.model.abstract_recommender import SequentialRecommender
from recbole.model.init import xavier_normal_initialization
from recbole.utils import InputType

from recbole_mgformer.model.abstract_recommender import ModelContract, SharedSparseBuffers
from recbole_mgformer.model.dropout import dropout
from recbole_mgformer.model.eagps.decoder import (
    causal_plain_pool,
    causal_soft_attention,
    fuse,
    kept_positions,
    packed_soft_attention,
    plain_pool,
    prefix_masks,
    sequential_mask,
    template_inputs,
)
from recbole_mgformer.model.eagps.external import ExternalEncoder
from recbole_mgformer.model.eagps.graph import (
    external_attentive_propagation,
    sequential_adjacency,
    training_transitions,
)
from recbole_mgformer.model.graph import to_torch_csr
from recbole_mgformer.model.loss import linear_cross_entropy
from recbole_mgformer.model.options import choice, non_negative_float, positive_int
from recbole_mgformer.model.recbole_sequential import (
    TRAIN_PROTOCOLS,
    encoder_precision,
    next_item_targets,
    trained_positions,
    whole_sequence_stride,
)

EA_NORMS = ("l2", "softmax")
EXTERNAL_NORMS = ("node", "token")
ITEM_WEIGHTINGS = ("once", "occurrences")
FUSION_NORMS = ("none", "layer", "l2")
DECODERS = ("prompt", "max_pool", "mean_pool")


class EAGPS(ModelContract, SharedSparseBuffers, SequentialRecommender):
    r"""EA-GPS; see ``properties/model/EAGPS.yaml`` for its options and the readings of ambiguous points."""

    input_type = InputType.POINTWISE
    TRAIN_PROTOCOLS = TRAIN_PROTOCOLS
    external_encoder = ExternalEncoder  # Eq. 13-17's module (experiments/eagps_reference.py swaps in its own)

    def __init__(self, config, dataset):
        super().__init__(config, dataset)
        name = "EAGPS"
        self.embedding_size = positive_int(config, "embedding_size", name)
        self.n_layers = positive_int(config, "n_layers", name)
        self.memory_size = positive_int(config, "memory_size", name)
        self.n_heads = positive_int(config, "n_heads", name)
        self.ea_norm = choice(config, "ea_norm", EA_NORMS, name)
        self.delta = non_negative_float(config, "delta", name)
        self.prompt_size = positive_int(config, "prompt_size", name)
        self.mask_ratio = non_negative_float(config, "mask_ratio", name)
        self.dropout_prob = non_negative_float(config, "dropout_prob", name)
        self.external_norm = choice(config, "external_norm", EXTERNAL_NORMS, name)
        self.item_weighting = choice(config, "item_weighting", ITEM_WEIGHTINGS, name)
        self.fusion_norm = choice(config, "fusion_norm", FUSION_NORMS, name)
        self.use_external = choice(config, "external_attention", (True, False), name)
        self.decoder = choice(config, "decoder", DECODERS, name)
        if self.embedding_size % self.n_heads:
            raise ValueError(f"{name}: n_heads={self.n_heads} must divide embedding_size={self.embedding_size}")
        if self.mask_ratio > 1 or self.dropout_prob >= 1:
            raise ValueError(
                f"{name}: mask_ratio must be in [0, 1] and dropout_prob in [0, 1), "
                f"got {self.mask_ratio} and {self.dropout_prob}"
            )
        negatives = config["train_neg_sample_args"]
        if negatives and negatives.get("distribution", "none") != "none":
            raise ValueError(
                f"{name}: the cross-entropy over all items (Eq. 28) takes no sampled negatives; "
                "set train_neg_sample_args: ~"
            )
        self.window_stride = whole_sequence_stride(config, name)  # None: RecBole's prefix rows
        # the training loss's output-layer matmuls (Eq. 27-28), the largest of its step; scoring stays fp32
        self.matmul_dtype = encoder_precision(config["precision"], config["device"], name)
        self.n_users = dataset.user_num

        adjacency = sequential_adjacency(
            dataset.inter_matrix(form="coo"),
            training_transitions(dataset, self.ITEM_SEQ, self.ITEM_SEQ_LEN, self.ITEM_ID),
            self.n_items,
            self.n_users,
        )
        # rebuilt from the data, never saved
        self.register_buffer("adjacency", to_torch_csr(adjacency), persistent=False)
        self.register_buffer("adjacency_t", to_torch_csr(adjacency.T), persistent=False)

        d = self.embedding_size
        self.item_embedding = nn.Embedding(self.n_items, d)
        self.user_embedding = nn.Embedding(self.n_users, d)
        item_weights = None
        if self.item_weighting == "occurrences":  # Eq. 16: one term per training sequence holding the item
            user_item = dataset.inter_matrix(form="csr").astype(bool)
            item_weights = torch.from_numpy(np.asarray(user_item.sum(axis=0), dtype=np.float32).reshape(-1, 1))
        self.external = self.external_encoder(
            d, self.memory_size, self.n_heads, self.ea_norm, self.delta, self.external_norm, item_weights
        )
        self.external.attention_dtype = self.matmul_dtype  # Eq. 13-14 in training, as the output layer's matmuls
        self.position_prompt = nn.Embedding(self.max_seq_length, self.prompt_size)  # Ê_P, one row per position
        self.prompt_conv = nn.Conv1d(self.prompt_size, d, kernel_size=1)  # Eq. 19: W_c, b_c
        self.template = nn.Linear(2 * d, d)  # Eq. 20: W_2, b_2
        self.mask_token = nn.Parameter(torch.empty(d))  # [mask] of Eq. 22
        self.output = nn.Linear(2 * d, self.n_items)  # Eq. 27: W_6, b_6
        self.apply(xavier_normal_initialization)
        nn.init.normal_(self.mask_token, std=d**-0.5)
        self._cached = None

    # Node representations depend on every parameter of the encoder, so they are recomputed for each
    # training batch and computed once per evaluation (dropped whenever the mode changes).
    def train(self, mode=True):
        self._cached = None
        return super().train(mode)

    def encode(self):
        """Eq. 3-18: (items (m, d), users (n, d)) after external attentive propagation."""
        if self.training or self._cached is None:
            encoded = external_attentive_propagation(
                self.adjacency,
                self.adjacency_t,
                self.item_embedding.weight,
                self.user_embedding.weight,
                self.n_layers,
                self.external if self.use_external else None,
            )
            if self.training:
                return encoded
            self._cached = encoded
        return self._cached

    def prompts(self):
        """Eq. 19: (L, d) prompt embeddings of positions 0..L-1 after the 1x1 convolution."""
        return self.prompt_conv(self.position_prompt.weight.T.unsqueeze(0)).squeeze(0).T

    def forward(self, item_seq, item_seq_len, user):
        """Eq. 20-25: (B, L) items, (B,) lengths, (B,) users -> H (B, 2d)."""
        items, users = self.encode()
        if self.decoder != "prompt":  # GPS_OPT ablation
            return fuse(plain_pool(items[item_seq], item_seq_len, self.decoder), users[user], self.fusion_norm)
        length = item_seq.shape[1]
        masked, n_masked = None, None
        if self.training and self.mask_ratio > 0:  # Eq. 21-22: these positions' templates are the mask token
            masked = sequential_mask(item_seq_len, length, self.mask_ratio)  # (B, L)
            n_masked = masked.sum(dim=1)  # (B,)
        rows, kept = kept_positions(item_seq_len, length, masked)  # (R,) flat indices, (B,) counts
        inputs = template_inputs(
            items, self.prompts()[:length], self.template, item_seq.flatten().index_select(0, rows), rows % length
        )
        templates = dropout(torch.relu(inputs), self.dropout_prob, self.training)  # Eq. 20, (R, d)
        pooled = packed_soft_attention(  # Eq. 23-24
            templates, rows // length, kept.cumsum(dim=0) - 1, self.mask_token, n_masked
        )
        return fuse(pooled, users[user], self.fusion_norm)  # Eq. 25

    def forward_every_position(self, item_seq, item_seq_len, user):
        """Eq. 20-25 for every prefix of each window: (B, L) items, (B,) lengths, (B,) users -> the real positions'
        flat indices into (B * L) (N,) and H at each (N, 2d), position ``t``'s that of the prefix of ``t + 1``
        items."""
        items, users = self.encode()
        batch, length = item_seq.shape
        rows, _ = kept_positions(item_seq_len, length)  # (N,)
        if self.decoder != "prompt":  # GPS_OPT ablation
            pooled = causal_plain_pool(items[item_seq], self.decoder)  # (B, L, d)
        else:
            inputs = template_inputs(
                items, self.prompts()[:length], self.template, item_seq.flatten().index_select(0, rows), rows % length
            )
            packed = dropout(torch.relu(inputs), self.dropout_prob, self.training)  # Eq. 20, (N, d)
            templates = packed.new_zeros(batch * length, packed.shape[1]).index_copy(0, rows, packed)
            masked = None
            if self.training and self.mask_ratio > 0:  # Eq. 21-22, one draw per prefix
                masked = prefix_masks(item_seq_len, length, self.mask_ratio)  # (B, L, L)
            pooled = causal_soft_attention(  # Eq. 23-24
                templates.view(batch, length, -1), item_seq_len, self.mask_token, masked
            )
        pooled = pooled.reshape(batch * length, -1).index_select(0, rows)  # (N, d)
        return rows, fuse(pooled, users[user].index_select(0, rows // length), self.fusion_norm)  # Eq. 25

    def _logits(self, interaction):
        return self.output(
            self.forward(interaction[self.ITEM_SEQ], interaction[self.ITEM_SEQ_LEN], interaction[self.USER_ID])
        )  # Eq. 27 (before softmax)

    def calculate_loss(self, interaction):
        """Eq. 28: cross-entropy of the next item over all items, averaged over the batch's prefixes (or, under
        ``train_protocol: sequence``, over every position of the batch's windows)."""
        if self.window_stride is not None:
            item_seq, item_seq_len = interaction[self.ITEM_SEQ], interaction[self.ITEM_SEQ_LEN]
            rows, hidden = self.forward_every_position(item_seq, item_seq_len, interaction[self.USER_ID])
            targets = next_item_targets(item_seq, item_seq_len, interaction[self.POS_ITEM_ID], self.window_stride)
            hidden, targets = trained_positions(hidden, targets.flatten()[rows], self.window_stride, item_seq.size(1))
            return linear_cross_entropy(hidden, self.output.weight, self.output.bias, targets, self.matmul_dtype)
        hidden = self.forward(
            interaction[self.ITEM_SEQ], interaction[self.ITEM_SEQ_LEN], interaction[self.USER_ID]
        )  # (B, 2d)
        return linear_cross_entropy(
            hidden, self.output.weight, self.output.bias, interaction[self.POS_ITEM_ID], self.matmul_dtype
        )

    def predict(self, interaction):
        return self._logits(interaction).gather(1, interaction[self.ITEM_ID].unsqueeze(1)).squeeze(1)

    def full_sort_predict(self, interaction):
        return self._logits(interaction)
