"""Training losses shared by this package's models: one implementation each.

The DirectAU loss (Wang et al., KDD 2022; Eq. (13) of the MGFormer paper) trains MGFormer and DirectAU;
BPR and InfoNCE train SimGCL, XSimGCL and SGL. Shapes: ``b`` rows in a batch, ``d`` embedding size, ``n`` nodes.
"""

import math

import torch
import torch.nn.functional as F


def alignment_loss(users, items):
    """``E ||h_u - h_i||^2`` over positive pairs: users (b, d), items (b, d), rows already L2-normalised."""
    return (users - items).pow(2).sum(dim=1).mean()


# Rows of the (b, b) kernel handled at once: a (256, 2048) block is 2 MiB in fp32, so its elementwise passes run
# in a core's L2 cache instead of streaming b^2 temporaries through memory.
UNIFORMITY_BLOCK_ROWS = 256


def uniformity_bytes_per_row(rows):
    """Memory of one row of a block over ``rows`` columns: the fp32 kernel row, its copy in the matmul format and
    the sums' share, at most 12 bytes a column (for ``uniformity_block_size: auto``)."""
    return 12 * rows


def _kernel_block(rows_mm, columns_mm, row_norms, column_norms, t):
    """``exp(-t max(||x_i - x_j||^2, 0))`` for the rows ``i`` of a block and the columns ``j`` from the block's
    first row on, zero where ``i == j``: rows_mm (..., r, d), columns_mm (..., c, d) in the matmul format, squared
    norms times ``t`` (..., r) and (..., c) in the loss's format -> (..., r, c)."""
    exponent = (rows_mm @ columns_mm.transpose(-2, -1)).to(row_norms.dtype)  # x_i . x_j
    exponent.mul_(2 * t).sub_(row_norms[..., :, None]).sub_(column_norms[..., None, :]).clamp_max_(0)
    kernel = exponent.exp_()
    kernel.diagonal(dim1=-2, dim2=-1).zero_()
    return kernel


def _blocked_sums(x, x_mm, norms, t, dtype, block_rows, wants_gradient):
    """``rowsum(K)`` (b,) and ``K x`` (b, d) (None without ``wants_gradient``) of one matrix x (b, d), in blocks
    of ``block_rows`` rows, each made from its diagonal block on (``K`` is symmetric)."""
    row_sums = x.new_zeros(len(x))
    kernel_times_x = torch.zeros_like(x) if wants_gradient else None
    for start in range(0, len(x), block_rows):
        stop = min(start + block_rows, len(x))
        kernel = _kernel_block(x_mm[start:stop], x_mm[start:], norms[start:stop], norms[start:], t)
        beyond = kernel[:, stop - start :]  # (r, b - stop), the columns right of the diagonal block
        row_sums[start:stop] += kernel.sum(dim=1)
        row_sums[stop:] += beyond.sum(dim=0)
        if wants_gradient:
            kernel_mm = kernel.to(dtype)
            kernel_times_x[start:stop] += kernel_mm @ x_mm[start:]
            kernel_times_x[stop:] += kernel_mm[:, stop - start :].T @ x_mm[start:stop]
    return row_sums, kernel_times_x


class _Uniformity(torch.autograd.Function):
    """``log mean_{i != j} exp(-t ||x_i - x_j||^2)`` of each of ``g`` matrices, forward and gradient in one pass
    over row blocks.

    With ``K`` the kernel matrix off its diagonal and ``s`` its sum, ``ds/dx_i = -4t sum_j K_ij (x_i - x_j)``,
    so the gradient is ``-4t / s (rowsum(K) x - K x)``. Each block of rows of ``K`` is made, summed and multiplied
    by ``x`` while it is in cache; only ``rowsum(K)`` (g, b) and ``K x`` (g, b, d) are kept for backward, never
    ``K``. ``K`` is symmetric, so a block of rows is made only from its diagonal block on: the part right of the
    diagonal block serves its rows and, transposed, the rows of its columns (half the Gram matmul and the
    exponentials, the same ``K x`` work). With one block (a GPU's choice) all ``g`` matrices are made at once,
    a few batched kernels in all.
    """

    @staticmethod
    def forward(ctx, x, t, dtype, block_rows):
        dtype = dtype or x.dtype
        n = x.shape[-2]
        norms = x.pow(2).sum(dim=-1).mul_(t)  # t ||x_i||^2, (g, b)
        x_mm = x.to(dtype)
        wants_gradient = ctx.needs_input_grad[0]
        if block_rows >= n:
            kernel = _kernel_block(x_mm, x_mm, norms, norms, t)  # (g, b, b)
            row_sums = kernel.sum(dim=-1)
            kernel_times_x = kernel.to(dtype) @ x_mm if wants_gradient else None
        else:  # each matrix apart, so that a block stays cache-sized
            parts = [
                _blocked_sums(x[i], x_mm[i], norms[i], t, dtype, block_rows, wants_gradient) for i in range(len(x))
            ]
            row_sums = torch.stack([row_sum for row_sum, _ in parts])
            kernel_times_x = torch.stack([product for _, product in parts]) if wants_gradient else None
        totals = row_sums.sum(dim=-1)  # (g,)
        if wants_gradient:
            ctx.save_for_backward(x, row_sums, kernel_times_x, totals)
        ctx.t = t
        return (totals / (n * (n - 1))).log()

    @staticmethod
    def backward(ctx, grad_output):
        x, row_sums, kernel_times_x, totals = ctx.saved_tensors
        grad = row_sums[..., None] * x - kernel_times_x
        return grad.mul_((grad_output * (-4 * ctx.t) / totals)[:, None, None]), None, None, None


def uniformity_loss(x, t=2.0, dtype=None, block_rows=UNIFORMITY_BLOCK_ROWS):
    """``log E exp(-t ||h - h'||^2)`` over the distinct pairs of rows of ``x`` (b, d) -> (), or of each matrix
    of ``x`` (g, b, d) -> (g,).

    Squared distances come from Gram matmuls over all ordered pairs, in blocks of ``block_rows`` rows, the diagonal
    taken out (``torch.pdist`` gives the same value, its backward about twice as slow on CPU). ``dtype``: the
    matmuls' input format (``torch.bfloat16``, or None for ``x``'s own); the kernel and its sums stay in ``x``'s.
    """
    if block_rows < 1:
        raise ValueError(f"uniformity_loss: block_rows must be positive, got {block_rows}")
    if x.dim() == 2:
        return _Uniformity.apply(x.unsqueeze(0), float(t), dtype, int(block_rows))[0]
    return _Uniformity.apply(x, float(t), dtype, int(block_rows))


def directau_loss(user_e, item_e, uniformity_weight, dtype=None, block_rows=UNIFORMITY_BLOCK_ROWS):
    """``L_align + lambda * (L_uniform(users) + L_uniform(items))`` on L2-normalised outputs, user_e and item_e
    (b, d); ``dtype`` and ``block_rows`` as in :func:`uniformity_loss`."""
    return directau_loss_of_pairs(torch.stack([user_e, item_e]), uniformity_weight, dtype, block_rows)


def directau_loss_of_pairs(pairs, uniformity_weight, dtype=None, block_rows=UNIFORMITY_BLOCK_ROWS):
    """:func:`directau_loss` of pairs (2, b, d), users then items: both sides normalised and their uniformity
    terms made together (on a GPU half the kernel launches of two calls)."""
    normalized = F.normalize(pairs, dim=-1)
    uniform = uniformity_loss(normalized, dtype=dtype, block_rows=block_rows).sum()
    return alignment_loss(normalized[0], normalized[1]) + uniformity_weight * uniform


def uniformity_of_repeated_rows(x, counts, t=2.0):
    """``log E exp(-t ||h - h'||^2)`` over the pairs of the multiset in which row ``i`` of ``x`` (u, d) appears
    ``counts[i]`` times (u,), less the pairs of a row with its own copies:
    ``log(sum_{i != j} c_i c_j K_ij / sum_{i != j} c_i c_j)``. A batch of whole users (``train_protocol: user``)
    holds user ``i`` once for its ``c_i`` pairs; weighting it ``c_i`` gives its pairs' users the uniformity a batch
    of RecBole's random pairs gives them, where a user seldom appears twice. The (u, u) kernel is made whole: u is a
    batch's users. Needs two rows or more."""
    norms = x.pow(2).sum(dim=-1)
    squared = (norms[:, None] + norms[None, :] - 2 * x @ x.T).clamp_min(0)
    weights = (counts[:, None] * counts[None, :]).fill_diagonal_(0)
    return ((weights * torch.exp(-t * squared)).sum() / weights.sum()).log()


def uniformity_of_users_and_items(users, items, dtype=None, block_rows=UNIFORMITY_BLOCK_ROWS, user_counts=None):
    """DirectAU's two uniformity terms, of users (u, d) and of items (p, d), on L2-normalised rows, summed: what
    MGFormer's ``loss: softmax`` adds to its cross-entropy, with its weight, in place of DirectAU's alignment. With
    ``user_counts`` (u,), each user stands for that many pairs (:func:`uniformity_of_repeated_rows`). A side with one
    row has no pair of rows: its term is 0. Sides of one length are one call."""
    if user_counts is None and len(users) == len(items) > 1:
        sides = F.normalize(torch.stack([users, items]), dim=-1)
        return uniformity_loss(sides, dtype=dtype, block_rows=block_rows).sum()
    terms = []
    if len(users) > 1:
        users = F.normalize(users, dim=-1)
        if user_counts is None:
            terms.append(uniformity_loss(users, dtype=dtype, block_rows=block_rows))
        else:
            terms.append(uniformity_of_repeated_rows(users, user_counts))
    if len(items) > 1:
        terms.append(uniformity_loss(F.normalize(items, dim=-1), dtype=dtype, block_rows=block_rows))
    return sum(terms, users.new_zeros(()))


def bpr_loss(positive_scores, negative_scores):
    """``-log sigmoid(s_pos - s_neg)`` averaged over (b,) pairs, written as a softplus so it never hits log(0)."""
    return F.softplus(negative_scores - positive_scores).mean()


def distinct_ids(ids):
    """``ids`` (b,) sorted, and a (b,) mask of the repeats, each equal id but the first of its run: what leaves
    ``torch.unique``'s distinct ids at a fixed shape, where ``unique`` sizes its output by the data (a host sync
    on a GPU)."""
    ids = torch.sort(ids).values
    repeats = torch.zeros_like(ids, dtype=torch.bool)
    repeats[1:] = ids[1:] == ids[:-1]
    return ids, repeats


def info_nce_loss(view1, view2, temperature, left_out=None):
    """InfoNCE between two views (b, d) of the same b nodes: row i of each view is the positive pair,
    the other rows of ``view2`` are the negatives; similarities are cosines divided by ``temperature``.

    ``left_out`` (b,) bool, when given, takes its rows out: such a row is no anchor (the mean skips it) and no
    negative (no denominator has it), so the loss is that of ``view1[~left_out]`` and ``view2[~left_out]``."""
    logits = F.normalize(view1, dim=-1) @ F.normalize(view2, dim=-1).T / temperature  # (b, b)
    targets = torch.arange(len(logits), device=logits.device)
    if left_out is not None:  # its columns at -inf, its rows' targets ignored
        logits, targets = logits.masked_fill(left_out, float("-inf")), targets.masked_fill(left_out, -100)
    return F.cross_entropy(logits, targets, ignore_index=-100)


class _SumOfExponentials(torch.autograd.Function):
    """``exp(anchors @ candidates^T).sum(-1)`` with one (b, n) buffer: the exponentials overwrite the scores,
    and the backward scales them in place, where autograd's ``matmul``, ``div`` and ``exp`` each keep a (b, n)
    tensor and make a pass over it (``experiments/recbole_step.py`` times SGL's step both ways). The caller keeps the
    scores bounded (cosines over a temperature), so no maximum is subtracted."""

    @staticmethod
    def forward(ctx, anchors, candidates):
        exponentials = (anchors @ candidates.T).exp_()
        ctx.save_for_backward(anchors, candidates, exponentials)
        return exponentials.sum(dim=-1)

    @staticmethod
    def backward(ctx, grad):
        anchors, candidates, exponentials = ctx.saved_tensors
        weights = exponentials.mul_(grad[:, None])  # d sum / d score = the exponential; used once, so in place
        return weights @ candidates, weights.T @ anchors


def info_nce_over_all_nodes(anchors, positives, candidates, temperature):
    """SGL's InfoNCE, summed over the batch: ``sum_b log(sum_j exp(s(a_b, c_j) / t)) - s(a_b, p_b) / t`` with
    cosine similarities ``s``; anchors (b, d) and positives (b, d) are the batch's nodes in two views, and the
    negatives are every node of the second view, candidates (n, d)."""
    anchors, positives, candidates = (F.normalize(x, dim=-1) for x in (anchors, positives, candidates))
    scaled = anchors / temperature
    return (_SumOfExponentials.apply(scaled, candidates).log() - (scaled * positives).sum(dim=-1)).sum()


# Bytes of the (b, c) logits handled at once: a 2 MiB block of rows stays in a core's L2 cache from its matmul
# through the softmax to its gradient, where a whole (b, c) buffer would stream through memory at every pass.
CROSS_ENTROPY_BLOCK_BYTES = 2 << 20
LOG2E, LN2 = 1.0 / math.log(2.0), math.log(2.0)


def cross_entropy_block_rows(classes):
    """Rows of a block of the full-class logits: :data:`CROSS_ENTROPY_BLOCK_BYTES` of fp32, at least one row."""
    return max(1, CROSS_ENTROPY_BLOCK_BYTES // (4 * classes))


def row_spread(x):
    """The standard deviation of each row of ``x`` (r, c) -> (r, 1), over c (no correction): the centred rows'
    norms over sqrt(c). On x86 CPUs torch's ``std`` over the rows of a block of logits is many times slower; it
    was most of the residual's cost in the blocked loss."""
    return torch.linalg.vector_norm(x - x.mean(dim=1, keepdim=True), dim=1, keepdim=True).div_(math.sqrt(x.shape[1]))


class _LinearCrossEntropy(torch.autograd.Function):
    """``F.cross_entropy(F.linear(hidden, weight, bias), target)`` a block of rows at a time: each block's logits
    become its softmax, its share of the loss and the logits' gradient ``(softmax - onehot) / b`` while in cache,
    and the gradients of hidden, weight and bias are formed in the forward (the loss is a scalar: the backward only
    scales them). Torch's pair streams four (b, c) tensors through memory (log-softmax, its exponential in the
    backward, the NLL's scattered gradient and the log-softmax's), which on a full-item loss (c = every item) costs
    more than the matmuls. The softmax runs in base 2 (``exp2`` of the logits scaled by log2(e): the same function
    to fp32 rounding, and on x86 CPUs torch's ``exp2`` is about three times faster than its ``exp``, the loss's
    largest cost after the matmuls). With ``dtype`` bf16 the three matmuls take bf16 inputs (fp32 sums); the
    softmax, the loss and the gradients' sums stay fp32. With ``residual`` (b, c), each row of ``hidden @ weight.T``
    gains ``residual_weight`` times its own standard deviation (no gradient) times the residual's row, before the
    bias: MGFormer's hybrid trained as one model (``model/filter_residual.py``). With ``rows`` (p,), ascending, the
    p targets are pairs ``(rows[j], target[j])``: a row's logits are made once for all of its targets, and the
    loss is the mean over the pairs (a row with ``k`` targets: ``k`` times its log-sum-exp, less their logits)."""

    @staticmethod
    def forward(ctx, hidden, weight, bias, target, dtype, wants_grad, residual, residual_weight, rows):
        b, pairs = len(hidden), len(target)
        hidden_mm, weight_mm = hidden.to(dtype), weight.to(dtype)
        loss = torch.zeros((), device=hidden.device)
        hidden_grad = torch.empty_like(hidden) if wants_grad else None
        weight_grad = torch.zeros(weight.shape, device=weight.device) if wants_grad else None  # fp32 sums
        bias_grad = torch.zeros_like(bias) if wants_grad and bias is not None and bias.requires_grad else None
        # the logits in base-2 units (times log2(e)): fp32 folds the scale into hidden's k columns; bf16 scales
        # after the matmul, so that its inputs are rounded exactly as the unscaled ones
        folded = hidden_mm.dtype == torch.float32
        hidden_logits = hidden_mm * LOG2E if folded else hidden_mm
        bias_logits = None if bias is None else bias * LOG2E
        block_rows = cross_entropy_block_rows(weight.shape[0])
        starts = range(0, b, block_rows)
        if rows is None:  # one target a row: a block's targets are its rows'
            bounds = [*starts, b]
        else:  # each block's pairs, and each row's number of targets; one host sync a step
            bounds = torch.searchsorted(rows, torch.tensor([*starts, b], device=rows.device)).tolist()
            targets_per_row = torch.bincount(rows, minlength=b).unsqueeze(1).float()
        for index, start in enumerate(starts):
            block = slice(start, start + block_rows)
            logits = hidden_logits[block] @ weight_mm.T  # (r, c), base 2
            if not folded:
                logits = logits.float().mul_(LOG2E)
            if residual is not None:  # the spread scales with the logits, so base 2 changes nothing
                logits.addcmul_(residual[block], row_spread(logits).mul_(residual_weight))
            if bias_logits is not None:
                logits.add_(bias_logits)  # in place: addmm would first copy the bias into every row
            block_pairs = slice(bounds[index], bounds[index + 1])
            if rows is None:
                pair_index = (target[block_pairs, None],)  # (r, 1): gather and scatter along the columns
                picked = logits.gather(1, *pair_index)
            else:
                pair_index = (rows[block_pairs] - start, target[block_pairs])
                picked = logits[pair_index]
            peak = logits.amax(dim=1, keepdim=True)
            probabilities = logits.sub_(peak).exp2_()  # exp(logit - max), in place
            total = probabilities.sum(dim=1, keepdim=True)
            log_sum_exp = total.log() + peak * LN2
            if rows is not None:
                log_sum_exp = log_sum_exp * targets_per_row[block]
            loss += log_sum_exp.sum() - picked.sum() * LN2  # log-sum-exp minus the target's logit
            if not wants_grad:
                continue
            # softmax * targets of the row / pairs, less 1 / pairs at each target
            scale = total.reciprocal_().div_(pairs)
            logits_grad = probabilities.mul_(scale if rows is None else scale.mul_(targets_per_row[block]))
            if rows is None:
                logits_grad.scatter_add_(1, *pair_index, logits_grad.new_full(picked.shape, -1.0 / pairs))
            else:
                logits_grad.index_put_(pair_index, logits_grad.new_full(picked.shape, -1.0 / pairs), accumulate=True)
            if bias_grad is not None:
                bias_grad += logits_grad.sum(dim=0)
            logits_grad = logits_grad.to(dtype)
            hidden_grad[block] = logits_grad @ weight_mm
            weight_grad += logits_grad.T @ hidden_mm[block]
        ctx.save_for_backward(hidden_grad, weight_grad, bias_grad)
        ctx.weight_dtype = weight.dtype
        return loss / pairs

    @staticmethod
    def backward(ctx, grad):
        hidden_grad, weight_grad, bias_grad = ctx.saved_tensors
        if hidden_grad is None:
            raise RuntimeError("linear_cross_entropy ran without gradients (torch.no_grad): it has no backward")
        return (
            hidden_grad * grad,
            (weight_grad * grad).to(ctx.weight_dtype),
            None if bias_grad is None else bias_grad * grad,
            None,
            None,
            None,
            None,
            None,
            None,
        )


def linear_cross_entropy(
    hidden, weight, bias, target, dtype=torch.float32, residual=None, residual_weight=0.0, rows=None
):
    """The mean cross-entropy of ``hidden @ weight.T + bias`` against ``target``: hidden (b, k), weight (c, k),
    bias (c,) or None, target (b,) class ids -> scalar; the same function and gradients as ``F.cross_entropy`` of
    ``F.linear`` (no ignored index, no label smoothing), in less memory traffic. ``dtype`` (bf16) is the matmuls'
    input format (:mod:`recbole_mgformer.model.precision`); the softmax, the loss and the gradients' sums are fp32.
    ``residual`` (b, c), any float dtype, or None: the logits ``s = hidden @ weight.T`` become
    ``s + residual_weight * std(s, per row, no gradient) * residual + bias``. ``rows`` (p,) or None: target (p,)
    holds ``p`` targets, ``target[j]`` of row ``rows[j]`` (any order), and the loss is the mean over them, the
    cross-entropy of ``hidden[rows]``'s logits with each row's logits made once. Without gradients
    (``torch.no_grad``, or no input requiring them) only the loss is computed."""
    wants_grad = torch.is_grad_enabled() and any(x is not None and x.requires_grad for x in (hidden, weight, bias))
    residual = residual if residual is not None and residual_weight else None
    if rows is not None:  # the pairs in row order, so that a block of rows has a range of them
        rows, order = torch.sort(rows, stable=True)
        target = target[order]
    return _LinearCrossEntropy.apply(
        hidden, weight, bias, target, dtype, wants_grad, residual, float(residual_weight), rows
    )
