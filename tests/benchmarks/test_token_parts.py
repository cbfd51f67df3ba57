import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.token_parts import score_shares, token_parts  # noqa: E402


def test_parts_of_a_model_without_attention_are_its_tokens(tiny_setup):
    _, model, _, _ = tiny_setup(attention=False)
    stats = token_parts(model)
    assert stats["attention_norm"] == 0.0 and stats["encoding_norm"] > 0 and stats["embedding_norm"] > 0
    shares = score_shares(model, torch.tensor([0, 1, 2]), torch.tensor([3, 4, 5]))
    assert shares["attention terms"] == pytest.approx(0.0, abs=1e-6)
    assert sum(shares.values()) == pytest.approx(1.0)


def test_parts_of_a_model_with_attention_include_the_degree_centralities(tiny_setup):
    _, model, _, _ = tiny_setup()
    stats = token_parts(model)
    assert stats["attention_norm"] > 0 and 0 < stats["z_min"] <= stats["z_median"] <= stats["z_max"] < 1
