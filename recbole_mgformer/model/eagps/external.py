"""EA-GPS's external attention (Eq. 13-17): ``alpha`` memory slots shared by every propagation step, ``h``
heads over ``d`` feature columns."""

import math

import torch
import torch.nn as nn


def head_scores(x, memory_key, memory_value, n_heads):
    """Per head ``j`` (feature columns ``j*d/h ... (j+1)*d/h``): the scores ``x M_k^T / sqrt(d/h)`` and the
    value memory. x (N, d), memory_key and memory_value (alpha, d) -> scores (h, N, alpha), values (h, alpha, d/h)."""
    n, d = x.shape
    alpha, head = memory_key.shape[0], d // n_heads
    queries = x.view(n, n_heads, head).transpose(0, 1)  # (h, N, d/h)
    keys = memory_key.view(alpha, n_heads, head).transpose(0, 1)  # (h, alpha, d/h)
    values = memory_value.view(alpha, n_heads, head).transpose(0, 1)  # (h, alpha, d/h)
    return queries @ keys.transpose(1, 2) / math.sqrt(head), values


def head_blocks(memory, n_heads):
    """A memory (alpha, d) as a block-diagonal (d, h * alpha): block ``j`` is head ``j``'s feature columns of the
    memory, transposed, so ``x @ head_blocks(M_k)`` is every head's ``x_j M_kj^T`` side by side (N, h * alpha) in
    one matmul; the zeros off the blocks add exact zeros. One (N, d) x (d, h * alpha) matmul instead of h batched
    ones of inner size d/h and their transposed copies."""
    alpha, d = memory.shape
    return torch.block_diag(*memory.T.reshape(n_heads, d // n_heads, alpha))


L2_FLOOR = 1e-12  # a node's scores of norm below this are divided by it (their squares' sum floored at 1e-24)


class _L2ExternalAttention(torch.autograd.Function):
    """Eq. 13-14 with the l2 norm, heads side by side: x (N, d), key_blocks and value_blocks (d, h * alpha) ->
    (N, d). Written out so that the (N, h, alpha) scores are one buffer (normalised in place) in the forward and
    their gradient one more in the backward; autograd's form keeps about eight such temporaries."""

    @staticmethod
    def forward(ctx, x, key_blocks, value_blocks, n_heads):
        weights = (x @ key_blocks).view(x.shape[0], n_heads, -1)  # (N, h, alpha) scores
        norms = torch.linalg.vector_norm(weights, dim=-1, keepdim=True)  # (N, h, 1)
        floored = norms < L2_FLOOR
        inverse = norms.clamp_min_(L2_FLOOR).reciprocal_()
        weights.mul_(inverse)  # scores / ||scores||
        ctx.save_for_backward(x, key_blocks, value_blocks, weights, inverse, floored)
        return weights.view(x.shape[0], -1) @ value_blocks.T

    @staticmethod
    def backward(ctx, grad):  # grad (N, d)
        x, key_blocks, value_blocks, weights, inverse, floored = ctx.saved_tensors
        flat = weights.view(x.shape[0], -1)  # (N, h * alpha)
        grad_values = grad.T @ flat  # (d, h * alpha)
        grad_weights = (grad @ value_blocks).view_as(weights)  # (N, h, alpha)
        # d(s / ||s||) = (g - w (w . g)) / ||s||; a floored norm is a constant divisor: g / floor
        along = (grad_weights * weights).sum(dim=-1, keepdim=True).masked_fill_(floored, 0.0)
        grad_scores = grad_weights.addcmul_(weights, along, value=-1.0).mul_(inverse).view_as(flat)
        return grad_scores @ key_blocks.T, x.T @ grad_scores, grad_values, None


def l2_collapses(memory_size, embedding_size, n_heads):
    """Whether Eq. 13-14 with the l2 norm runs in :func:`collapsed_l2_external_attention`'s form: when a head's
    width ``d/h`` is at most ``alpha``, its two (d/h, d/h) matrices are the smaller work and can have full rank."""
    return embedding_size // n_heads <= memory_size


def collapsed_l2_external_attention(x, memory_key, memory_value, n_heads):
    """Eq. 13-14 with the l2 norm, without the (N, h, alpha) scores: x (N, d), memories (alpha, d) -> (N, d).

    Per head ``j``, with the scores ``s = x_j K_j^T`` (``K_j`` the head's columns of ``M_k / sqrt(d/h)``):
    ``s V_j / ||s|| = x_j (K_j^T V_j) / sqrt(x_j (K_j^T K_j) x_j^T)``. The ``alpha`` slots enter only through
    the two (d/h, d/h) matrices, so a node costs O(d^2/h) instead of O(alpha d), with no alpha-wide buffer. The
    same function (associativity), evaluated in fp64 (fp32 on MPS): the quadratic form's terms can cancel. A
    node whose squared norm is below ``L2_FLOOR**2`` is divided by ``L2_FLOOR``, as in the scores' form."""
    alpha, d = memory_key.shape
    head = d // n_heads
    wide = torch.float32 if x.device.type == "mps" else torch.float64  # MPS has no float64
    keys = memory_key.to(wide).view(alpha, n_heads, head).transpose(0, 1) / math.sqrt(head)  # (h, alpha, d/h)
    values = memory_value.to(wide).view(alpha, n_heads, head).transpose(0, 1)  # (h, alpha, d/h)
    # every head's x_j gram_j (or x_j carry_j) side by side: one (N, d) x (d, d) matmul of a block-diagonal map;
    # two such matmuls rather than one of both maps side by side, whose split output costs an (N, 2d) copy backward
    gram = torch.block_diag(*(keys.transpose(1, 2) @ keys))  # (d, d): ||s||^2 = x_j gram_j x_j^T
    carry = torch.block_diag(*(keys.transpose(1, 2) @ values))  # (d, d): s V_j = x_j carry_j
    queries = x.to(wide)
    squared_norms = ((queries @ gram) * queries).view(-1, n_heads, head).sum(dim=-1, keepdim=True)  # (N, h, 1)
    out = (queries @ carry).view(-1, n_heads, head) * squared_norms.clamp_min(L2_FLOOR**2).rsqrt()
    return out.view(-1, d).to(x.dtype)


def external_attention(x, memory_key, memory_value, n_heads, norm):
    """Multi-head external attention, Eq. 13-14 per head, heads concatenated (Eq. 15 before ``W_1``).

    x (N, d), memory_key and memory_value (alpha, d) -> (N, d). Head ``j`` takes feature columns
    ``j*d/h ... (j+1)*d/h`` of ``x`` and of both memories. The scores ``x M_k^T / sqrt(d/h)`` are
    normalised over each node's own ``alpha`` slots (``l2``: Eq. 13 as written; ``softmax``), so a node's
    output depends on that node alone: the cost is O(N alpha d), linear in N, and with ``l2`` O(N d^2/h) where
    :func:`l2_collapses` (:func:`collapsed_l2_external_attention`).
    """
    if norm == "l2" and l2_collapses(*memory_key.shape, n_heads):
        return collapsed_l2_external_attention(x, memory_key, memory_value, n_heads)
    key_blocks = head_blocks(memory_key / math.sqrt(x.shape[1] // n_heads), n_heads)  # (d, h * alpha)
    value_blocks = head_blocks(memory_value, n_heads)
    if norm == "l2":
        return _L2ExternalAttention.apply(x, key_blocks, value_blocks, n_heads)
    weights = (x @ key_blocks).view(x.shape[0], n_heads, -1).softmax(dim=-1)  # (N, h, alpha)
    return weights.view(x.shape[0], -1) @ value_blocks.T


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
    ``attention_dtype`` (bf16 under EAGPS's ``precision: bf16``) is the format of Eq. 13-14 in training where they
    form the (m, h * alpha) scores, most of the encoder's memory traffic then; the l2 norm's collapsed form
    (:func:`l2_collapses`) forms none and stays exact; evaluation stays fp32.
    """

    attention_dtype = torch.float32

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

    def attend(self, items):
        """The heads' external attention, concatenated (before ``W_1``): (m, d) -> (m, d), or each of several
        layers' item rows, (eta, m, d) -> (eta, m, d)."""
        collapsed = (
            self.external_norm == "node" and self.norm == "l2" and l2_collapses(*self.memory_key.shape, self.n_heads)
        )
        dtype = self.attention_dtype if self.training and not collapsed else torch.float32
        x, keys, values = (t.to(dtype) for t in (items, self.memory_key, self.memory_value))
        if self.external_norm == "token":  # a softmax over one layer's item rows
            valid = torch.arange(items.shape[-2], device=items.device) > 0  # item 0 is RecBole's padding
            layers = x.reshape(-1, *x.shape[-2:])
            attended = [token_external_attention(layer, keys, values, self.n_heads, valid) for layer in layers]
            return torch.stack(attended).view(items.shape).to(items.dtype)
        # node-normalised: a row's output is its own, so every layer's rows go through at once
        return (
            external_attention(x.reshape(-1, x.shape[-1]), keys, values, self.n_heads, self.norm)
            .view(items.shape)
            .to(items.dtype)
        )

    def forward(self, items):  # (m, d) -> (m, d), or (eta, m, d) -> (eta, m, d)
        z = self.heads_out(self.attend(items))
        if self.item_weights is not None:
            z = z * self.item_weights
        return self.layer_norm(items + self.delta * z)
