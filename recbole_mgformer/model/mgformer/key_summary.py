"""The key side of Eq. (12) for random feature maps, fused: keys, features, mask gates and sums in one pass over
row chunks, with the features recomputed in backward instead of stored.

Shapes: ``n`` key nodes, ``r`` rows of a chunk, ``d`` learned and ``d'`` structural token columns, ``w = d + d'``,
``h`` heads of size ``k = w / h``, ``m`` random features, ``g`` mask branches (2 with the sin mask, 1 without).

Why: the unfused form builds several ``(h, n, g m)`` temporaries per step, which cost more to allocate and stream
through memory than the matmuls cost to compute. In chunks of a few thousand rows every temporary stays in cache,
and nothing of size ``n m`` is kept for backward. Each chunk's features are shifted by the chunk's own maximum
logit, so ``exp`` never overflows, and the chunks' sums are rescaled to a common shift when they are added (as in
FlashAttention): the result is the one-pass result. Only the learned token columns get a gradient.

The two per-chunk functions are pure, so ``compile=True`` hands them to ``torch.compile``, which fuses their
elementwise work (casts, shifts, exponentials, gates) into single loops around the matmuls.
"""

import math

import torch

from recbole_mgformer.model.mgformer.compilation import CompiledOrEager
from recbole_mgformer.model.mgformer.feature_maps import random_feature_logits, shifted_exp

# Rows per chunk: the (h, r, g m) temporaries of 4096 rows at m = 128 take 4 MiB, which a CPU's L2 or L3 cache
# holds; the per-chunk Python overhead stays small beside the chunk's matmuls.
DEFAULT_CHUNK_SIZE = 4096


def _heads(x, heads):  # (r, w) -> (h, r, k)
    return x.view(x.shape[0], heads, -1).transpose(0, 1)


def _merge_heads(x):  # (h, r, k) -> (r, w)
    return x.transpose(0, 1).reshape(x.shape[1], -1)


def _chunk_terms(tokens_and_ones, weight, projection):
    """What forward and backward both compute for a chunk: tokens_and_ones (r, w + 1) = ``[X | 1]`` in the matmul
    format, weight (w, w) = k^-1/4 W_K and projection (h, m, k) in that format -> tokens (r, w) and keys (h, r, k)
    in that format, logits (h, r, m) in fp32 or the parameters' format (Eq. 7 in log space, as the unfused
    feature map computes it), values ``[V | 1]`` (h, r, k + 1)."""
    # fp32 sums for fp32 and bf16 inputs (a Python choice: promote_types would be an op a step)
    heads, accumulate = projection.shape[0], (torch.float64 if weight.dtype == torch.float64 else torch.float32)
    tokens = tokens_and_ones[:, :-1]
    keys = _heads(tokens @ weight.T, heads)
    logits = random_feature_logits(keys, projection, accumulate)
    if heads == 1:  # the ones column is already there: [V | 1] is the chunk itself
        values = tokens_and_ones.unsqueeze(0)
    else:  # the ones column makes the normaliser of Eq. (12) one more output column of the summary's matmul
        values = _heads(tokens, heads)
        values = torch.cat([values, torch.ones_like(values[..., :1])], dim=-1)
    return tokens, keys, logits, values


def _chunk_terms_without_features(tokens_and_ones, heads):
    tokens = tokens_and_ones[:, :-1]
    if heads == 1:
        return tokens, None, None, tokens_and_ones.unsqueeze(0)
    values = _heads(tokens, heads)
    return tokens, None, None, torch.cat([values, torch.ones_like(values[..., :1])], dim=-1)


def _gated(features, gates, dtype):
    """``[phi cos | phi sin]`` (Eq. 11) in the matmul format, (h, r, g m); ``phi`` alone without a mask. gates
    (r, 2, 1): ``cos``, ``sin`` of the rows, or None."""
    if gates is None:
        return features.to(dtype)
    if dtype == features.dtype or torch.compiler.is_compiling() or torch.is_grad_enabled():
        # one broadcast product, (h, r, 1, m) * (r, 2, 1) -> (h, r, 2, m): the two halves side by side
        return (features.unsqueeze(-2) * gates).flatten(-2).to(dtype)
    # eager, another format (bf16): each half written by one multiplication straight into it, no fp32 copy
    # (out= cannot be traced or differentiated, hence the form above there)
    n_features = features.shape[-1]
    gated = features.new_empty(features.shape[:-1] + (2 * n_features,), dtype=dtype)
    torch.mul(features, gates[:, 0], out=gated[..., :n_features])
    torch.mul(features, gates[:, 1], out=gated[..., n_features:])
    return gated


def summary_of_chunk(tokens_and_ones, weight, projection, gates, keep=False):
    """A chunk's key-side sums, shifted by its own maximum logit: -> sums (h, g m, k + 1) in fp32 (or the
    parameters' format), maximum (h,), and with ``keep`` what backward needs of the chunk (keys, features), else
    None."""
    _, keys, logits, values = _chunk_terms(tokens_and_ones, weight, projection)
    maximum = logits.amax(dim=(-2, -1))
    features = shifted_exp(logits, maximum[:, None, None])
    sums = _gated(features, gates, projection.dtype).transpose(-2, -1) @ values
    return sums.to(logits.dtype), maximum, ((keys, features, maximum) if keep else None)


def _learned_value_gradients(gated, grad_summary, learned_columns):
    """``dV = gated dS[..., :k]`` of the learned token columns alone, (r, d): the structural columns get no
    gradient, so of a head that holds both only its learned columns are multiplied (half the matmul with one
    head). gated (h, r, g m), grad_summary (h, g m, k + 1)."""
    head_size = grad_summary.shape[-1] - 1
    heads = -(-learned_columns // head_size)  # the heads that hold a learned column
    columns = learned_columns if heads == 1 else head_size
    return _merge_heads(gated[:heads] @ grad_summary[:heads, :, :columns])[:, :learned_columns]


def gradients_of_chunk(tokens_and_ones, weight, projection, gates, shift, grad_summary, learned_columns, kept=None):
    """Backward of a chunk's share of the sums, with the features at the final ``shift`` (h,): recomputed, or
    from what :func:`summary_of_chunk` kept. grad_summary (h, g m, k + 1) in the matmul format -> gradients of
    the learned token columns (r, d), of the scaled weight (w, w), and of the angles ``a = pi z / 4`` (r,)
    (None without a mask)."""
    matmul_dtype, n_features = projection.dtype, projection.shape[1]
    if kept is None:
        tokens_mm, keys, logits, values = _chunk_terms(tokens_and_ones, weight, projection)
        features = shifted_exp(logits, shift[:, None, None])  # phi, (h, r, m)
    else:
        keys, features, maximum = kept
        tokens_mm, _, _, values = _chunk_terms_without_features(tokens_and_ones, projection.shape[0])
        features = features * torch.exp(maximum - shift)[:, None, None]
    accumulate = features.dtype
    # S = gated^T [V | 1]  =>  d gated = [V | 1] dS^T,  dV = gated dS[..., :k]
    grad_gated = values @ grad_summary.transpose(-2, -1)  # (h, r, g m), the matmul format
    grad_values = _learned_value_gradients(_gated(features, gates, matmul_dtype), grad_summary, learned_columns).to(
        accumulate
    )
    if gates is None:
        grad_features, grad_angle = grad_gated.to(accumulate), None
    else:  # the products read the matmul format and write fp32: no separate cast
        cos, sin = gates[:, 0], gates[:, 1]  # (r, 1) each
        grad_cos_branch, grad_sin_branch = grad_gated.split(n_features, dim=-1)
        grad_features = torch.addcmul(grad_cos_branch * cos, grad_sin_branch, sin)
        # d/da [sin(a) s + cos(a) c] = cos(a) s - sin(a) c
        through_cos = (features * grad_cos_branch).sum(dim=(0, 2))
        through_sin = (features * grad_sin_branch).sum(dim=(0, 2))
        grad_angle = cos.squeeze(-1) * through_sin - sin.squeeze(-1) * through_cos
    grad_logits = grad_features * features  # phi = exp(logit - shift)
    # logit = w^T a - |a|^2 / 2  =>  da = dlogit W - a sum(dlogit)
    grad_keys = (grad_logits.to(matmul_dtype) @ projection).to(accumulate)
    grad_keys = _merge_heads(grad_keys - keys.to(accumulate) * grad_logits.sum(-1, keepdim=True)).to(matmul_dtype)
    grad_weight = (grad_keys.T @ tokens_mm).to(accumulate)  # keys = tokens weight^T
    grad_tokens = (grad_keys @ weight[:, :learned_columns]).to(accumulate) + grad_values
    return grad_tokens, grad_weight, grad_angle


class ChunkFunctions:
    """The two per-chunk functions, eager or compiled (``torch.compile`` specialises on each chunk shape:
    a full chunk and the remainder). ``keep``: forward keeps each chunk's tokens, keys and features for backward
    (memory ~ n (w + m) per layer) instead of backward recomputing them (two matmuls and the exponentials)."""

    compiled = False  # True: torch.compile'd, so the fused Function runs as an eager region (mgformer.py)

    def __init__(self, compile=False, keep=False):
        self.keep, self.compiled = keep, compile
        if compile:
            self.summary = CompiledOrEager(summary_of_chunk, "MGFormer key side", dynamic=False)
            self.gradients = CompiledOrEager(gradients_of_chunk, "MGFormer key side backward", dynamic=False)
        else:
            self.summary, self.gradients = summary_of_chunk, gradients_of_chunk


EAGER = ChunkFunctions()


def _gates(key_z):
    """``cos(pi z / 4), sin(pi z / 4)`` of all keys side by side, (n, 2, 1), made once a step for forward and
    backward (the chunks' gates are views of it), or None without a mask."""
    if key_z is None:
        return None
    angle = (math.pi / 4) * key_z[:, None, None]
    return torch.cat([torch.cos(angle), torch.sin(angle)], dim=1)


def _chunk_gates(gates, start, stop):
    return None if gates is None else gates[start:stop]


def _tokens_and_ones(embeddings, structural, dtype):
    """``[E | P | 1]`` (n, w + 1) in the matmul format, built once per step: the chunks are views of it, so no
    chunk concatenates or casts its tokens, and the ones column serves as the normaliser's values."""
    learned_columns = embeddings.shape[1]
    width = learned_columns + (0 if structural is None else structural.shape[1])
    tokens = embeddings.new_empty((len(embeddings), width + 1), dtype=dtype)
    tokens[:, :learned_columns] = embeddings
    if structural is not None:
        tokens[:, learned_columns:width] = structural
    tokens[:, width] = 1
    return tokens


class ChunkedKeySummary(torch.autograd.Function):
    @staticmethod
    def forward(ctx, embeddings, structural, key_weight, projection, key_z, dtype, chunk_size, functions):
        heads, n_features, head_size = projection.shape
        weight = (key_weight * head_size**-0.25).to(dtype)  # the k^-1/4 of apply_feature_map, folded into W_K
        projection_mm = projection.to(dtype)
        tokens = _tokens_and_ones(embeddings.detach(), structural, dtype)
        gates = _gates(key_z)
        chunk_sums, maxima, kept = [], [], []
        for start in range(0, len(embeddings), chunk_size):
            stop = start + chunk_size
            sums, maximum, chunk_kept = functions.summary(
                tokens[start:stop],
                weight,
                projection_mm,
                _chunk_gates(gates, start, stop),
                keep=functions.keep and any(ctx.needs_input_grad),
            )
            chunk_sums.append(sums)
            maxima.append(maximum)
            kept.append(chunk_kept)
        summary, shift = _merge(chunk_sums, maxima)
        # m^-1/2 of Eq. (7): with it the sums equal the unfused ones, whose shift includes 0.5 log m.
        shift = shift + 0.5 * math.log(n_features)
        ctx.save_for_backward(embeddings, key_weight, projection, key_z, shift)
        ctx.dtype, ctx.chunk_size, ctx.functions, ctx.kept, ctx.tokens = dtype, chunk_size, functions, kept, tokens
        ctx.weight, ctx.gates = weight, gates
        return (summary * math.exp(-0.5 * math.log(n_features))).to(embeddings.dtype)

    @staticmethod
    def backward(ctx, grad_summary):
        embeddings, key_weight, projection, key_z, shift = ctx.saved_tensors
        dtype, chunk_size, weight, gates = ctx.dtype, ctx.chunk_size, ctx.weight, ctx.gates
        projection_mm = projection.to(dtype)
        grad_summary = grad_summary.to(dtype)
        grad_tokens, grad_weights, grad_angles = [], [], []
        for index, start in enumerate(range(0, len(embeddings), chunk_size)):
            stop = start + chunk_size
            grad_chunk, grad_scaled_weight, grad_angle = ctx.functions.gradients(
                ctx.tokens[start:stop],
                weight,
                projection_mm,
                _chunk_gates(gates, start, stop),
                shift,
                grad_summary,
                embeddings.shape[1],
                ctx.kept[index],
            )
            grad_tokens.append(grad_chunk)
            grad_weights.append(grad_scaled_weight)
            grad_angles.append(grad_angle)
        ctx.kept = ctx.tokens = ctx.weight = ctx.gates = None
        # one chunk (a GPU's choice) hands its gradients on as they are; more are joined once, not per chunk
        grad_embeddings = _joined(grad_tokens, torch.cat)
        grad_weight = _joined(grad_weights, lambda parts: torch.stack(parts).sum(dim=0))
        grad_z = None if key_z is None else _joined(grad_angles, torch.cat) * (math.pi / 4)
        return grad_embeddings, None, grad_weight * projection.shape[-1] ** -0.25, None, grad_z, None, None, None


def _joined(parts, join):
    return parts[0] if len(parts) == 1 else join(parts)


def _merge(chunk_sums, maxima):
    """The chunks' sums (h, g m, k + 1) each, shifted by their own maxima (h,), brought to the largest shift and
    added, in one pass over all chunks (as FlashAttention's rescaling, but once, not per chunk) -> sums, shift."""
    if len(chunk_sums) == 1:
        return chunk_sums[0], maxima[0]
    maxima = torch.stack(maxima)  # (c, h)
    shift = maxima.amax(dim=0)
    scales = torch.exp(maxima - shift)  # (c, h), each <= 1
    return (torch.stack(chunk_sums) * scales[:, :, None, None]).sum(dim=0), shift


def chunked_key_summary(
    embeddings,
    structural,
    key_weight,
    projection,
    key_z=None,
    dtype=None,
    chunk_size=DEFAULT_CHUNK_SIZE,
    functions=EAGER,
):
    """Key-side sums of Eq. (12) for the random feature maps (``prf``, ``orf``, ``simrf``), fused.

    embeddings (n, d) the learned token columns; structural (n, d') the fixed ones, or None; key_weight (w, w) as
    ``nn.Linear`` stores W_K; projection (h, m, k); key_z (n,) or None (no mask) -> (h, g m, k + 1).
    Equals :func:`recbole_mgformer.model.mgformer.attention.key_summary` of the random features of the keys, the same
    ``(h, g m, k + 1)`` sums with the normaliser as the last column. ``dtype``: the matmuls' input format
    (``torch.bfloat16``, or None for the inputs' own); sums and exponentials stay in the inputs' format.
    ``functions``: :class:`ChunkFunctions`, eager or compiled.
    """
    if structural is not None and structural.requires_grad:
        raise ValueError("chunked_key_summary: the structural columns are fixed and get no gradient")
    dtype = dtype or embeddings.dtype
    return ChunkedKeySummary.apply(
        embeddings, structural, key_weight, projection, key_z, dtype, int(chunk_size), functions
    )


# ``compile: True`` compiles the attention with dynamic shapes around the fused Function, which runs eagerly (a
# graph break) with its chunk functions compiled on their own (ChunkFunctions(compile=True)): dynamo fails on the
# chunk loop over a symbolic number of rows. Eager chunk functions leave it traceable, so a whole step compiles
# (or is captured) as one graph.
eager_region_key_summary = torch.compiler.disable(chunked_key_summary)
