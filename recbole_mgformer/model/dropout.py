"""Dropout with the distribution of ``torch.nn.functional.dropout`` and less of its cost on CPUs.

On CPUs ``F.dropout`` fills a float tensor through ``bernoulli_`` (a slow sampling path: several times the cost of
drawing uniforms), divides it by ``1 - p`` and multiplies. Here each element is kept when a uniform draw
``torch.rand`` (24 random bits) is at least ``p``, so it is kept with probability ``1 - p`` (to 2^-24) independently
of every other, as there, and the kept elements are scaled by ``1 / (1 - p)``, as there. The mask is drawn from the
default generator (``torch.manual_seed`` and RecBole's ``init_seed`` seed it), or from ``generator``.
"""

import torch


def keep_scale(shape, p, dtype=torch.float32, device=None, generator=None):
    """``1 / (1 - p)`` where an element is kept (probability ``1 - p``, independently), else 0: (shape), dtype."""
    keep = torch.rand(shape, device=device, generator=generator) >= p
    return keep.to(dtype).mul_(1.0 / (1.0 - p))


def dropout(x, p, training, generator=None):
    """``F.dropout(x, p, training)`` in distribution; the backward multiplies by the same mask."""
    if not training or p == 0.0:
        return x
    if p == 1.0:
        return torch.zeros_like(x)
    return x * keep_scale(x.shape, p, x.dtype, x.device, generator)
