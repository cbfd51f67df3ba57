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
"""

import math

import numpy as np
import scipy.sparse as sp
import torch
import torch.nn as nn
import torch.nn.functional as F
from recbole.model.abstract_recommender import SequentialRecommender
from recbole.model.init import xavier_normal_initialization
from recbole.utils import InputType

from recbole_mgformer.model.abstract_recommender import SharedSparseBuffers
from recbole_mgformer.model.graph import to_torch_csr
from recbole_mgformer.model.options import choice, non_negative_float, positive_int

EA_NORMS = ("l2", "softmax")
EXTERNAL_NORMS = ("node", "token")
ITEM_WEIGHTINGS = ("once", "occurrences")
FUSION_NORMS = ("none", "layer", "l2")
DECODERS = ("prompt", "max_pool", "mean_pool")


# ---------------------------------------------------------------- graph (Eq. 2-4)


def sequential_adjacency(user_item, transitions, n_items, n_users):
    """``D^-1/2 (M + I) D^-1/2`` (Eq. 2, 4) as a scipy CSR (N, N) float32 matrix, items first then users.

    ``user_item`` is the (n_users, n_items) training matrix: each pair gives ``M[i, u] = M[u, i] = 1``
    (A_U->I and A_I->U). ``transitions`` is a (2, t) array of (previous item, next item) pairs from the
    training sequences: each gives ``M[next, previous] = 1`` (A_I->I; row = receiver, so the next item
    hears from the previous one and not the reverse). Repeated pairs count once. ``D`` is the row sum
    of ``M + I``: the self-loop keeps every degree >= 1.
    """
    binary = sp.coo_matrix(user_item, dtype=np.float32).tocsr()
    binary.sum_duplicates()
    binary.data[:] = 1.0
    previous, following = np.asarray(transitions, dtype=np.int64)
    item_item = sp.csr_matrix(
        (np.ones(len(previous), dtype=np.float32), (following, previous)), shape=(n_items, n_items)
    )
    item_item.sum_duplicates()
    item_item.data[:] = 1.0
    m = sp.bmat([[item_item, binary.T], [binary, None]], format="csr", dtype=np.float32)
    m = m + sp.identity(n_items + n_users, dtype=np.float32, format="csr")
    inverse_sqrt = sp.diags(np.power(np.asarray(m.sum(axis=1)).ravel(), -0.5).astype(np.float32))
    return (inverse_sqrt @ m @ inverse_sqrt).tocsr().astype(np.float32)


class _SparseMatmul(torch.autograd.Function):
    """``A @ x`` with the backward ``A^T @ grad`` from a stored CSR transpose: A_hat is not symmetric (the
    item -> next-item edges run one way), and torch's own sparse backward is several times slower on CPU."""

    @staticmethod
    def forward(ctx, adjacency, adjacency_t, x):
        ctx.adjacency_t = adjacency_t
        return adjacency @ x

    @staticmethod
    def backward(ctx, grad):
        return None, None, ctx.adjacency_t @ grad


def sparse_matmul(adjacency, adjacency_t, x):
    """``adjacency @ x`` (N, d), differentiable in ``x``; ``adjacency_t`` is ``adjacency``'s transpose."""
    return _SparseMatmul.apply(adjacency, adjacency_t, x)


def training_transitions(dataset, item_seq_field, item_seq_len_field, item_field):
    """(2, t) array of (previous, next) item ids in the training sequences of a RecBole SequentialDataset.

    Every augmented training row is ``(prefix, target)``; the prefix's last item precedes the target, so
    the rows together hold each consecutive training pair once (the valid and test targets never appear).
    """
    sequences = dataset.inter_feat[item_seq_field]
    lengths = dataset.inter_feat[item_seq_len_field]
    previous = sequences.gather(1, (lengths - 1).clamp(min=0).unsqueeze(1)).squeeze(1)
    keep = lengths > 0
    return np.vstack([previous[keep].numpy(), dataset.inter_feat[item_field][keep].numpy()])


# ---------------------------------------------------------------- external attention (Eq. 13-15)


def head_scores(x, memory_key, memory_value, n_heads):
    """Per head ``j`` (feature columns ``j*d/h ... (j+1)*d/h``): the scores ``x M_k^T / sqrt(d/h)`` and the
    value memory. x (N, d), memory_key and memory_value (alpha, d) -> scores (h, N, alpha), values (h, alpha, d/h)."""
    n, d = x.shape
    alpha, head = memory_key.shape[0], d // n_heads
    queries = x.view(n, n_heads, head).transpose(0, 1)  # (h, N, d/h)
    keys = memory_key.view(alpha, n_heads, head).transpose(0, 1)  # (h, alpha, d/h)
    values = memory_value.view(alpha, n_heads, head).transpose(0, 1)  # (h, alpha, d/h)
    return queries @ keys.transpose(1, 2) / math.sqrt(head), values


def external_attention(x, memory_key, memory_value, n_heads, norm):
    """Multi-head external attention, Eq. 13-14 per head, heads concatenated (Eq. 15 before ``W_1``).

    x (N, d), memory_key and memory_value (alpha, d) -> (N, d). Head ``j`` takes feature columns
    ``j*d/h ... (j+1)*d/h`` of ``x`` and of both memories. The scores ``x M_k^T / sqrt(d/h)`` are
    normalised over each node's own ``alpha`` slots (``l2``: Eq. 13 as written; ``softmax``), so a node's
    output depends on that node alone: the cost is O(N alpha d), linear in N.
    """
    scores, values = head_scores(x, memory_key, memory_value, n_heads)  # (h, N, alpha), (h, alpha, d/h)
    if norm == "l2":  # scores / ||scores||, written out: F.normalize's backward is slower on CPU
        weights = scores * scores.pow(2).sum(dim=-1, keepdim=True).clamp_min(1e-24).rsqrt()
    else:
        weights = scores.softmax(dim=-1)
    return (weights @ values).transpose(0, 1).reshape(x.shape)


def token_external_attention(x, memory_key, memory_value, n_heads, valid):
    """External attention with the double normalisation of Guo et al. 2021 (``softmax`` over the tokens,
    then ``l1`` over the ``alpha`` slots), per head; x (N, d), valid (N,) bool -> (N, d).

    The tokens are the item nodes; rows where ``valid`` is False (the padding item) take no part in the
    softmax over tokens, so their content cannot reach a real node, and their own output is zero.
    """
    scores, values = head_scores(x, memory_key, memory_value, n_heads)  # (h, N, alpha), (h, alpha, d/h)
    scores = scores.masked_fill(~valid.view(1, -1, 1), float("-inf"))
    weights = scores.softmax(dim=1)  # over tokens
    weights = weights / weights.sum(dim=-1, keepdim=True).clamp_min(1e-9)  # l1 over slots
    return (weights @ values).transpose(0, 1).reshape(x.shape)


class ExternalEncoder(nn.Module):
    """Eq. 15 and 17 for one layer's item rows: ``LayerNorm(E + delta * concat_heads(EA(E)) W_1)``.

    The memories are this module's parameters; one instance serves every layer, so they are shared.
    """

    def __init__(self, embedding_size, memory_size, n_heads, norm, delta, external_norm="node", item_weights=None):
        super().__init__()
        self.n_heads, self.norm, self.delta, self.external_norm = n_heads, norm, delta, external_norm
        # (m, 1) Eq. 16's count of training sequences holding each item (None: each item once)
        self.register_buffer("item_weights", item_weights, persistent=False)
        self.memory_key = nn.Parameter(torch.empty(memory_size, embedding_size))
        self.memory_value = nn.Parameter(torch.empty(memory_size, embedding_size))
        nn.init.xavier_normal_(self.memory_key)
        nn.init.xavier_normal_(self.memory_value)
        self.heads_out = nn.Linear(embedding_size, embedding_size, bias=False)  # W_1
        self.layer_norm = nn.LayerNorm(embedding_size)

    def forward(self, items):  # (m, d) -> (m, d)
        if self.external_norm == "token":
            valid = torch.arange(items.shape[0], device=items.device) > 0  # item 0 is RecBole's padding
            attended = token_external_attention(items, self.memory_key, self.memory_value, self.n_heads, valid)
        else:
            attended = external_attention(items, self.memory_key, self.memory_value, self.n_heads, self.norm)
        z = self.heads_out(attended)
        if self.item_weights is not None:
            z = z * self.item_weights
        return self.layer_norm(items + self.delta * z)


def external_attentive_propagation(adjacency, adjacency_t, items, users, n_layers, external):
    # ``external=None`` is the paper's GPS_OEA ablation: E_S^(l) = Ê_S^(l)
    """Eq. 3-4, 17-18: mean over layers ``0..eta`` of ``[E_S^(l); E_U^(l)]``, split into (items, users).

    ``Ê^(l) = A_hat Ê^(l-1)`` from ``Ê^(0) = [items; users]``; the external encoder runs beside the
    propagation (its output does not feed the next step): ``E_S^(l) = external(Ê_S^(l))`` for l >= 1,
    ``E_U^(l) = Ê_U^(l)``; layer 0 is the embeddings themselves.
    """
    m = items.shape[0]
    x = torch.cat([items, users])  # (N, d)
    item_layers, user_layers = [items], [users]
    for _ in range(n_layers):
        x = sparse_matmul(adjacency, adjacency_t, x)
        item_layers.append(x[:m] if external is None else external(x[:m]))
        user_layers.append(x[m:])
    return torch.stack(item_layers).mean(dim=0), torch.stack(user_layers).mean(dim=0)


# ---------------------------------------------------------------- decoder (Eq. 21-24)


def sequential_mask(lengths, max_length, ratio, generator=None):
    """Eq. 21: (B, L) bool, True where a position's template is replaced by the mask token.

    Each sequence of length ``t`` gets exactly ``floor(ratio * t)`` masked positions (at most ``t - 1``),
    drawn uniformly without replacement among its positions before the last: the last position is the
    soft attention's query (Eq. 23), so it is never masked. Padding is never masked.
    """
    positions = torch.arange(max_length, device=lengths.device)
    candidates = positions.unsqueeze(0) < (lengths - 1).unsqueeze(1)  # (B, L)
    keys = torch.rand(lengths.shape[0], max_length, generator=generator, device=lengths.device)
    keys = keys.masked_fill(~candidates, 2.0)  # non-candidates rank last
    ranks = keys.argsort(dim=1).argsort(dim=1)
    n_masked = torch.minimum(torch.floor(ratio * lengths.float()).long(), (lengths - 1).clamp(min=0))
    return ranks < n_masked.unsqueeze(1)


def soft_attention(templates, lengths):
    """Eq. 23-24: ``sum_i a_i e_i`` with ``a_i = exp(cos(e_i, e_t)) / sqrt(sum_j exp(cos(e_j, e_t)))``.

    templates (B, L, d), lengths (B,) -> (B, d). ``e_t`` is each sequence's last real position; padding
    takes no part. The square root in the normaliser is the paper's (weights do not sum to one).
    """
    valid = torch.arange(templates.shape[1], device=lengths.device).unsqueeze(0) < lengths.unsqueeze(1)
    last = templates.gather(1, (lengths - 1).view(-1, 1, 1).expand(-1, 1, templates.shape[-1]))  # (B, 1, d)
    similarity = F.cosine_similarity(templates, last, dim=-1)  # (B, L), in [-1, 1]
    scores = similarity.exp() * valid  # no overflow: exp(1) at most
    weights = scores / scores.sum(dim=1, keepdim=True).sqrt()
    return (weights.unsqueeze(-1) * templates).sum(dim=1)


def plain_pool(sequence, lengths, how):
    """GPS_OPT's decoder: max or mean over each sequence's real positions; (B, L, d), (B,) -> (B, d)."""
    valid = (torch.arange(sequence.shape[1], device=lengths.device).unsqueeze(0) < lengths.unsqueeze(1)).unsqueeze(-1)
    if how == "max_pool":
        return sequence.masked_fill(~valid, float("-inf")).max(dim=1).values
    return (sequence * valid).sum(dim=1) / lengths.clamp(min=1).unsqueeze(1).to(sequence.dtype)


def fuse(pooled, user, norm):
    """Eq. 25 ``[pooled; user]`` with each half optionally rescaled: ``layer`` (LayerNorm without affine
    weights, norm sqrt(d)) or ``l2`` (unit norm), so neither half dominates the output layer by scale."""
    if norm == "layer":
        pooled, user = F.layer_norm(pooled, pooled.shape[-1:]), F.layer_norm(user, user.shape[-1:])
    elif norm == "l2":
        pooled, user = F.normalize(pooled, dim=-1), F.normalize(user, dim=-1)
    return torch.cat([pooled, user], dim=-1)


# ---------------------------------------------------------------- the model


class EAGPS(SharedSparseBuffers, SequentialRecommender):
    r"""EA-GPS; see ``properties/model/EAGPS.yaml`` for its options and the readings of ambiguous points."""

    input_type = InputType.POINTWISE

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
        self.external = ExternalEncoder(
            d, self.memory_size, self.n_heads, self.ea_norm, self.delta, self.external_norm, item_weights
        )
        self.position_prompt = nn.Embedding(self.max_seq_length, self.prompt_size)  # Ê_P, one row per position
        self.prompt_conv = nn.Conv1d(self.prompt_size, d, kernel_size=1)  # Eq. 19: W_c, b_c
        self.template = nn.Linear(2 * d, d)  # Eq. 20: W_2, b_2
        self.mask_token = nn.Parameter(torch.empty(d))  # [mask] of Eq. 22
        self.dropout = nn.Dropout(self.dropout_prob)
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
        sequence = items[item_seq]  # (B, L, d)
        if self.decoder != "prompt":  # GPS_OPT ablation
            return fuse(plain_pool(sequence, item_seq_len, self.decoder), users[user], self.fusion_norm)
        prompts = self.prompts()[: item_seq.shape[1]].expand_as(sequence)  # (B, L, d)
        templates = torch.relu(self.template(torch.cat([sequence, prompts], dim=-1)))  # Eq. 20
        templates = self.dropout(templates)
        if self.training and self.mask_ratio > 0:  # Eq. 21-22
            masked = sequential_mask(item_seq_len, item_seq.shape[1], self.mask_ratio)
            templates = torch.where(masked.unsqueeze(-1), self.mask_token.to(templates.dtype), templates)
        pooled = soft_attention(templates, item_seq_len)  # Eq. 23-24
        return fuse(pooled, users[user], self.fusion_norm)  # Eq. 25

    def _logits(self, interaction):
        return self.output(
            self.forward(interaction[self.ITEM_SEQ], interaction[self.ITEM_SEQ_LEN], interaction[self.USER_ID])
        )  # Eq. 27 (before softmax)

    def calculate_loss(self, interaction):
        """Eq. 28: cross-entropy of the next item over all items, averaged over the batch's prefixes."""
        return F.cross_entropy(self._logits(interaction), interaction[self.POS_ITEM_ID])

    def predict(self, interaction):
        return self._logits(interaction).gather(1, interaction[self.ITEM_ID].unsqueeze(1)).squeeze(1)

    def full_sort_predict(self, interaction):
        return self._logits(interaction)
