"""Training losses shared by this package's models: one implementation each.

The DirectAU loss (Wang et al., KDD 2022; Eq. (13) of the MGFormer paper) trains MGFormer and DirectAU;
BPR and InfoNCE train SimGCL and XSimGCL. Shapes: ``b`` rows in a batch, ``d`` embedding size.
"""

import torch
import torch.nn.functional as F


def alignment_loss(users, items):
    """``E ||h_u - h_i||^2`` over positive pairs: users (b, d), items (b, d), rows already L2-normalised."""
    return (users - items).pow(2).sum(dim=1).mean()


def uniformity_loss(x, t=2.0):
    """``log E exp(-t ||h - h'||^2)`` over the distinct pairs of rows of ``x`` (b, d).

    Squared distances come from one Gram matmul over all ordered pairs, the diagonal taken out:
    ``torch.pdist`` gives the same value, and its backward is about twice as slow on CPU.
    """
    squared_norms = x.pow(2).sum(dim=1)
    squared = (squared_norms[:, None] + squared_norms[None, :] - 2 * x @ x.T).clamp_min(0)
    kernel = squared.mul(-t).exp()
    n = len(x)
    return ((kernel.sum() - kernel.diagonal().sum()) / (n * (n - 1))).log()


def directau_loss(user_e, item_e, uniformity_weight):
    """``L_align + lambda * (L_uniform(users) + L_uniform(items))`` on L2-normalised outputs."""
    users, items = F.normalize(user_e, dim=-1), F.normalize(item_e, dim=-1)
    uniform = uniformity_loss(users) + uniformity_loss(items)
    return alignment_loss(users, items) + uniformity_weight * uniform


def bpr_loss(positive_scores, negative_scores):
    """``-log sigmoid(s_pos - s_neg)`` averaged over (b,) pairs, written as a softplus so it never hits log(0)."""
    return F.softplus(negative_scores - positive_scores).mean()


def info_nce_loss(view1, view2, temperature):
    """InfoNCE between two views (b, d) of the same b nodes: row i of each view is the positive pair,
    the other rows of ``view2`` are the negatives; similarities are cosines divided by ``temperature``."""
    logits = F.normalize(view1, dim=-1) @ F.normalize(view2, dim=-1).T / temperature
    return F.cross_entropy(logits, torch.arange(len(logits), device=logits.device))
