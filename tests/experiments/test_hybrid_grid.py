"""experiments/hybrid_grid.sh on the toy dataset: the entry trains once a seed, every (filter, weight) is scored from
its checkpoint, the one with the best validation NDCG@20 at seed 0 goes onto the board at every seed (here ChebyCF's
and GF-CF's residuals, their low-rank parts set per filter), and each record says where its weight was chosen."""

import json

import pytest

from recbole_mgformer.benchmark import slug

TRAINED = "mgformer-attention-false"


def hybrid(kind, weight):
    return slug(f"MGFormer attention=False filter_residual={kind} filter_residual_weight={weight}")


@pytest.mark.slow
def test_the_grid_trains_once_a_seed_and_scores_every_weight_from_it(run_script, tmp_path):
    done = run_script(
        "hybrid_grid.sh",
        FILTERS="chebycf gfcf",
        FILTER_ARGS_chebycf="--filter_residual_k=8 --filter_residual_alpha=0.3",
        FILTER_ARGS_gfcf="--filter_residual_k=6 --filter_residual_alpha=0.3",
        WEIGHTS="0.5 2",
    )
    assert "tiny: chebycf residual: --filter_residual_k=8 --filter_residual_alpha=0.3" in done.stdout
    assert "tiny: gfcf residual: --filter_residual_k=6 --filter_residual_alpha=0.3" in done.stdout
    grid = tmp_path / "results" / "exploration" / "hybrid-grid" / "runs" / "tiny"
    points = [(kind, weight) for kind in ("chebycf", "gfcf") for weight in ("0.5", "2")]
    records = {point: json.loads((grid / f"{hybrid(*point)}-seed0.json").read_text()) for point in points}
    assert all(record["choice_made_on"] == "none" for record in records.values())
    valid = {point: record["valid"]["ndcg@20"] for point, record in records.items()}
    kind, weight = max(points, key=valid.get)
    assert f"chosen on tiny's validation NDCG@20 at seed 0: {kind}, weight {weight}" in done.stdout
    chosen = hybrid(kind, weight)
    board = tmp_path / "results" / "runs" / "tiny"
    assert sorted(p.name for p in board.glob("*.json")) == sorted(
        [f"{TRAINED}-seed{s}.json" for s in range(3)] + [f"{chosen}-seed{s}.json" for s in range(3)]
    )
    for seed in range(3):  # each scored from the one training of its seed
        trained = json.loads((board / f"{TRAINED}-seed{seed}.json").read_text())
        scored = json.loads((board / f"{chosen}-seed{seed}.json").read_text())
        assert scored["choice_made_on"] == "validation" and "choice_dataset" not in scored
        assert scored["scored_from"]["record"].endswith(f"runs/tiny/{TRAINED}-seed{seed}.json")
        assert scored["fit_seconds"] == trained["fit_seconds"]
        assert (board / f"{chosen}-seed{seed}.users.json.gz").exists()
    assert not list(grid.glob(f"{TRAINED}-seed*"))  # the trained entry's records are on the board, not in the grid
    assert sorted(p.name for p in (tmp_path / "saved" / "tiny").glob("*.pth")) == [
        f"{TRAINED}-seed{s}.pth" for s in range(3)
    ]
