import math

import pytest
import torch

from recbole_mgformer.model.mgformer.feature_maps import (
    FEATURE_MAPS,
    apply_feature_map,
    draw_projection,
    haar_orthogonal,
    positive_random_features,
    random_feature_logits,
    simplex_matrix,
)


@pytest.mark.parametrize("m", [2, 3, 8, 64])
def test_simplex_rows_are_unit_vectors_with_equal_negative_dot_products(m):
    s = simplex_matrix(m, torch.float64)
    gram = s @ s.T
    expected = torch.full((m, m), -1.0 / (m - 1), dtype=torch.float64)
    expected.fill_diagonal_(1.0)
    torch.testing.assert_close(gram, expected)


def test_simplex_matrix_matches_the_formula_of_eq_7():
    m = 5
    s = simplex_matrix(m, torch.float64)
    ones_but_last = torch.tensor([1.0, 1, 1, 1, 0], dtype=torch.float64)
    for i in range(m - 1):
        unit = torch.zeros(m, dtype=torch.float64)
        unit[i] = 1
        row = math.sqrt(m / (m - 1)) * unit - (math.sqrt(m) + 1) / (m - 1) ** 1.5 * ones_but_last
        torch.testing.assert_close(s[i], row)
    torch.testing.assert_close(s[-1], ones_but_last / math.sqrt(m - 1))


def test_haar_orthogonal_is_orthogonal_and_seeded():
    a = haar_orthogonal(16, torch.Generator().manual_seed(3), torch.float64)
    b = haar_orthogonal(16, torch.Generator().manual_seed(3), torch.float64)
    torch.testing.assert_close(a @ a.T, torch.eye(16, dtype=torch.float64))
    assert torch.equal(a, b)


@pytest.mark.parametrize("kind", ["orf", "simrf"])
def test_structured_projections_have_the_expected_geometry(kind):
    k = 12
    w = draw_projection(kind, k, k, torch.Generator().manual_seed(0), torch.float64)
    directions = w / w.norm(dim=1, keepdim=True)
    simplex = simplex_matrix(k, torch.float64)
    target = torch.eye(k, dtype=torch.float64) if kind == "orf" else simplex @ simplex.T
    torch.testing.assert_close(directions @ directions.T, target)


def test_more_features_than_dimensions_stack_independent_blocks():
    w = draw_projection("simrf", 20, 8, torch.Generator().manual_seed(0))
    assert w.shape == (20, 8)
    assert not torch.allclose(w[:8], w[8:16])


def kernel_estimates(kind, a, b, draws, m):
    """phi(a)^T phi(b) from Eq. (7) for many independent draws of the projection."""
    estimates = []
    for seed in range(draws):
        w = draw_projection(kind, m, a.shape[-1], torch.Generator().manual_seed(seed), torch.float64)
        logits = random_feature_logits(torch.stack([a, b]), w)
        estimates.append(torch.exp(logits[0] + logits[1]).sum() / m)
    return torch.stack(estimates)


def test_simrf_is_unbiased_and_beats_iid_positive_random_features():
    generator = torch.Generator().manual_seed(42)
    k = 8
    a = 0.5 * torch.randn(k, generator=generator, dtype=torch.float64)
    b = 0.5 * torch.randn(k, generator=generator, dtype=torch.float64)
    exact = torch.exp(a @ b)
    simrf = kernel_estimates("simrf", a, b, draws=4000, m=k)
    prf = kernel_estimates("prf", a, b, draws=4000, m=k)
    standard_error = simrf.std() / math.sqrt(len(simrf))
    assert abs(simrf.mean() - exact) < 4 * standard_error
    assert ((simrf - exact) ** 2).mean() < ((prf - exact) ** 2).mean()


def test_stabilised_features_cancel_in_attention_ratios():
    generator = torch.Generator().manual_seed(1)
    q, k = torch.randn(4, 6, generator=generator), torch.randn(10, 6, generator=generator)
    w = draw_projection("simrf", 6, 6, generator)
    raw = torch.exp(random_feature_logits(q, w)) @ torch.exp(random_feature_logits(k, w)).T
    stable = positive_random_features(q, w, is_query=True) @ positive_random_features(k, w, is_query=False).T
    torch.testing.assert_close(raw / raw.sum(1, keepdim=True), stable / stable.sum(1, keepdim=True))


@pytest.mark.parametrize("kind", FEATURE_MAPS)
def test_every_feature_map_is_positive_and_finite_on_large_inputs(kind):
    x = 1e3 * torch.randn(5, 8, generator=torch.Generator().manual_seed(0))
    w = draw_projection("simrf", 8, 8, torch.Generator().manual_seed(0))
    for is_query in (True, False):
        features = apply_feature_map(kind, x, w, is_query=is_query)
        assert torch.isfinite(features).all()
        assert (features >= 0).all()


def test_unknown_feature_map_is_rejected_with_the_choices():
    with pytest.raises(ValueError, match="unknown feature_map 'cosine'.*simrf"):
        apply_feature_map("cosine", torch.zeros(2, 2))
