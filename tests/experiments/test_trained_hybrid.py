"""experiments/trained_hybrid.sh on the toy dataset: the hybrid trained as one model and the post-hoc hybrid over the
same loss, each chosen on validation NDCG@20 at seed 0, then at every seed on the board with the control it is
scored from; each record says where its choices were made."""

import json

import pytest

from recbole_mgformer.benchmark import slug
from recbole_mgformer.training.checkpoint_files import load_checkpoint


def control(temperature):
    return f"MGFormer attention=False loss=softmax softmax_temperature={temperature}"


def post_hoc(temperature, weight):
    return f"{control(temperature)} filter_residual=gfcf filter_residual_weight={weight}"


def trained(temperature, weight):
    return f"{post_hoc(temperature, weight)} filter_residual_in_training=True"


def kept_weights(checkpoints, variant):
    """The weights a run kept (its best epoch) at seed 0, from ``<checkpoints>/<variant>-seed0[-tuned-<hash>].pth``."""
    (path,) = [p for p in checkpoints.glob(f"{slug(variant)}-seed0*.pth") if not p.name.endswith(".latest.pth")]
    return load_checkpoint(path)["state_dict"]


@pytest.mark.slow
def test_both_hybrids_are_chosen_on_validation_and_run_at_every_seed(run_script, tmp_path):
    run_script(
        "trained_hybrid.sh",
        FILTER_ARGS="--filter_residual_k=6 --filter_residual_alpha=0.3",
        TEMPERATURES="0.2",
        WEIGHTS="0.5 2",
        SEEDS="0,1",
    )
    grid = tmp_path / "results" / "exploration" / "trained-hybrid" / "runs" / "tiny"
    variants = [control(0.2)] + [kind(0.2, w) for kind in (post_hoc, trained) for w in ("0.5", "2")]
    records = {v: json.loads((grid / f"{slug(v)}-seed0.json").read_text()) for v in variants}
    assert all(records[v]["choice_made_on"] == "none" for v in variants[1:])  # the control chose nothing
    # the post-hoc hybrids are scored from the control's checkpoint; the trained ones trained themselves
    assert all(records[post_hoc(0.2, w)]["scored_from"]["variant"] == control(0.2) for w in ("0.5", "2"))
    assert all("scored_from" not in records[trained(0.2, w)] for w in ("0.5", "2"))
    # the residual in the training scores changes training: from the same seed, other weights than the control's
    # (a record's train_history holds seconds, which round to 0.0 on a fast machine: it cannot tell them apart)
    trained_weights = kept_weights(tmp_path / "saved" / "tiny", trained(0.2, "2"))
    control_weights = kept_weights(tmp_path / "saved" / "tiny", control(0.2))
    assert control_weights.keys() <= trained_weights.keys()  # the hybrid adds its filter's buffers
    assert any(not trained_weights[k].equal(control_weights[k]) for k in control_weights)
    valid = {v: records[v]["valid"]["ndcg@20"] for v in variants}
    chosen = [max((kind(0.2, w) for w in ("0.5", "2")), key=valid.get) for kind in (trained, post_hoc)]
    board = tmp_path / "results" / "runs" / "tiny"
    assert sorted(p.name for p in board.glob("*.json")) == sorted(
        f"{slug(v)}-seed{s}.json" for v in chosen for s in range(2)
    )
    # the control stays in the grid: its seed 0 trained once, its seed 1 beside it
    assert (grid / f"{slug(control(0.2))}-seed1.json").exists()
    for seed in range(2):
        for variant in chosen:
            record = json.loads((board / f"{slug(variant)}-seed{seed}.json").read_text())
            assert record["choice_made_on"] == "validation"
    # neither seed 0 trained a second time: the trained one is the grid's run, the post-hoc one its control's
    promoted = json.loads((board / f"{slug(chosen[0])}-seed0.json").read_text())
    assert promoted["test"] == records[chosen[0]]["test"] and promoted["promoted_from"] == (
        f"results/exploration/trained-hybrid/runs/tiny/{slug(chosen[0])}-seed0.json"
    )
    on_board = json.loads((board / f"{slug(chosen[1])}-seed0.json").read_text())
    assert on_board["scored_from"]["sha256"] == records[chosen[1]]["scored_from"]["sha256"]
