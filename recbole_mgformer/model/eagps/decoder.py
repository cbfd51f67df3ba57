"""EA-GPS's decoder pieces (Eq. 21-25): the sequential mask, the soft attention pooling and the fusion with the
user; ``B`` batch, ``L`` max sequence length, ``d`` embedding size."""

import torch
import torch.nn.functional as F

from recbole_mgformer.model.loss import LOG2E  # exp(c) = exp2(c * log2(e)): torch's exp2 is faster on x86 CPUs


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
    n_masked = torch.minimum(torch.floor(ratio * lengths.float()).long(), (lengths - 1).clamp(min=0))
    # one sort: the position at rank r is masked iff r < n (the ranks' own argsort, inverted by a scatter); the keys
    # are sorted as their int32 bit patterns, in the same order for floats >= 0 and several times faster on CPUs
    order = keys.view(torch.int32).argsort(dim=1)  # (B, L) positions, lowest key first
    first = positions.unsqueeze(0) < n_masked.unsqueeze(1)  # (B, L) by rank
    return torch.zeros_like(first).scatter_(1, order, first)


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


# The training step's decoder: the same Eq. 20-24 over the positions that reach the pooled vector only. A padded
# position has weight 0 in Eq. 24 and a masked one's template is the mask token whatever its item, so only the real,
# unmasked positions ("kept", R of the B * L) go through Eq. 20, the ReLU and dropout, packed in row-major order.

COSINE_EPS = 1e-8  # F.cosine_similarity's default


def kept_positions(lengths, max_length, masked=None):
    """The real positions not in ``masked`` (B, L) bool (None: all real): their flat indices into (B * L) in
    row-major order (R,), and each sequence's count of them (B,). Every sequence's last position is kept (never
    masked), so it is that sequence's last kept row."""
    kept = torch.arange(max_length, device=lengths.device).unsqueeze(0) < lengths.unsqueeze(1)  # (B, L)
    if masked is not None:
        kept = kept & ~masked
    return kept.flatten().nonzero().squeeze(1), kept.sum(dim=1)


def template_inputs(items, prompts, template, item_ids, positions):
    """Eq. 20 before its ReLU, ``W_2 [e; p] + b_2``, at R (item, position) pairs: items (m, d), prompts (L, d),
    item_ids and positions (R,) -> (R, d). ``W_2 [e; p]`` is ``W_e e + W_p p``, so each half multiplies its table
    once (m and L rows) and the pairs gather rows, instead of a (R, 2d) matmul over concatenated copies."""
    d = items.shape[1]
    item_half = items @ template.weight[:, :d].T  # (m, d)
    position_half = F.linear(prompts, template.weight[:, d:], template.bias)  # (L, d)
    return item_half.index_select(0, item_ids) + position_half.index_select(0, positions)


def clamped_norms(x):
    """Row norms (..., d) -> (...,) floored at ``COSINE_EPS`` as ``F.cosine_similarity`` floors them: outside
    autograd, so the gradient flows as through the unclamped norm (a zero row's is zero)."""
    norms = x.norm(dim=-1).clone()
    with torch.no_grad():
        norms.clamp_min_(COSINE_EPS)
    return norms


def packed_soft_attention(templates, sequence, last, mask_token=None, n_masked=None):
    """Eq. 23-24 over packed templates: templates (R, d) of the kept positions, sequence (R,) the batch row of
    each, last (B,) the row of each sequence's last position; ``mask_token`` (d,) stands at ``n_masked`` (B,)
    more positions of each sequence -> (B, d), :func:`soft_attention` of the unpacked (B, L, d).

    A masked position's score ``exp(cos(mask, e_t))`` depends on its sequence only, so a sequence's ``n`` masked
    positions add ``n`` times one term. Sums over a sequence's rows are ``index_add`` (no (B, L) scatter); the
    normaliser divides the pooled sum once per sequence."""
    batch, d = last.shape[0], templates.shape[1]
    norms = clamped_norms(templates)  # (R,)
    query, query_norms = templates.index_select(0, last), norms.index_select(0, last)  # (B, d), (B,)
    dots = (templates * query.index_select(0, sequence)).sum(dim=1)  # (R,)
    scores = (dots / (norms * query_norms.index_select(0, sequence))).exp()  # exp(cos), at most e
    total = scores.new_zeros(batch).index_add(0, sequence, scores)  # (B,)
    pooled = templates.new_zeros(batch, d).index_add(0, sequence, scores.unsqueeze(1) * templates)  # (B, d)
    if n_masked is not None:
        token = mask_token.to(templates.dtype)
        mask_scores = ((query @ token) / (query_norms * clamped_norms(token))).exp() * n_masked  # (B,)
        total = total + mask_scores
        pooled = pooled + mask_scores.unsqueeze(1) * token
    return pooled / total.sqrt().unsqueeze(1)


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


# The whole-sequence protocol's decoder (``train_protocol: sequence``): Eq. 21-24 for every prefix of a window at
# once, the query of prefix ``t`` (its positions 0..t) being position ``t``. Causal: a prefix's pooled vector reads
# no later position, so position ``t``'s output is that of the prefix row of ``t + 1`` items.


def prefix_masks(lengths, max_length, ratio, generator=None):
    """Eq. 21 drawn for every prefix of each window, independently: lengths (B,) -> (B, L, L) bool, True where the
    prefix ending at position ``t`` (row ``t``) replaces position ``i``'s template by the mask token: exactly
    ``min(floor(ratio * (t + 1)), t)`` positions among ``i < t``, as :func:`sequential_mask` draws for a prefix row
    of ``t + 1`` items; none for a prefix ending at the padding."""
    positions = torch.arange(max_length, device=lengths.device)
    prefix_lengths = (positions + 1).unsqueeze(0) * (positions.unsqueeze(0) < lengths.unsqueeze(1))  # (B, L)
    masks = sequential_mask(prefix_lengths.flatten(), max_length, ratio, generator)
    return masks.view(len(lengths), max_length, max_length)


class _CausalSoftAttention(torch.autograd.Function):
    """:func:`causal_soft_attention` with its backward written out: the (B, L, L) scores are one buffer kept for
    the backward, and its gradient one more; autograd's form records some thirty small ops each way, most of the
    decoder's time at a training step's shapes. ``excluded`` (B, L, L) bool is True where key ``i`` takes no part
    in query ``t``'s sum; ``counts`` (B, L) float the number of mask tokens in it (with ``token`` (d,), else
    None)."""

    @staticmethod
    def forward(ctx, templates, excluded, token, counts):
        true_norms = templates.norm(dim=-1)  # (B, L)
        norms = true_norms.clamp_min(COSINE_EPS)
        unit = templates / norms.unsqueeze(-1)
        scores = torch.bmm(unit * LOG2E, unit.transpose(1, 2)).exp2_().masked_fill_(excluded, 0.0)  # exp(cos)
        total, pooled = scores.sum(dim=2), torch.bmm(scores, templates)  # (B, L), (B, L, d)
        mask_scores = token_true_norm = token_norm = None
        if token is not None:
            token_true_norm = token.norm()
            token_norm = token_true_norm.clamp_min(COSINE_EPS)
            mask_scores = ((unit @ token) / token_norm).exp_().mul_(counts)  # (B, L)
            total.add_(mask_scores)
            pooled.addcmul_(mask_scores.unsqueeze(-1), token)
        out = pooled.div_(total.sqrt().unsqueeze(-1))
        ctx.save_for_backward(templates, unit, norms, true_norms, scores, total, out, token, mask_scores)
        ctx.token_norms = (token_true_norm, token_norm)
        return out

    @staticmethod
    def backward(ctx, grad):  # grad (B, L, d)
        templates, unit, norms, true_norms, scores, total, out, token, mask_scores = ctx.saved_tensors
        token_true_norm, token_norm = ctx.token_norms
        grad_pooled = grad / total.sqrt().unsqueeze(-1)
        grad_total = (grad * out).sum(dim=-1).div_(total).mul_(-0.5)  # (B, L)
        # d(exp(cos)) = exp(cos) d(cos); an excluded score is 0, so its gradient is too
        grad_cosines = torch.bmm(grad_pooled, templates.transpose(1, 2)).add_(grad_total.unsqueeze(-1)).mul_(scores)
        grad_templates = torch.bmm(scores.transpose(1, 2), grad_pooled)
        grad_unit = torch.bmm(grad_cosines + grad_cosines.transpose(1, 2), unit)  # cos = unit unit^T
        grad_token = None
        if token is not None:
            grad_token_cosines = (grad_pooled @ token).add_(grad_total).mul_(mask_scores)  # (B, L)
            grad_token = (mask_scores.unsqueeze(-1) * grad_pooled).sum(dim=(0, 1))
            grad_unit.add_(grad_token_cosines.unsqueeze(-1) * (token / token_norm))
            # cos = unit . token / n(token), n's gradient that of the unclamped norm (clamped_norms)
            pulled = (grad_token_cosines.unsqueeze(-1) * unit).sum(dim=(0, 1))  # (d,)
            along_token = (pulled @ token) / (token_norm.square() * token_true_norm)  # nan for a zero token: unused
            grad_token += pulled / token_norm - torch.where(token_true_norm > 0, along_token, 0.0) * token
        # unit = templates / n(templates), as clamped_norms: a zero row's norm has no gradient
        along = (grad_unit * templates).sum(dim=-1) / (norms.square() * true_norms)
        along = along.masked_fill_(true_norms == 0, 0.0)
        grad_templates += grad_unit / norms.unsqueeze(-1) - along.unsqueeze(-1) * templates
        return grad_templates, None, grad_token, None


def causal_soft_attention(templates, lengths, mask_token=None, masked=None):
    """Eq. 23-24 for every prefix: templates (B, L, d), lengths (B,) -> (B, L, d), row ``t`` the
    :func:`soft_attention` of positions ``0..t`` against position ``t``; with ``masked`` (B, L, L) from
    :func:`prefix_masks`, row ``t``'s masked positions stand as ``mask_token`` (d,). Rows at the padding are
    not meaningful. Norms are floored at ``COSINE_EPS`` as :func:`clamped_norms` floors them."""
    max_length = templates.shape[1]
    positions = torch.arange(max_length, device=lengths.device)
    excluded = (positions.unsqueeze(0) > positions.unsqueeze(1)).unsqueeze(0) | (
        positions >= lengths.unsqueeze(1)
    ).unsqueeze(1)  # (B, L, L): key i after query t, or padding
    token, counts = None, None
    if masked is not None:
        excluded = excluded | masked
        token, counts = mask_token.to(templates.dtype), masked.sum(dim=2).to(templates.dtype)
    return _CausalSoftAttention.apply(templates, excluded, token, counts)


def causal_plain_pool(sequence, how):
    """GPS_OPT's decoder for every prefix: max or mean over positions ``0..t``: (B, L, d) -> (B, L, d)."""
    if how == "max_pool":
        return sequence.cummax(dim=1).values
    counts = torch.arange(1, sequence.shape[1] + 1, device=sequence.device, dtype=sequence.dtype)
    return sequence.cumsum(dim=1) / counts.view(1, -1, 1)
