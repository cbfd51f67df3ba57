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

from recbole_mgformer.model.compilation import CompiledOrEager

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
    in that format, logits (h, r, m) in fp32 or the parameters' format (Eq. 7 in log space:
    ``w_i^T a - |a|^2 / 2``), values ``[V | 1]`` (h, r, k + 1)."""
    heads, accumulate = projection.shape[0], torch.promote_types(weight.dtype, torch.float32)
    tokens = tokens_and_ones[:, :-1]
    keys = _heads(tokens @ weight.T, heads)
    logits = (keys @ projection.transpose(-2, -1)).to(accumulate)
    # |a|^2 in one pass, accumulated in fp32 whatever the keys' format.
    logits.sub_(0.5 * torch.linalg.vector_norm(keys, dim=-1, keepdim=True, dtype=accumulate).square())
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


def _gated(features, sin, cos, dtype):
    """``[phi cos | phi sin]`` (Eq. 11) in the matmul format, (h, r, g m); ``phi`` alone without a mask. Each half
    is written by one multiplication straight into the matmul format: no fp32 copy, no concatenation."""
    if sin is None:
        return features.to(dtype)
    n_features = features.shape[-1]
    gated = features.new_empty(features.shape[:-1] + (2 * n_features,), dtype=dtype)
    torch.mul(features, cos, out=gated[..., :n_features])
    torch.mul(features, sin, out=gated[..., n_features:])
    return gated


def summary_of_chunk(tokens_and_ones, weight, projection, sin, cos, keep=False):
    """A chunk's key-side sums, shifted by its own maximum logit: -> sums (h, g m, k + 1) in fp32 (or the
    parameters' format), maximum (h,), and with ``keep`` what backward needs of the chunk (keys, features), else
    None."""
    _, keys, logits, values = _chunk_terms(tokens_and_ones, weight, projection)
    maximum = logits.amax(dim=(-2, -1))
    features = logits.sub_(maximum[:, None, None]).exp_()
    sums = _gated(features, sin, cos, projection.dtype).transpose(-2, -1) @ values
    return sums.to(logits.dtype), maximum, ((keys, features, maximum) if keep else None)


def _learned_value_gradients(gated, grad_summary, learned_columns):
    """``dV = gated dS[..., :k]`` of the learned token columns alone, (r, d): the structural columns get no
    gradient, so of a head that holds both only its learned columns are multiplied (half the matmul with one
    head). gated (h, r, g m), grad_summary (h, g m, k + 1)."""
    head_size = grad_summary.shape[-1] - 1
    heads = -(-learned_columns // head_size)  # the heads that hold a learned column
    columns = learned_columns if heads == 1 else head_size
    return _merge_heads(gated[:heads] @ grad_summary[:heads, :, :columns])[:, :learned_columns]


def gradients_of_chunk(tokens_and_ones, weight, projection, sin, cos, shift, grad_summary, learned_columns,
                       kept=None):
    """Backward of a chunk's share of the sums, with the features at the final ``shift`` (h,): recomputed, or
    from what :func:`summary_of_chunk` kept. grad_summary (h, g m, k + 1) in the matmul format -> gradients of
    the learned token columns (r, d), of the scaled weight (w, w), and of the angles ``a = pi z / 4`` (r,)
    (None without a mask)."""
    matmul_dtype, n_features = projection.dtype, projection.shape[1]
    if kept is None:
        tokens_mm, keys, logits, values = _chunk_terms(tokens_and_ones, weight, projection)
        features = logits.sub_(shift[:, None, None]).exp_()  # phi, (h, r, m)
    else:
        keys, features, maximum = kept
        tokens_mm, _, _, values = _chunk_terms_without_features(tokens_and_ones, projection.shape[0])
        features = features * torch.exp(maximum - shift)[:, None, None]
    accumulate = features.dtype
    # S = gated^T [V | 1]  =>  d gated = [V | 1] dS^T,  dV = gated dS[..., :k]
    grad_gated = values @ grad_summary.transpose(-2, -1)  # (h, r, g m), the matmul format
    grad_values = _learned_value_gradients(_gated(features, sin, cos, matmul_dtype), grad_summary,
                                           learned_columns).to(accumulate)
    if sin is None:
        grad_features, grad_angle = grad_gated.to(accumulate), None
    else:  # the products read the matmul format and write fp32: no separate cast
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

    def __init__(self, compile=False, keep=False):
        self.keep = keep
        if compile:
            self.summary = CompiledOrEager(summary_of_chunk, "MGFormer key side", dynamic=False)
            self.gradients = CompiledOrEager(gradients_of_chunk, "MGFormer key side backward", dynamic=False)
        else:
            self.summary, self.gradients = summary_of_chunk, gradients_of_chunk


EAGER = ChunkFunctions()


def _gates(key_z, start, stop):
    """``sin(pi z / 4), cos(pi z / 4)`` of a chunk, (r, 1) each, or None, None without a mask."""
    if key_z is None:
        return None, None
    angle = (math.pi / 4) * key_z[start:stop].unsqueeze(-1)
    return torch.sin(angle), torch.cos(angle)


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
        weight = (key_weight * head_size ** -0.25).to(dtype)  # the k^-1/4 of apply_feature_map, folded into W_K
        projection_mm = projection.to(dtype)
        tokens = _tokens_and_ones(embeddings.detach(), structural, dtype)
        summary, shift, kept = None, None, []
        for start in range(0, len(embeddings), chunk_size):
            stop = start + chunk_size
            sums, maximum, chunk_kept = functions.summary(tokens[start:stop], weight,
                                                          projection_mm, *_gates(key_z, start, stop),
                                                          keep=functions.keep and any(ctx.needs_input_grad))
            kept.append(chunk_kept)
            if summary is None:
                summary, shift = sums, maximum
            else:  # both to the larger shift
                new_shift = torch.maximum(shift, maximum)
                summary = (summary * torch.exp(shift - new_shift)[:, None, None]
                           + sums * torch.exp(maximum - new_shift)[:, None, None])
                shift = new_shift
        # m^-1/2 of Eq. (7): with it the sums equal the unfused ones, whose shift includes 0.5 log m.
        shift = shift + 0.5 * math.log(n_features)
        ctx.save_for_backward(embeddings, key_weight, projection, key_z, shift)
        ctx.dtype, ctx.chunk_size, ctx.functions, ctx.kept, ctx.tokens = dtype, chunk_size, functions, kept, tokens
        return (summary * math.exp(-0.5 * math.log(n_features))).to(embeddings.dtype)

    @staticmethod
    def backward(ctx, grad_summary):
        embeddings, key_weight, projection, key_z, shift = ctx.saved_tensors
        dtype, chunk_size = ctx.dtype, ctx.chunk_size
        scale = projection.shape[-1] ** -0.25
        weight, projection_mm = (key_weight * scale).to(dtype), projection.to(dtype)
        grad_summary = grad_summary.to(dtype)
        grad_embeddings = torch.empty_like(embeddings)
        grad_weight = torch.zeros_like(key_weight)
        grad_z = torch.empty_like(key_z) if key_z is not None else None
        for index, start in enumerate(range(0, len(embeddings), chunk_size)):
            stop = start + chunk_size
            grad_tokens, grad_scaled_weight, grad_angle = ctx.functions.gradients(
                ctx.tokens[start:stop], weight, projection_mm, *_gates(key_z, start, stop),
                shift, grad_summary, embeddings.shape[1], ctx.kept[index])
            grad_embeddings[start:stop] = grad_tokens
            grad_weight += grad_scaled_weight
            if grad_z is not None:
                grad_z[start:stop] = (math.pi / 4) * grad_angle
        ctx.kept = ctx.tokens = None
        return grad_embeddings, None, grad_weight.mul_(scale), None, grad_z, None, None, None


# torch.compile of a model runs the fused Function eagerly (a graph break) and compiles what surrounds it: its
# chunk functions are compiled on their own (ChunkFunctions(compile=True)), and dynamo fails on its chunk loop.
@torch.compiler.disable
def chunked_key_summary(embeddings, structural, key_weight, projection, key_z=None, dtype=None,
                        chunk_size=DEFAULT_CHUNK_SIZE, functions=EAGER):
    """Key-side sums of Eq. (12) for the random feature maps (``prf``, ``orf``, ``simrf``), fused.

    embeddings (n, d) the learned token columns; structural (n, d') the fixed ones, or None; key_weight (w, w) as
    ``nn.Linear`` stores W_K; projection (h, m, k); key_z (n,) or None (no mask) -> (h, g m, k + 1).
    Equals :func:`recbole_mgformer.model.attention.key_summary` of the random features of the keys, the same
    ``(h, g m, k + 1)`` sums with the normaliser as the last column. ``dtype``: the matmuls' input format
    (``torch.bfloat16``, or None for the inputs' own); sums and exponentials stay in the inputs' format.
    ``functions``: :class:`ChunkFunctions`, eager or compiled.
    """
    if structural is not None and structural.requires_grad:
        raise ValueError("chunked_key_summary: the structural columns are fixed and get no gradient")
    dtype = dtype or embeddings.dtype
    return ChunkedKeySummary.apply(embeddings, structural, key_weight, projection, key_z, dtype, int(chunk_size),
                                   functions)
