import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.feature_maps_inplace import compare  # noqa: E402


def test_in_place_and_out_of_place_features_give_the_same_attention():
    result = compare(n_nodes=300, width=16, queries=40, repeats=1, device="cpu")
    assert result["max_relative_difference"] < 1e-5
    assert result["median_seconds"]["in place"] > 0 and result["ratio_in_place"] > 0
