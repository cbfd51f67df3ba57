"""EA-GPS's decoder pieces (Eq. 21-25): the sequential mask, the soft attention pooling and the fusion with the
user; ``B`` batch, ``L`` max sequence length, ``d`` embedding size."""

import torch
import torch.nn.functional as F


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
