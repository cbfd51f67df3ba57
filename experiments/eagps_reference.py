"""EAGPS's training step as the model computed it up to commit da76ead, kept as the reference that
``experiments/sequential_step.py`` times beside the model (there is no RecBole EAGPS) and that
``tests/model/sequential_recommender/test_eagps_step.py`` holds the model's loss, gradients and scores to.

The straightforward form: every window position, padding included, through Eq. 20's matmul of concatenated
(B, L, 2d) copies, ``nn.Dropout`` (``bernoulli_``), the mask token written over the drawn positions, the soft
attention over (B, L, d) and ``F.cross_entropy`` over the full-item logits; the mask from two argsorts; the
external attention's heads as batched matmuls of (h, N, d/h) slices, its l2 norm through autograd.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

from recbole_mgformer.model.eagps.decoder import fuse, plain_pool, soft_attention
from recbole_mgformer.model.eagps.external import ExternalEncoder, head_scores
from recbole_mgformer.model.sequential_recommender.eagps import EAGPS


def reference_sequential_mask(lengths, max_length, ratio, generator=None):
    """Eq. 21 as drawn up to da76ead: :func:`recbole_mgformer.model.eagps.decoder.sequential_mask`'s keys, ranked
    by two argsorts; (B,) lengths -> (B, L) bool."""
    positions = torch.arange(max_length, device=lengths.device)
    candidates = positions.unsqueeze(0) < (lengths - 1).unsqueeze(1)  # (B, L)
    keys = torch.rand(lengths.shape[0], max_length, generator=generator, device=lengths.device)
    keys = keys.masked_fill(~candidates, 2.0)  # non-candidates rank last
    ranks = keys.argsort(dim=1).argsort(dim=1)
    n_masked = torch.minimum(torch.floor(ratio * lengths.float()).long(), (lengths - 1).clamp(min=0))
    return ranks < n_masked.unsqueeze(1)


def reference_external_attention(x, memory_key, memory_value, n_heads, norm):
    """:func:`recbole_mgformer.model.eagps.external.external_attention` as computed up to da76ead: x (N, d),
    memories (alpha, d) -> (N, d)."""
    scores, values = head_scores(x, memory_key, memory_value, n_heads)  # (h, N, alpha), (h, alpha, d/h)
    if norm == "l2":
        weights = scores * scores.pow(2).sum(dim=-1, keepdim=True).clamp_min(1e-24).rsqrt()
    else:
        weights = scores.softmax(dim=-1)
    return (weights @ values).transpose(0, 1).reshape(x.shape)


class ReferenceExternalEncoder(ExternalEncoder):
    """The external encoder with the node-normalised attention of da76ead (``token`` is the model's own), one
    propagation step's items at a time as then."""

    def forward(self, items):
        if items.dim() == 3:  # (eta, m, d): every step's items
            return torch.stack([super(ReferenceExternalEncoder, self).forward(layer) for layer in items])
        return super().forward(items)

    def attend(self, items):
        if self.external_norm == "token":
            return super().attend(items)
        return reference_external_attention(items, self.memory_key, self.memory_value, self.n_heads, self.norm)


class ReferenceEAGPS(EAGPS):
    """EAGPS with the external attention, decoder and loss of da76ead; the same parameters and state-dict keys."""

    external_encoder = ReferenceExternalEncoder

    def __init__(self, config, dataset):
        super().__init__(config, dataset)
        self.dropout = nn.Dropout(self.dropout_prob)

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
            masked = reference_sequential_mask(item_seq_len, item_seq.shape[1], self.mask_ratio)
            templates = torch.where(masked.unsqueeze(-1), self.mask_token.to(templates.dtype), templates)
        pooled = soft_attention(templates, item_seq_len)  # Eq. 23-24
        return fuse(pooled, users[user], self.fusion_norm)  # Eq. 25

    def calculate_loss(self, interaction):
        """Eq. 28: cross-entropy of the next item over all items, averaged over the batch's prefixes."""
        return F.cross_entropy(self._logits(interaction), interaction[self.POS_ITEM_ID])
