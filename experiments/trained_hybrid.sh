#!/bin/bash
# The hybrid trained as one model (issue 81), beside the post-hoc hybrid at equal settings. Two families, each with
# its choices made on the validation NDCG@20 of $DATASET at seed 0, then run at seeds $SEEDS (0,1,2) onto the board:
#
# - trained: MGFormer[$BASE; loss=softmax; softmax_temperature=t; filter_residual=$FILTER; filter_residual_weight=w;
#   filter_residual_in_training=True]: the filter's residual is in the training scores (model/filter_residual.py);
#   t from $TEMPERATURES (0.1 0.2), w from $WEIGHTS (0.25 0.5 1 2).
# - control: MGFormer[$BASE; loss=softmax; softmax_temperature=t], the same loss without the residual, and its
#   post-hoc hybrid with the same filter at each w (scored from the control's checkpoint, not trained again), so the
#   difference between the families is the residual's place in training, not the loss.
#
# Both take the tokens' tuned settings ($BASE's file: MGFormer.tuned_as). BASE="attention=False; train_protocol=user"
# trains both families on batches of whole users, each user's full-item logits made once (data/user_batches.py), and
# "...; train_user_chunk=2" on users' chunks of 2 pairs (level with RecBole's pairs on amazon-beauty; whole users not).
# The filter is at its settings on the dataset's board (its search, or its row's: recbole_mgformer/benchmark/hybrid.py),
# or $FILTER_ARGS. The grid goes to $GRID's records
# (choice_made_on: none), the chosen entries to $RESULTS (choice_made_on: validation; the trained one's seed 0 is the
# grid's run, copied), the control's other seeds to $GRID (the post-hoc hybrid's trained entry). Compare them with
# experiments/paired.py (the post-hoc hybrid of hybrid_grid.sh and the filter alone are the other rows).
#
# Usage: DATASET=ml-100k bash experiments/trained_hybrid.sh [--key=value ...] (PYTHON, RESULTS, GRID, CHECKPOINTS,
# PRECISION as in hybrid_grid.sh). Rerun after a stop: finished records are skipped, a run resumes from its
# checkpoint. Two processes may share the grid (one a core, each claiming its own runs): one that runs out of
# unclaimed runs while the other still trains stops at the choice ("run the grid before choosing"); the last one to
# finish chooses and runs the seeds, which a second process started then shares again.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
DATASET=${DATASET:-ml-100k}
RESULTS=${RESULTS:-results}
GRID=${GRID:-$RESULTS/exploration/trained-hybrid}
CHECKPOINTS=${CHECKPOINTS:-saved/benchmark}
SEEDS=${SEEDS:-0,1,2}
BASE=${BASE:-attention=False}
FILTER=${FILTER:-gfcf}
PRECISION=${PRECISION:-fp32}
read -r -a TEMPERATURES <<< "${TEMPERATURES:-0.1 0.2}"
read -r -a WEIGHTS <<< "${WEIGHTS:-0.25 0.5 1 2}"
FILTER_ARGS=${FILTER_ARGS:-$($PY -m recbole_mgformer.benchmark.hybrid "$DATASET" "$FILTER" "$RESULTS/runs")}
echo "$DATASET: $FILTER residual: $FILTER_ARGS"

post_hoc() { echo "MGFormer[$BASE; loss=softmax; softmax_temperature=$1; filter_residual=$FILTER; filter_residual_weight=$2]"; }
trained() { echo "MGFormer[$BASE; loss=softmax; softmax_temperature=$1; filter_residual=$FILTER; filter_residual_weight=$2; filter_residual_in_training=True]"; }
bench() {  # entries ($1), seeds ($2), results folder ($3), then more options
  local entries=$1 seeds=$2 results=$3
  shift 3
  # shellcheck disable=SC2086 # the filter's arguments are words
  $PY -m recbole_mgformer.benchmark --models "$entries" --seeds "$seeds" --results "$results" --datasets "$DATASET" \
    --checkpoint_dir "$CHECKPOINTS" --precision="$PRECISION" $FILTER_ARGS "$@"
}

TRAINED=() POST_HOC=()
for T in "${TEMPERATURES[@]}"; do
  for W in "${WEIGHTS[@]}"; do TRAINED+=("$(trained "$T" "$W")"); POST_HOC+=("$(post_hoc "$T" "$W")"); done
done
join() { local IFS=,; echo "$*"; }
# each control trains first, as the entry its post-hoc hybrids are scored from (without the filter's options)
bench "$(join "${POST_HOC[@]}" "${TRAINED[@]}")" 0 "$GRID" --trained-results "$GRID" --choice-made-on none "$@"

best() {  # the entry of "$@" with the highest validation NDCG@20 at seed 0 in $GRID (the first of equal scores)
  $PY -m recbole_mgformer.benchmark.hybrid --best-on-validation "$GRID/runs" "$DATASET" "$@"
}
CHOSEN_TRAINED=$(best "${TRAINED[@]}")
CHOSEN_POST_HOC=$(best "${POST_HOC[@]}")
echo "chosen on $DATASET's validation NDCG@20 at seed 0: $CHOSEN_TRAINED; $CHOSEN_POST_HOC"
# neither seed 0 trains a second time: the chosen trained run of the grid goes on the board as it is, and the post-hoc
# hybrid is scored from the control in $GRID
case ",$SEEDS," in
  *,0,*) $PY -m recbole_mgformer.benchmark.hybrid --promote "$GRID/runs" "$RESULTS/runs" "$DATASET" "$CHOSEN_TRAINED" ;;
esac
bench "$CHOSEN_TRAINED,$CHOSEN_POST_HOC" "$SEEDS" "$RESULTS" --trained-results "$GRID" --choice-made-on validation "$@"
