"""The popularity page (Fig. 2): a group some seeds have no test users in."""

from recbole_mgformer.benchmark.popularity import render_popularity


def record(variant, seed, unpopular_ndcg):
    """A record's group metrics; None where the seed's test split put no user in the Unpopular group."""
    empty = unpopular_ndcg is None
    groups = {
        "Unpopular": {"recall@20": None if empty else 0.1, "ndcg@20": unpopular_ndcg, "users": 0 if empty else 3},
        "Normal": {"recall@20": 0.2, "ndcg@20": 0.1, "users": 5},
        "Popular": {"recall@20": 0.4, "ndcg@20": 0.3, "users": 9},
    }
    return {"variant": variant, "seed": seed, "test_popularity": groups}


def test_a_group_without_test_users_reads_n_a_and_averages_over_the_seeds_that_have_some(tmp_path):
    records = [
        record("BPR", 1, None),
        record("MGFormer", 0, 0.05),
        record("MGFormer", 1, None),
        record("MGFormer", 2, 0.07),
    ]
    page = render_popularity({"tiny": records}, tmp_path).read_text()
    assert "| BPR | 1 | n/a | n/a | 0.2000 | 0.1000 | 0.4000 | 0.3000 |" in page
    assert "| MGFormer | 3 | 0.1000 ± 0.0000 | 0.0600 ± 0.1271 |" in page  # over the 2 seeds with such users
    assert (tmp_path / "popularity-tiny.png").read_bytes()[:4] == b"\x89PNG"
