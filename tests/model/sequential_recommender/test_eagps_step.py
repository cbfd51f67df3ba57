"""EAGPS's training step against its straightforward form (``experiments/eagps_reference.py``, the model up to
da76ead): the same weights, batch and random masks give the same loss, gradients and scores, and the masks are
drawn from the same distribution."""

import math
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from sequence_data import (  # noqa: F401 (a fixture)
    assert_same_loss_and_gradients,
    assert_same_scores,
    recbole_twin,
    sequential_setup_fixture,
)

import recbole_mgformer.model.sequential_recommender.eagps as eagps_module
from recbole_mgformer.model.dropout import keep_scale
from recbole_mgformer.model.eagps.decoder import kept_positions, packed_soft_attention, sequential_mask, soft_attention
from recbole_mgformer.model.eagps.external import collapsed_l2_external_attention, external_attention, l2_collapses
from recbole_mgformer.model.loss import linear_cross_entropy

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

import experiments.eagps_reference as reference_module  # noqa: E402
from experiments.eagps_reference import (  # noqa: E402
    ReferenceEAGPS,
    reference_external_attention,
    reference_sequential_mask,
)

SMALL = {"embedding_size": 8, "n_heads": 2, "memory_size": 6, "prompt_size": 5}
OPTIONS = [
    {},
    {"mask_ratio": 0.0},
    {"mask_ratio": 1.0, "dropout_prob": 0.5},
    {"ea_norm": "softmax", "n_layers": 3},
    {"external_norm": "token", "item_weighting": "occurrences"},
    {"fusion_norm": "layer", "external_attention": False},
    {"decoder": "max_pool"},
]


# ---------------------------------------------------------------- pieces


@pytest.mark.parametrize("ratio", [0.0, 0.4, 1.0])
def test_the_one_sort_mask_is_the_two_argsort_mask_of_the_same_draws(ratio):
    lengths = torch.tensor([1, 2, 3, 5, 8, 10, 10, 7] * 16)
    for seed in range(20):
        ours = sequential_mask(lengths, 10, ratio, generator=torch.Generator().manual_seed(seed))
        theirs = reference_sequential_mask(lengths, 10, ratio, generator=torch.Generator().manual_seed(seed))
        assert torch.equal(ours, theirs)


def gradients(function, *inputs):
    """function(*inputs) and the gradients of a fixed random projection of it with respect to each input."""
    inputs = [x.detach().clone().requires_grad_() for x in inputs]
    out = function(*inputs)
    weights = torch.randn(out.shape, generator=torch.Generator().manual_seed(9), dtype=out.dtype)
    (out * weights).sum().backward()
    return [out.detach(), *(x.grad for x in inputs)]


@pytest.mark.parametrize("dtype, tolerance", [(torch.float64, 1e-12), (torch.float32, 1e-5)])
@pytest.mark.parametrize("norm", ["l2", "softmax"])
@pytest.mark.parametrize("n_heads", [1, 2, 4])
def test_external_attention_has_the_references_values_and_gradients(dtype, tolerance, norm, n_heads):
    g = torch.Generator().manual_seed(n_heads)
    x, keys, values = (torch.randn(size, 8, generator=g, dtype=dtype) for size in (30, 6, 6))
    x[3] = 0.0  # a node of zero scores: the l2 norm's floor
    ours = gradients(lambda *a: external_attention(*a, n_heads, norm), x, keys, values)
    theirs = gradients(lambda *a: reference_external_attention(*a, n_heads, norm), x, keys, values)
    for name, a, b in zip(("out", "x", "keys", "values"), ours, theirs):
        torch.testing.assert_close(a, b, rtol=tolerance, atol=tolerance, msg=name)


@settings(max_examples=40, deadline=None)
@given(
    nodes=st.integers(1, 20),
    head=st.integers(1, 6),
    n_heads=st.sampled_from([1, 2, 4]),
    extra_slots=st.integers(0, 40),
    scale=st.sampled_from([1e-3, 1.0, 1e3]),
    seed=st.integers(0, 2**16),
)
def test_collapsed_l2_attention_equals_the_scores_form(nodes, head, n_heads, extra_slots, scale, seed):
    """s V / ||s|| = x (K^T V) / sqrt(x K^T K x^T) per head, at any alpha >= d/h, any scale, zero nodes included;
    values and gradients against the scores' form in fp64."""
    g = torch.Generator().manual_seed(seed)
    d, alpha = head * n_heads, head + extra_slots
    x = torch.randn(nodes, d, generator=g, dtype=torch.float64) * scale
    x[0] = 0.0  # the floor
    keys, values = (torch.randn(alpha, d, generator=g, dtype=torch.float64) for _ in range(2))
    assert l2_collapses(alpha, d, n_heads)
    ours = gradients(lambda *a: collapsed_l2_external_attention(*a, n_heads), x, keys, values)
    theirs = gradients(lambda *a: reference_external_attention(*a, n_heads, "l2"), x, keys, values)
    for name, a, b in zip(("out", "x", "keys", "values"), ours, theirs):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-9 * max(1.0, b.abs().max().item()), msg=name)


@pytest.mark.parametrize("n_heads", [1, 2, 4])
def test_a_memory_of_d_over_h_slots_computes_what_a_larger_memory_computes_under_l2(n_heads):
    """EAGPS.yaml's reading: with the l2 norm a head depends on its memories only through K^T K and K^T V, so
    alpha = d/h slots (K' = the Cholesky factor of K^T K, V' = K'^-T K^T V) give the same output as 64."""
    g = torch.Generator().manual_seed(n_heads)
    d, alpha = 8, 64
    head = d // n_heads
    x, keys, values = (torch.randn(size, d, generator=g, dtype=torch.float64) for size in (20, alpha, alpha))
    small_keys, small_values = torch.zeros(head, d, dtype=torch.float64), torch.zeros(head, d, dtype=torch.float64)
    for j in range(n_heads):
        columns = slice(j * head, (j + 1) * head)
        factor = torch.linalg.cholesky(keys[:, columns].T @ keys[:, columns]).T  # (d/h, d/h), K^T K = R^T R
        small_keys[:, columns] = factor
        small_values[:, columns] = torch.linalg.solve(factor.T, keys[:, columns].T @ values[:, columns])
    expected = reference_external_attention(x, keys, values, n_heads, "l2")
    torch.testing.assert_close(reference_external_attention(x, small_keys, small_values, n_heads, "l2"), expected)


def test_fp32_collapsed_l2_attention_holds_fp32_precision_where_the_quadratic_form_cancels():
    """Memories nearly rank-deficient along a node's direction: ||s|| is far below ||x|| ||K||, where an fp32 quadratic
    form would lose every digit; the fp64 evaluation keeps the unit-norm weights' output to fp32 precision."""
    g = torch.Generator().manual_seed(3)
    keys = torch.randn(16, 4, generator=g, dtype=torch.float64)
    keys[:, 0] = keys[:, 1] + 1e-4 * torch.randn(16, generator=g, dtype=torch.float64)  # two near-equal columns
    values = torch.randn(16, 4, generator=g, dtype=torch.float64)
    x = torch.tensor([[1.0, -1.0, 0.0, 0.0], [0.3, 0.2, -0.5, 1.0]], dtype=torch.float64)  # row 0 along the gap
    x, keys, values = x.float(), keys.float(), values.float()
    expected = reference_external_attention(x.double(), keys.double(), values.double(), 1, "l2")  # fp32's inputs
    got = collapsed_l2_external_attention(x, keys, values, 1)
    torch.testing.assert_close(got.double(), expected, rtol=1e-3, atol=1e-4)


def test_linear_cross_entropy_has_torchs_loss_and_gradients():
    g = torch.Generator().manual_seed(0)
    hidden, weight, bias = torch.randn(7, 5, generator=g), torch.randn(11, 5, generator=g), torch.randn(11, generator=g)
    target = torch.tensor([0, 3, 10, 3, 5, 1, 9])
    ours = gradients(lambda *a: linear_cross_entropy(*a, target), hidden, weight * 30, bias)  # large logits too
    theirs = gradients(lambda h, w, b: F.cross_entropy(F.linear(h, w, b), target), hidden, weight * 30, bias)
    for a, b in zip(ours, theirs):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_packed_soft_attention_is_the_soft_attention_of_the_unpacked_templates():
    g = torch.Generator().manual_seed(1)
    lengths = torch.tensor([1, 4, 6, 2, 6, 3])
    templates, token = torch.randn(6, 6, 5, generator=g, dtype=torch.float64), torch.randn(5, dtype=torch.float64)
    templates[2, 1] = 0.0  # a zero template (a ReLU's or dropout's), cosine floor
    masked = reference_sequential_mask(lengths, 6, 0.5, generator=g)
    assert masked.any()
    full = torch.where(masked.unsqueeze(-1), token, templates)  # the reference writes the token over them
    rows, kept = kept_positions(lengths, 6, masked)

    def packed(t, k):
        return packed_soft_attention(t.flatten(0, 1)[rows], rows // 6, kept.cumsum(0) - 1, k, masked.sum(1))

    ours = gradients(packed, templates, token)
    theirs = gradients(lambda t, k: soft_attention(torch.where(masked.unsqueeze(-1), k, t), lengths), templates, token)
    for a, b in zip(ours, theirs):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(ours[0], soft_attention(full, lengths))


# ---------------------------------------------------------------- the model


def reference_pair(sequential_setup, **overrides):
    """(config, EAGPS, its ReferenceEAGPS twin with the same weights, (train, valid, test))."""
    config, model, (train, valid, test) = sequential_setup("EAGPS", **SMALL, **overrides)
    return config, model, recbole_twin(ReferenceEAGPS, config, model, train), (train, valid, test)


def test_the_reference_has_the_models_parameters_and_state_dict_keys(sequential_setup):
    _, model, twin, _ = reference_pair(sequential_setup)
    assert list(model.state_dict()) == list(twin.state_dict())
    assert [n for n, _ in model.named_parameters()] == [n for n, _ in twin.named_parameters()]


def share_masks(monkeypatch, model, batch):
    """Draw one mask and one dropout scale (B, L, d) for ``batch``; the reference reads them whole, the model the
    rows it computes (the real positions not masked, row-major)."""
    item_seq, lengths = batch[model.ITEM_SEQ], batch[model.ITEM_SEQ_LEN]
    length = item_seq.shape[1]
    masked = reference_sequential_mask(lengths, length, model.mask_ratio)
    scale = keep_scale((*item_seq.shape, model.embedding_size), model.dropout_prob)
    real = torch.arange(length).unsqueeze(0) < lengths.unsqueeze(1)
    monkeypatch.setattr(reference_module, "reference_sequential_mask", lambda *args: masked)
    monkeypatch.setattr(eagps_module, "sequential_mask", lambda *args: masked)

    class SharedDropout(torch.nn.Module):
        def forward(self, x):
            return x * scale

    def dropout(x, p, training):
        assert training and p == model.dropout_prob
        return x * scale[real & ~masked]

    monkeypatch.setattr(eagps_module, "dropout", dropout)
    return SharedDropout()


@pytest.mark.parametrize("settings", OPTIONS)
def test_same_weights_batch_and_masks_give_the_references_loss_and_gradients(sequential_setup, monkeypatch, settings):
    _, model, twin, (train, _, _) = reference_pair(sequential_setup, **settings)
    model.train(), twin.train()
    batch = next(iter(train))
    twin.dropout = share_masks(monkeypatch, model, batch)
    assert_same_loss_and_gradients(model, twin, model.calculate_loss(batch), twin.calculate_loss(batch))


@pytest.mark.parametrize("settings", OPTIONS)
def test_in_evaluation_the_scores_are_the_references(sequential_setup, settings):
    _, model, twin, (train, _, test) = reference_pair(sequential_setup, **settings)
    assert_same_scores(model, twin, next(iter(train)), test)
    model.train(), twin.train()  # and the loss without masks or dropout
    model.mask_ratio = twin.mask_ratio = 0.0
    model.dropout_prob = twin.dropout.p = 0.0
    batch = next(iter(train))
    assert_same_loss_and_gradients(model, twin, model.calculate_loss(batch), twin.calculate_loss(batch))


def test_in_training_the_loss_has_the_references_distribution_over_random_masks(sequential_setup):
    _, model, twin, (train, _, _) = reference_pair(sequential_setup, mask_ratio=0.5, dropout_prob=0.5)
    model.train(), twin.train()
    batch = next(iter(train))
    draws = 300
    losses = {}
    with torch.no_grad():
        for name, m in (("ours", model), ("reference", twin)):
            torch.manual_seed(0)
            losses[name] = torch.stack([m.calculate_loss(batch) for _ in range(draws)]).double()
    ours, theirs = losses["ours"], losses["reference"]
    assert ours.std() > 0 and not torch.equal(ours, theirs)  # masks are drawn, and not the reference's draws
    standard_error = math.sqrt((ours.var() + theirs.var()).item() / draws)
    assert abs(ours.mean() - theirs.mean()).item() < 4 * standard_error
    assert 0.8 < (ours.std() / theirs.std()).item() < 1.25
