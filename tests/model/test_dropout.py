import math

import pytest
import torch

from recbole_mgformer.model.dropout import dropout, keep_scale


@pytest.mark.parametrize("p", [0.1, 0.3, 0.5, 0.9])
def test_each_element_is_kept_with_probability_one_minus_p_and_scaled_like_torchs(p):
    n = 1_000_000
    out = dropout(torch.ones(n), p, True, torch.Generator().manual_seed(0))
    kept = out != 0
    # binomial: the kept fraction within 5 standard deviations of 1 - p
    assert abs(kept.double().mean().item() - (1 - p)) < 5 * math.sqrt(p * (1 - p) / n)
    assert torch.equal(out[kept], torch.full_like(out[kept], 1 / (1 - p)))
    # independence of neighbours: both kept with probability (1 - p)^2
    both = (kept[:-1] & kept[1:]).double().mean().item()
    assert abs(both - (1 - p) ** 2) < 5 * math.sqrt((1 - p) ** 2 * (1 - (1 - p) ** 2) / n)


def test_the_kept_fraction_matches_torchs_dropout_by_a_two_sample_test():
    n, p = 400_000, 0.5
    ours = (dropout(torch.ones(n), p, True, torch.Generator().manual_seed(1)) != 0).double().mean().item()
    torch.manual_seed(1)
    theirs = (torch.nn.functional.dropout(torch.ones(n), p, True) != 0).double().mean().item()
    assert abs(ours - theirs) < 5 * math.sqrt(2 * p * (1 - p) / n)


def test_the_backward_multiplies_by_the_forwards_mask():
    x = torch.randn(64, 32, requires_grad=True)
    generator = torch.Generator().manual_seed(3)
    out = dropout(x, 0.4, True, generator)
    out.backward(torch.ones_like(out))
    scale = keep_scale(x.shape, 0.4, generator=torch.Generator().manual_seed(3))
    assert torch.equal(out, x.detach() * scale) and torch.equal(x.grad, scale)


def test_evaluation_p_zero_and_p_one():
    x = torch.randn(10)
    assert dropout(x, 0.5, False) is x and dropout(x, 0.0, True) is x
    assert torch.equal(dropout(x, 1.0, True), torch.zeros(10))


def test_the_default_generator_is_used_so_torchs_seed_repeats_the_masks():
    torch.manual_seed(5)
    first = dropout(torch.ones(1000), 0.5, True)
    torch.manual_seed(5)
    assert torch.equal(first, dropout(torch.ones(1000), 0.5, True))
