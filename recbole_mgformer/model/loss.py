"""Training losses shared by this package's models: one implementation each.

The DirectAU loss (Wang et al., KDD 2022; Eq. (13) of the MGFormer paper) trains MGFormer and DirectAU;
BPR and InfoNCE train SimGCL and XSimGCL. Shapes: ``b`` rows in a batch, ``d`` embedding size.
"""

import torch
import torch.nn.functional as F


def alignment_loss(users, items):
    """``E ||h_u - h_i||^2`` over positive pairs: users (b, d), items (b, d), rows already L2-normalised."""
    return (users - items).pow(2).sum(dim=1).mean()


class _Uniformity(torch.autograd.Function):
    """``log mean_{i != j} exp(-t ||x_i - x_j||^2)`` with one Gram matmul forward and one backward.

    With ``K`` the kernel matrix off its diagonal and ``s`` its sum, ``ds/dx_i = -4t sum_j K_ij (x_i - x_j)``,
    so the gradient is ``-4t / s (rowsum(K) x - K x)``: autograd's form of the same loss takes two Gram-sized
    matmuls and several (b, b) temporaries in backward.
    """

    @staticmethod
    def forward(ctx, x, t, dtype):
        dtype = dtype or x.dtype
        squared_norms = x.pow(2).sum(dim=1)
        x_mm = x.to(dtype)
        gram = (x_mm @ x_mm.T).to(x.dtype)
        kernel = gram.mul_(2).sub_(squared_norms[:, None]).sub_(squared_norms[None, :]).clamp_max_(0)
        kernel = kernel.mul_(t).exp_().fill_diagonal_(0)  # exp(-t max(||x_i - x_j||^2, 0)), i != j
        total = kernel.sum()
        ctx.save_for_backward(x, kernel, total)
        ctx.t, ctx.dtype = t, dtype
        n = len(x)
        return (total / (n * (n - 1))).log()

    @staticmethod
    def backward(ctx, grad_output):
        x, kernel, total = ctx.saved_tensors
        kernel_times_x = (kernel.to(ctx.dtype) @ x.to(ctx.dtype)).to(x.dtype)
        grad = kernel.sum(dim=1, keepdim=True) * x - kernel_times_x
        return grad.mul_(grad_output * (-4 * ctx.t) / total), None, None


def uniformity_loss(x, t=2.0, dtype=None):
    """``log E exp(-t ||h - h'||^2)`` over the distinct pairs of rows of ``x`` (b, d).

    Squared distances come from one Gram matmul over all ordered pairs, the diagonal taken out (``torch.pdist``
    gives the same value, its backward about twice as slow on CPU). ``dtype``: the Gram matmuls' input format
    (``torch.bfloat16``, or None for ``x``'s own); the kernel and its sums stay in ``x``'s format.
    """
    return _Uniformity.apply(x, float(t), dtype)


def directau_loss(user_e, item_e, uniformity_weight, dtype=None):
    """``L_align + lambda * (L_uniform(users) + L_uniform(items))`` on L2-normalised outputs; ``dtype`` as in
    :func:`uniformity_loss`."""
    users, items = F.normalize(user_e, dim=-1), F.normalize(item_e, dim=-1)
    uniform = uniformity_loss(users, dtype=dtype) + uniformity_loss(items, dtype=dtype)
    return alignment_loss(users, items) + uniformity_weight * uniform


def bpr_loss(positive_scores, negative_scores):
    """``-log sigmoid(s_pos - s_neg)`` averaged over (b,) pairs, written as a softplus so it never hits log(0)."""
    return F.softplus(negative_scores - positive_scores).mean()


def info_nce_loss(view1, view2, temperature):
    """InfoNCE between two views (b, d) of the same b nodes: row i of each view is the positive pair,
    the other rows of ``view2`` are the negatives; similarities are cosines divided by ``temperature``."""
    logits = F.normalize(view1, dim=-1) @ F.normalize(view2, dim=-1).T / temperature
    return F.cross_entropy(logits, torch.arange(len(logits), device=logits.device))
