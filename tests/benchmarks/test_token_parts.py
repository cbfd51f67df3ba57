import math
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.token_parts import mask_focus, score_shares, token_parts  # noqa: E402


def test_parts_of_a_model_without_attention_are_its_tokens(tiny_setup):
    _, model, _, _ = tiny_setup(attention=False)
    stats = token_parts(model)
    assert stats["attention_norm"] == 0.0 and stats["encoding_norm"] > 0 and stats["embedding_norm"] > 0
    assert not any(key.endswith("weight_norm") for key in stats)
    shares = score_shares(model, torch.tensor([0, 1, 2]), torch.tensor([3, 4, 5]))
    assert shares["attention terms"] == pytest.approx(0.0, abs=1e-6)
    assert sum(shares.values()) == pytest.approx(1.0)


def test_parts_of_a_model_with_attention_include_the_degree_centralities(tiny_setup):
    _, model, _, _ = tiny_setup()
    stats = token_parts(model)
    assert stats["attention_norm"] > 0 and 0 < stats["z_min"] <= stats["z_median"] <= stats["z_max"] < 1


def test_parts_include_the_query_and_key_weight_norms_of_every_layer(tiny_setup):
    _, model, _, _ = tiny_setup(n_layers=2)
    with torch.no_grad():
        model.layers[1].query.weight.mul_(3.0)
    stats = token_parts(model)
    for depth, layer in enumerate(model.layers):
        assert stats[f"layer{depth}_query_weight_norm"] == pytest.approx(layer.query.weight.norm().item())
        assert stats[f"layer{depth}_key_weight_norm"] == pytest.approx(layer.key.weight.norm().item())
    assert stats["layer1_query_weight_norm"] > 2.5 * stats["layer1_key_weight_norm"] > 0


def test_the_mask_focus_reads_the_median_querys_row_of_the_explicit_mask():
    z = torch.tensor([0.9, 0.8, 1e-4, 2e-4, 3e-4, 1e-4, 2e-4, 5e-4])
    degrees = torch.tensor([1, 2, 5, 6, 7, 8, 9, 10])
    mask = torch.sin(math.pi / 2 * (z[:, None] + z[None, :]) / 2)  # Eq. (10), n x n
    median_row = mask[(z == z.median()).nonzero()[0, 0]]
    focus = mask_focus(z, degrees)
    assert focus["mask_share_on_top_quarter_z_keys"] == pytest.approx((median_row[:2].sum() / median_row.sum()).item())
    assert focus["mask_share_on_top_quarter_z_keys"] > 0.99
    assert focus["top_quarter_z_keys_median_degree"] == 1 and focus["all_nodes_median_degree"] == 6
    flat = mask_focus(torch.full((8,), 0.5), degrees)
    assert flat["mask_share_on_top_quarter_z_keys"] == pytest.approx(0.25)
