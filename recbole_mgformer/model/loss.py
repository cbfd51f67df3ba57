"""The DirectAU loss (Wang et al., KDD 2022), Eq. (13) of the MGFormer paper.

Shared by every model of this package that trains with alignment and uniformity.
"""

import torch.nn.functional as F


def alignment_loss(users, items):
    """``E ||h_u - h_i||^2`` over positive pairs: users (b, d), items (b, d), rows already L2-normalised."""
    return (users - items).pow(2).sum(dim=1).mean()


def uniformity_loss(x, t=2.0):
    """``log E exp(-t ||h - h'||^2)`` over the distinct pairs of rows of ``x`` (b, d)."""
    return F.pdist(x, p=2).pow(2).mul(-t).exp().mean().log()


def directau_loss(user_e, item_e, uniformity_weight):
    """``L_align + lambda * (L_uniform(users) + L_uniform(items))`` on L2-normalised outputs."""
    users, items = F.normalize(user_e, dim=-1), F.normalize(item_e, dim=-1)
    uniform = uniformity_loss(users) + uniformity_loss(items)
    return alignment_loss(users, items) + uniformity_weight * uniform
