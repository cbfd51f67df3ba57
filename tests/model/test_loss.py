import itertools
import math
from unittest.mock import patch

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from recbole_mgformer.model import loss as loss_module
from recbole_mgformer.model.loss import (
    alignment_loss,
    bpr_loss,
    directau_loss,
    directau_loss_of_pairs,
    distinct_ids,
    info_nce_loss,
    info_nce_over_all_nodes,
    linear_cross_entropy,
    row_spread,
    uniformity_loss,
    uniformity_of_repeated_rows,
)


def blocks_of(rows, classes):
    """``with blocks_of(rows, classes):`` the blocked cross-entropy over ``classes`` makes ``rows`` rows a block."""
    return patch.object(loss_module, "CROSS_ENTROPY_BLOCK_BYTES", 4 * classes * rows)


def direct_uniformity(x):
    pairs = list(itertools.combinations(range(len(x)), 2))
    return math.log(sum(math.exp(-2 * float((x[i] - x[j]).pow(2).sum())) for i, j in pairs) / len(pairs))


@settings(max_examples=40, deadline=None)
@given(counts=st.lists(st.integers(1, 4), min_size=2, max_size=6), seed=st.integers(0, 2**16))
def test_the_uniformity_of_repeated_rows_is_that_of_the_multiset_less_each_rows_own_copies(counts, seed):
    """Row i stands for counts[i] copies: the mean kernel over the multiset's pairs of copies of different rows,
    written out pair by pair, and its gradient."""
    x = torch.nn.functional.normalize(
        torch.randn(len(counts), 3, generator=torch.Generator().manual_seed(seed)), dim=-1
    )
    ours_x, exact_x = x.clone().requires_grad_(), x.double().requires_grad_()
    ours = uniformity_of_repeated_rows(ours_x, torch.tensor(counts, dtype=torch.float32))
    copies = [i for i, count in enumerate(counts) for _ in range(count)]
    pairs = [(a, b) for a, b in itertools.permutations(range(len(copies)), 2) if copies[a] != copies[b]]
    kernel = [torch.exp(-2 * (exact_x[copies[a]] - exact_x[copies[b]]).pow(2).sum()) for a, b in pairs]
    exact = torch.log(torch.stack(kernel).mean())
    torch.testing.assert_close(ours.double(), exact, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(
        torch.autograd.grad(ours, ours_x)[0].double(), torch.autograd.grad(exact, exact_x)[0], rtol=1e-4, atol=1e-5
    )
    ones = uniformity_of_repeated_rows(x, torch.ones(len(counts)))
    torch.testing.assert_close(ones, uniformity_loss(x), rtol=1e-5, atol=1e-6)  # once each: the plain uniformity


def test_directau_loss_equals_eq_13_written_out():
    g = torch.Generator().manual_seed(0)
    users = torch.randn(6, 4, generator=g, dtype=torch.float64)
    items = torch.randn(6, 4, generator=g, dtype=torch.float64)
    u = users / users.norm(dim=1, keepdim=True)
    i = items / items.norm(dim=1, keepdim=True)
    align = sum(float((u[k] - i[k]).pow(2).sum()) for k in range(6)) / 6
    expected = align + 0.7 * (direct_uniformity(u) + direct_uniformity(i))
    assert math.isclose(float(directau_loss(users, items, 0.7)), expected, rel_tol=1e-9)
    assert math.isclose(float(alignment_loss(u, i)), align, rel_tol=1e-9)
    assert math.isclose(float(uniformity_loss(u)), direct_uniformity(u), rel_tol=1e-9)


def test_directau_loss_is_scale_invariant():
    g = torch.Generator().manual_seed(1)
    users, items = torch.randn(5, 3, generator=g), torch.randn(5, 3, generator=g)
    torch.testing.assert_close(directau_loss(users, items, 1.0), directau_loss(10 * users, 0.1 * items, 1.0))


def test_bpr_loss_is_minus_log_sigmoid_of_the_margin():
    positive = torch.tensor([2.0, -1.0, 0.5, 40.0], dtype=torch.float64)
    negative = torch.tensor([1.0, 1.0, 0.5, -40.0], dtype=torch.float64)
    expected = sum(-math.log(1 / (1 + math.exp(-(p - n)))) for p, n in zip(positive.tolist(), negative.tolist())) / 4
    assert math.isclose(float(bpr_loss(positive, negative)), expected, rel_tol=1e-12)


def test_info_nce_loss_equals_its_formula_written_out():
    g = torch.Generator().manual_seed(2)
    view1 = torch.randn(5, 3, generator=g, dtype=torch.float64)
    view2 = torch.randn(5, 3, generator=g, dtype=torch.float64)
    tau = 0.2

    def cos(a, b):
        return float(a @ b / (a.norm() * b.norm()))

    terms = []
    for i in range(5):
        numerator = math.exp(cos(view1[i], view2[i]) / tau)
        denominator = sum(math.exp(cos(view1[i], view2[j]) / tau) for j in range(5))
        terms.append(-math.log(numerator / denominator))
    assert math.isclose(float(info_nce_loss(view1, view2, tau)), sum(terms) / 5, rel_tol=1e-9)


def unique_info_nce(view1, view2, ids, tau):
    """SimGCL's contrastive term as it was: InfoNCE over ``torch.unique(ids)``, a data-sized batch."""
    distinct = torch.unique(ids)
    return info_nce_loss(view1[distinct], view2[distinct], tau)


def test_distinct_ids_mark_every_repeat_once_sorted():
    ids, repeats = distinct_ids(torch.tensor([4, 1, 4, 4, 0, 1, 7]))
    assert ids.tolist() == [0, 1, 1, 4, 4, 4, 7]
    assert repeats.tolist() == [False, False, True, False, True, True, False]
    assert torch.equal(ids[~repeats], torch.unique(ids))


def test_masked_info_nce_equals_the_loss_over_unique_ids_with_its_gradients():
    """Repeats left out as anchors and as negatives: the very loss of the distinct ids, at the batch's shape."""
    g = torch.Generator().manual_seed(4)
    nodes1 = torch.randn(12, 5, generator=g, dtype=torch.float64, requires_grad=True)
    nodes2 = torch.randn(12, 5, generator=g, dtype=torch.float64, requires_grad=True)
    for ids in (
        torch.tensor([3, 3, 3, 3]),
        torch.tensor([0, 5, 2, 5, 11, 0, 5, 7, 2]),
        torch.arange(12).flip(0),
        torch.randint(0, 12, (40,), generator=g),
    ):
        sorted_ids, repeats = distinct_ids(ids)
        masked = info_nce_loss(nodes1[sorted_ids], nodes2[sorted_ids], 0.3, repeats)
        reference = unique_info_nce(nodes1, nodes2, ids, 0.3)
        torch.testing.assert_close(masked, reference, rtol=1e-12, atol=0)
        for got, want in zip(
            torch.autograd.grad(masked, (nodes1, nodes2)), torch.autograd.grad(reference, (nodes1, nodes2))
        ):
            torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-14)
    ids = torch.tensor([0, 5, 2, 5, 11, 0])
    assert torch.autograd.gradcheck(
        lambda a, b: info_nce_loss(a[distinct_ids(ids)[0]], b[distinct_ids(ids)[0]], 0.3, distinct_ids(ids)[1]),
        (nodes1, nodes2),
    )


def test_info_nce_loss_is_lowest_when_views_agree():
    g = torch.Generator().manual_seed(3)
    view = torch.randn(8, 4, generator=g)
    assert info_nce_loss(view, view, 0.2) < info_nce_loss(view, torch.randn(8, 4, generator=g), 0.2)


def autograd_uniformity(x, t=2.0):
    """The uniformity loss written for autograd, the form the fused backward replaces."""
    squared = torch.cdist(x, x).pow(2)
    n = len(x)
    off_diagonal = ~torch.eye(n, dtype=torch.bool)
    return squared[off_diagonal].mul(-t).exp().mean().log()


def test_uniformity_gradient_equals_autograd_and_gradcheck():
    x = torch.randn(30, 6, dtype=torch.float64, requires_grad=True)
    (expected,) = torch.autograd.grad(autograd_uniformity(x) * 1.7, x)
    (got,) = torch.autograd.grad(uniformity_loss(x) * 1.7, x)
    torch.testing.assert_close(got, expected)
    (in_blocks,) = torch.autograd.grad(uniformity_loss(x, block_rows=7) * 1.7, x)  # the symmetric halves
    torch.testing.assert_close(in_blocks, expected)
    assert torch.autograd.gradcheck(uniformity_loss, (torch.randn(12, 4, dtype=torch.float64, requires_grad=True),))


def test_bf16_uniformity_is_within_bf16_rounding():
    x = torch.nn.functional.normalize(torch.randn(512, 32), dim=-1).requires_grad_()
    (exact,) = torch.autograd.grad(uniformity_loss(x), x)
    rounded_loss = uniformity_loss(x, dtype=torch.bfloat16)
    (rounded,) = torch.autograd.grad(rounded_loss, x)
    assert abs(float(rounded_loss.detach()) - float(uniformity_loss(x.detach()))) < 1e-3
    assert float((rounded - exact).norm() / exact.norm()) < 2e-2


def test_uniformity_blocks_equal_one_block_values_and_gradients():
    x = torch.randn(37, 5, dtype=torch.float64)
    results = []
    for block_rows in (1, 8, 37, 100):
        leaf = x.clone().requires_grad_()
        loss = uniformity_loss(leaf, block_rows=block_rows)
        results.append((loss.detach(), torch.autograd.grad(loss, leaf)[0]))
    for loss, grad in results[1:]:
        torch.testing.assert_close(loss, results[0][0], rtol=1e-13, atol=0)
        torch.testing.assert_close(grad, results[0][1], rtol=1e-12, atol=1e-15)
    assert math.isclose(float(results[1][0]), float(autograd_uniformity(x)), rel_tol=1e-12)


def test_uniformity_of_stacked_matrices_equals_each_alone_in_one_block_and_in_blocks():
    x = torch.randn(2, 37, 5, dtype=torch.float64)
    weights = torch.tensor([0.7, -1.3], dtype=torch.float64)
    for block_rows in (8, 37):  # blocks (each matrix apart) and one block (both at once)
        leaf = x.clone().requires_grad_()
        losses = uniformity_loss(leaf, block_rows=block_rows)
        assert losses.shape == (2,)
        (grad,) = torch.autograd.grad((losses * weights).sum(), leaf)
        for i in range(2):
            alone = x[i].clone().requires_grad_()
            loss = autograd_uniformity(alone)
            torch.testing.assert_close(losses[i].detach(), loss.detach(), rtol=1e-12, atol=0)
            torch.testing.assert_close(
                grad[i], torch.autograd.grad(loss * weights[i], alone)[0], rtol=1e-10, atol=1e-14
            )


def test_directau_loss_of_pairs_is_directau_loss_of_both_sides():
    users, items = torch.randn(9, 4, dtype=torch.float64), torch.randn(9, 4, dtype=torch.float64)
    expected = directau_loss(users, items, 0.4, block_rows=2)
    torch.testing.assert_close(
        directau_loss_of_pairs(torch.stack([users, items]), 0.4, block_rows=9), expected, rtol=1e-12, atol=0
    )


def test_uniformity_rejects_empty_blocks():
    import pytest

    with pytest.raises(ValueError, match="block_rows must be positive"):
        uniformity_loss(torch.randn(4, 2), block_rows=0)


def test_info_nce_over_all_nodes_equals_its_formula_written_out_with_its_gradients():
    g = torch.Generator().manual_seed(4)
    candidates = torch.randn(7, 3, generator=g, dtype=torch.float64, requires_grad=True)
    anchors = torch.randn(4, 3, generator=g, dtype=torch.float64, requires_grad=True)
    batch, tau = [5, 0, 5, 2], 0.3  # a node may appear twice in a batch

    def cos(a, b):
        return a @ b / (a.norm() * b.norm())

    expected = sum(
        torch.log(sum(torch.exp(cos(anchors[k], candidates[j]) / tau) for j in range(7)))
        - cos(anchors[k], candidates[node]) / tau
        for k, node in enumerate(batch)
    )
    loss = info_nce_over_all_nodes(anchors, candidates[batch], candidates, tau)
    torch.testing.assert_close(loss, expected)
    for got, want in zip(
        torch.autograd.grad(loss, [anchors, candidates]), torch.autograd.grad(expected, [anchors, candidates])
    ):
        torch.testing.assert_close(got, want)


def test_linear_cross_entropy_without_bias_is_torchs_loss_of_a_bias_free_linear():
    g = torch.Generator().manual_seed(1)
    hidden, weight = torch.randn(6, 4, generator=g, requires_grad=True), torch.randn(9, 4, generator=g)
    weight.requires_grad_()
    target = torch.tensor([0, 8, 2, 2, 5, 1])
    ours = linear_cross_entropy(hidden, weight, None, target)
    ours_grads = torch.autograd.grad(ours, (hidden, weight))
    theirs = F.cross_entropy(hidden @ weight.T, target)
    theirs_grads = torch.autograd.grad(theirs, (hidden, weight))
    torch.testing.assert_close(ours, theirs)
    for a, b in zip(ours_grads, theirs_grads):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_linear_cross_entropy_in_bf16_rounds_the_matmul_inputs_only():
    """bf16: the loss is torch's of the logits from bf16-rounded inputs (fp32 sums), and its gradients are the
    fp32 gradients to bf16's precision; the softmax and the loss are fp32."""
    g = torch.Generator().manual_seed(2)
    hidden, weight = torch.randn(64, 16, generator=g), torch.randn(300, 16, generator=g)
    bias, target = torch.randn(300, generator=g), torch.randint(0, 300, (64,), generator=g)
    loss = linear_cross_entropy(hidden, weight, bias, target, torch.bfloat16)
    rounded = (hidden.bfloat16() @ weight.bfloat16().T).float() + bias
    assert loss.dtype == torch.float32
    torch.testing.assert_close(loss, F.cross_entropy(rounded, target), rtol=1e-6, atol=1e-6)
    inputs = [x.clone().requires_grad_() for x in (hidden, weight, bias)]
    fp32 = [x.clone().requires_grad_() for x in (hidden, weight, bias)]
    linear_cross_entropy(*inputs, target, torch.bfloat16).backward()
    linear_cross_entropy(*fp32, target).backward()
    for ours, exact in zip(inputs, fp32):
        assert ours.grad.dtype == torch.float32
        torch.testing.assert_close(ours.grad, exact.grad, rtol=0.05, atol=2e-3)
    assert not torch.equal(inputs[0].grad, fp32[0].grad)  # the rounding is real


@settings(max_examples=40, deadline=None)
@given(
    rows=st.integers(1, 9),
    classes=st.integers(1, 12),
    block_rows=st.integers(1, 10),
    with_bias=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_linear_cross_entropy_in_blocks_of_any_size_is_torchs_loss_and_gradients(
    rows, classes, block_rows, with_bias, seed
):
    """However the rows split into cached blocks (one block, ragged last blocks, a row each), the loss and the
    gradients are torch's ``F.cross_entropy(F.linear(...))``, large logits included."""
    g = torch.Generator().manual_seed(seed)
    hidden = torch.randn(rows, 3, generator=g)
    weight = 20 * torch.randn(classes, 3, generator=g)
    bias = torch.randn(classes, generator=g) if with_bias else None
    target = torch.randint(0, classes, (rows,), generator=g)
    inputs = [x for x in (hidden, weight, bias) if x is not None]
    ours_inputs = [x.clone().requires_grad_() for x in inputs]
    theirs_inputs = [x.double().requires_grad_() for x in inputs]  # torch's loss in fp64, the reference
    with blocks_of(block_rows, classes):
        assert loss_module.cross_entropy_block_rows(classes) == block_rows
        ours = linear_cross_entropy(*ours_inputs[:2], ours_inputs[2] if with_bias else None, target)
    theirs = F.cross_entropy(F.linear(*theirs_inputs), target)
    torch.testing.assert_close(ours.double(), theirs, rtol=1e-5, atol=1e-5)
    for a, b in zip(torch.autograd.grad(ours, ours_inputs), torch.autograd.grad(theirs, theirs_inputs)):
        torch.testing.assert_close(a.double(), b, rtol=1e-4, atol=1e-5)


@settings(max_examples=40, deadline=None)
@given(
    rows=st.integers(1, 7),
    pairs=st.integers(1, 20),
    classes=st.integers(1, 12),
    block_rows=st.integers(1, 8),
    with_bias=st.booleans(),
    with_residual=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_linear_cross_entropy_of_pairs_sharing_rows_is_the_loss_of_the_rows_repeated(
    rows, pairs, classes, block_rows, with_bias, with_residual, seed
):
    """``rows``: each pair's logits are its row's, made once for all of the row's pairs, in any block split and
    pair order (rows without a pair included): the loss and gradients are torch's cross-entropy of the rows
    repeated pair by pair, in fp64."""
    g = torch.Generator().manual_seed(seed)
    hidden = torch.randn(rows, 3, generator=g)
    weight = 20 * torch.randn(classes, 3, generator=g)
    bias = torch.randn(classes, generator=g) if with_bias else None
    residual = torch.randn(rows, classes, generator=g) if with_residual else None
    pair_rows = torch.randint(0, rows, (pairs,), generator=g)  # unsorted, repeated, some rows left out
    target = torch.randint(0, classes, (pairs,), generator=g)
    inputs = [x for x in (hidden, weight, bias) if x is not None]
    ours_inputs = [x.clone().requires_grad_() for x in inputs]
    exact_inputs = [x.double().requires_grad_() for x in inputs]
    with blocks_of(block_rows, classes):
        ours = linear_cross_entropy(
            *ours_inputs[:2],
            ours_inputs[2] if with_bias else None,
            target,
            residual=residual,
            residual_weight=0.6,
            rows=pair_rows,
        )
    scores = exact_inputs[0] @ exact_inputs[1].T
    if with_residual:
        scores = scores + 0.6 * scores.detach().std(dim=1, correction=0, keepdim=True) * residual.double()
    if with_bias:
        scores = scores + exact_inputs[2]
    exact = F.cross_entropy(scores[pair_rows], target)
    torch.testing.assert_close(ours.double(), exact, rtol=1e-5, atol=1e-5)
    for a, b in zip(torch.autograd.grad(ours, ours_inputs), torch.autograd.grad(exact, exact_inputs)):
        torch.testing.assert_close(a.double(), b, rtol=1e-4, atol=1e-5)


def test_linear_cross_entropy_of_one_pair_a_row_is_the_loss_without_rows():
    g = torch.Generator().manual_seed(7)
    hidden, weight = torch.randn(6, 4, generator=g), torch.randn(9, 4, generator=g)
    target = torch.tensor([0, 8, 2, 2, 5, 1])
    torch.testing.assert_close(
        linear_cross_entropy(hidden, weight, None, target, rows=torch.arange(6)),
        linear_cross_entropy(hidden, weight, None, target),
    )


def test_linear_cross_entropy_without_gradients_is_torchs_loss_with_no_graph():
    g = torch.Generator().manual_seed(3)
    hidden, weight = torch.randn(5, 4, generator=g, requires_grad=True), torch.randn(7, 4, generator=g)
    target = torch.tensor([0, 6, 2, 2, 1])
    with torch.no_grad():
        loss = linear_cross_entropy(hidden, weight, None, target)
    torch.testing.assert_close(loss, F.cross_entropy(hidden.detach() @ weight.T, target))
    assert loss.grad_fn is None
    detached = linear_cross_entropy(hidden.detach(), weight, None, target)  # nothing requires a gradient
    torch.testing.assert_close(detached, loss)
    assert detached.grad_fn is None


def test_linear_cross_entropy_backward_scales_the_gradients_by_the_upstream_gradient():
    g = torch.Generator().manual_seed(4)
    hidden, weight = torch.randn(6, 3, generator=g, requires_grad=True), torch.randn(5, 3, generator=g)
    target = torch.tensor([0, 4, 1, 1, 3, 2])
    ours = torch.autograd.grad(3.5 * linear_cross_entropy(hidden, weight, None, target), hidden)[0]
    theirs = torch.autograd.grad(3.5 * F.cross_entropy(hidden @ weight.T, target), hidden)[0]
    torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("block_rows", [1, 5, 64])
def test_linear_cross_entropy_in_bf16_keeps_bf16s_precision_in_blocks(block_rows):
    """bf16 matmul inputs, in blocks of any size: the loss does not depend on the blocks (each row's logits are the
    same), and the gradients are the fp32 ones to bf16's precision."""
    g = torch.Generator().manual_seed(5)
    hidden, weight = torch.randn(64, 16, generator=g), torch.randn(300, 16, generator=g)
    target = torch.randint(0, 300, (64,), generator=g)
    losses = []
    for rows, dtype in ((64, torch.bfloat16), (block_rows, torch.bfloat16), (64, torch.float32)):
        with blocks_of(rows, 300):
            inputs = [x.clone().requires_grad_() for x in (hidden, weight)]
            loss = linear_cross_entropy(*inputs, None, target, dtype)
            losses.append((loss, *torch.autograd.grad(loss, inputs)))
    (one_block, *_), (blocked, *blocked_grads), (_, *exact_grads) = losses
    torch.testing.assert_close(blocked, one_block, rtol=1e-6, atol=1e-6)
    for ours, exact in zip(blocked_grads, exact_grads):
        torch.testing.assert_close(ours, exact, rtol=0.05, atol=2e-3)


def test_linear_cross_entropy_with_a_residual_adds_it_at_each_rows_spread_before_the_bias():
    g = torch.Generator().manual_seed(6)
    hidden, weight, bias = torch.randn(6, 4, generator=g), torch.randn(9, 4, generator=g), torch.randn(9, generator=g)
    residual, target = torch.randn(6, 9, generator=g), torch.tensor([0, 8, 2, 2, 5, 1])
    ours_inputs = [x.clone().requires_grad_() for x in (hidden, weight, bias)]
    exact_inputs = [x.double().requires_grad_() for x in (hidden, weight, bias)]
    ours = linear_cross_entropy(*ours_inputs, target, residual=residual, residual_weight=0.7)
    scores = exact_inputs[0] @ exact_inputs[1].T
    spread = scores.detach().std(dim=1, correction=0, keepdim=True)  # a scale: no gradient through it
    exact = F.cross_entropy(scores + 0.7 * spread * residual.double() + exact_inputs[2], target)
    torch.testing.assert_close(ours.double(), exact, rtol=1e-5, atol=1e-6)
    for a, b in zip(torch.autograd.grad(ours, ours_inputs), torch.autograd.grad(exact, exact_inputs)):
        torch.testing.assert_close(a.double(), b, rtol=1e-4, atol=1e-6)
    plain = linear_cross_entropy(hidden, weight, bias, target)
    torch.testing.assert_close(linear_cross_entropy(hidden, weight, bias, target, residual=residual), plain)


@settings(max_examples=30, deadline=None)
@given(
    rows=st.integers(1, 5),
    columns=st.integers(1, 300),
    scale=st.sampled_from([1e-3, 1.0, 1e3]),
    seed=st.integers(0, 2**16),
)
def test_row_spread_is_each_rows_standard_deviation(rows, columns, scale, seed):
    x = scale * torch.randn(rows, columns, generator=torch.Generator().manual_seed(seed)) + 5 * scale
    torch.testing.assert_close(row_spread(x), x.double().std(dim=1, correction=0, keepdim=True).float())
