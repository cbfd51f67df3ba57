import itertools
import math

import torch

from recbole_mgformer.model.loss import alignment_loss, directau_loss, uniformity_loss


def direct_uniformity(x):
    pairs = list(itertools.combinations(range(len(x)), 2))
    return math.log(sum(math.exp(-2 * float((x[i] - x[j]).pow(2).sum())) for i, j in pairs) / len(pairs))


def test_directau_loss_equals_eq_13_written_out():
    g = torch.Generator().manual_seed(0)
    users, items = torch.randn(6, 4, generator=g, dtype=torch.float64), torch.randn(6, 4, generator=g, dtype=torch.float64)
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
