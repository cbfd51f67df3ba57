"""Feature maps ``phi`` for kernelised attention, as small pure functions.

Shapes: ``n`` tokens, ``k`` the size of one query/key vector, ``m`` random features.
Random projections are drawn from an explicit ``torch.Generator``; nothing here keeps state.
"""

import math

import torch
import torch.nn.functional as F

RANDOM_FEATURE_MAPS = ("simrf", "orf", "prf")
DETERMINISTIC_FEATURE_MAPS = ("elu", "relu", "focused")
FEATURE_MAPS = RANDOM_FEATURE_MAPS + DETERMINISTIC_FEATURE_MAPS


def haar_orthogonal(k, generator, dtype=torch.float32):
    """A ``(k, k)`` orthogonal matrix drawn from the Haar measure on O(k)."""
    gaussian = torch.randn(k, k, generator=generator, dtype=torch.float64)
    q, r = torch.linalg.qr(gaussian)
    # Multiplying by the signs of diag(R) makes the QR factorisation unique, hence Haar-distributed.
    return (q * torch.sign(torch.diagonal(r))).to(dtype)


def simplex_matrix(k, dtype=torch.float32):
    """The ``(k, k)`` simplex projection S of Eq. (7): unit rows with pairwise dot products -1/(k-1)."""
    if k < 2:
        raise ValueError(f"simplex random features need a query/key size of at least 2, got {k}")
    ones_but_last = torch.ones(k, dtype=torch.float64)
    ones_but_last[-1] = 0.0
    rows = math.sqrt(k / (k - 1)) * torch.eye(k, dtype=torch.float64)
    rows = rows - (math.sqrt(k) + 1) / (k - 1) ** 1.5 * ones_but_last
    rows[-1] = ones_but_last / math.sqrt(k - 1)
    return rows.to(dtype)


def chi_norms(count, k, generator, dtype=torch.float32):
    """``count`` samples of the chi(k) distribution: norms of k-dimensional standard Gaussians."""
    return torch.randn(count, k, generator=generator, dtype=torch.float64).norm(dim=1).to(dtype)


def draw_projection(kind, n_features, k, generator, dtype=torch.float32):
    """Random projection ``W`` of shape ``(m, k)`` whose rows are marginally N(0, I_k).

    ``prf``: i.i.d. Gaussian rows. ``orf``: ``D R_o``, orthogonal rows with chi(k) norms.
    ``simrf``: ``D S R_o`` (Eq. 7), rows pointing at the vertices of a randomly rotated simplex.
    For ``m > k`` independent blocks of ``k`` rows are stacked; for ``m < k`` the first rows are kept.
    """
    if kind == "prf":
        return torch.randn(n_features, k, generator=generator, dtype=dtype)
    if kind not in ("orf", "simrf"):
        raise ValueError(f"unknown random feature map {kind!r}; choose one of {RANDOM_FEATURE_MAPS}")
    blocks = []
    for _ in range(math.ceil(n_features / k)):
        rotation = haar_orthogonal(k, generator, dtype)
        directions = simplex_matrix(k, dtype) @ rotation if kind == "simrf" else rotation
        blocks.append(chi_norms(k, k, generator, dtype)[:, None] * directions)
    return torch.cat(blocks)[:n_features]


def random_feature_logits(x, projection, dtype=None):
    """Logarithm of Eq. (7) without its ``m^-1/2`` factor: ``w_i^T a - |a|^2 / 2``; the one log-space form of the
    random features, which :func:`positive_random_features` and the fused key side (key_summary.py) share.

    ``x``: (..., n, k), ``projection``: (..., m, k), both in the matmul's format -> (..., n, m) in ``dtype``
    (default: that format; the fused key side multiplies in bf16 and sums in fp32).
    """
    logits = x @ projection.transpose(-2, -1)
    if dtype is not None:
        logits = logits.to(dtype)
    # In place: the matmul's backward needs its inputs, not its output, so no (n, m) copy is made.
    return logits.sub_(0.5 * x.to(logits.dtype).pow(2).sum(-1, keepdim=True))


def shifted_exp(logits, shift):
    """``exp(logits - shift)`` in place: random features from their logits, shifted so that nothing overflows."""
    return logits.sub_(shift).exp_()


def positive_random_features(x, projection, is_query):
    """Eq. (7): ``phi(a) = m^-1/2 exp(-|a|^2/2) [exp(w_1^T a), ..., exp(w_m^T a)]``, (..., n, m),
    so that ``E[phi(a)^T phi(b)] = exp(a^T b)``.

    A detached maximum is subtracted from the exponent, per row for queries and over all keys
    for keys, so nothing overflows; both factors cancel in the ratio of Eq. (8). The ``m^-1/2``
    factor joins that subtraction, and the exponential is taken in place, so the only (n, m)
    tensor built is the output.
    """
    logits = random_feature_logits(x, projection)
    dims = -1 if is_query else (-2, -1)
    shift = logits.detach().amax(dim=dims, keepdim=True) + 0.5 * math.log(projection.shape[-2])
    return shifted_exp(logits, shift)


def elu_features(x):
    """``1 + elu(x)``, the map of linear transformers (Katharopoulos et al., 2020)."""
    return F.elu(x) + 1.0


def relu_features(x):
    """``relu(x)``, as in cosFormer."""
    return F.relu(x)


def focused_features(x, focusing_factor=3.0, eps=1e-6):
    """Focused linear attention (FLatten, Han et al., 2023): ``|r| / |r^p| * r^p`` with ``r = relu(x)``.

    Raising to the power p sharpens the direction of each vector while keeping its norm.
    """
    r = F.relu(x) + eps
    powered = r.pow(focusing_factor)
    return powered * (r.norm(dim=-1, keepdim=True) / powered.norm(dim=-1, keepdim=True))


def apply_feature_map(kind, x, projection=None, is_query=False, focusing_factor=3.0):
    """Dispatch on ``kind``; random maps first scale ``x`` by ``k^-1/4`` so that
    ``phi(q)^T phi(k)`` estimates the softmax kernel ``exp(q^T k / sqrt(k))`` of Eq. (1)."""
    if kind in RANDOM_FEATURE_MAPS:
        scaled = x * x.shape[-1] ** -0.25
        return positive_random_features(scaled, projection, is_query)
    if kind == "elu":
        return elu_features(x)
    if kind == "relu":
        return relu_features(x)
    if kind == "focused":
        return focused_features(x, focusing_factor)
    raise ValueError(f"unknown feature_map {kind!r}; choose one of {', '.join(FEATURE_MAPS)}")
