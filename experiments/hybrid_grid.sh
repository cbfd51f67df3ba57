#!/bin/bash
# The hybrid, chosen on validation: MGFormer attention=False plus a training-free filter's scores as a residual
# (filter_residual). Every choice the hybrid makes beyond its parts is made on the validation NDCG@20 of $DATASET at
# seed 0: the filter, from $FILTERS (default gfcf; each at its settings from the dataset's own search of that filter,
# properties/benchmark/<dataset>/<GFCF|ChebyCF|BSPM>.yaml, else its paper's in properties/model/:
# recbole_mgformer/benchmark/hybrid.py; $FILTER_ARGS, or $FILTER_ARGS_<filter> among several, replaces them), and
# its weight, from $WEIGHTS (0.25 0.5 1 2). Every (filter, weight) of the grid goes to $GRID's records
# (choice_made_on: none); the chosen one runs at seeds $SEEDS (0,1,2) onto the board ($RESULTS, choice_made_on:
# validation), and where $CARRY_TO names another split of the same data (gowalla-full for gowalla), unchanged there
# too (choice_dataset: $DATASET), its epochs chosen as that split's other rows choose theirs.
# $BASE is the trained entry's options (attention=False: its tuned file; on a set without one, the settings it ran
# at, e.g. BASE='attention=False; embedding_size=128; ...'). PRECISION: matmul precision, fp32 unless set (auto: bf16
# where the CPU runs it natively).
#
# MGFormer attention=False trains once a seed, as its own board row ($RESULTS/runs/<dataset>/, its best epoch kept in
# $CHECKPOINTS), and every (filter, weight) is scored from that checkpoint, not trained again
# (recbole_mgformer/benchmark/scoring.py); where its record exists without a checkpoint (trained before checkpoints
# were kept), the record moves to $RESULTS/exploration/runs/<dataset>/ and the entry trains again
# (--retrain-missing-checkpoints), so the hybrid and its trained entry are the same models. The best epoch is chosen
# on the entry's validation NDCG@20 without the residual (each record says so).
#
# Usage: DATASET=gowalla FILTERS="chebycf bspm" CARRY_TO=gowalla-full bash experiments/hybrid_grid.sh [--key=value ...]
# (DATASET defaults to ml-100k; the arguments go to every benchmark command; PYTHON picks the interpreter; RESULTS,
# GRID and CHECKPOINTS the folders; FILTER, a single filter, is FILTERS' older name). Several processes may run it at
# once: each run is claimed by one. Rerun after a stop: finished records are skipped, a run resumes from its
# checkpoint.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
DATASET=${DATASET:-ml-100k}
RESULTS=${RESULTS:-results}
GRID=${GRID:-$RESULTS/exploration/hybrid-grid}
CHECKPOINTS=${CHECKPOINTS:-saved/benchmark}
SEEDS=${SEEDS:-0,1,2}
BASE=${BASE:-attention=False}
PRECISION=${PRECISION:-fp32}
read -r -a FILTER_LIST <<< "${FILTERS:-${FILTER:-gfcf}}"
read -r -a WEIGHTS <<< "${WEIGHTS:-0.25 0.5 1 2}"
if [ "${#FILTER_LIST[@]}" -gt 1 ] && [ -n "${FILTER_ARGS:-}" ]; then
  echo "FILTER_ARGS sets one filter's settings; with several filters give FILTER_ARGS_<filter>" >&2
  exit 2
fi
filter_args() {  # the residual's settings for filter $1 on dataset $2
  local own="FILTER_ARGS_$1"
  if [ -n "${!own:-}" ]; then echo "${!own}"
  elif [ -n "${FILTER_ARGS:-}" ]; then echo "$FILTER_ARGS"
  else $PY -m recbole_mgformer.benchmark.hybrid "$2" "$1" "$RESULTS/runs"
  fi
}
entry() { echo "MGFormer[$BASE; filter_residual=$1; filter_residual_weight=$2]"; }
common() {  # the options of every benchmark command on dataset $2 with filter $1
  echo --datasets "$2" --checkpoint_dir "$CHECKPOINTS" --retrain-missing-checkpoints --precision="$PRECISION" \
    "$(filter_args "$1" "$2")"
}

CANDIDATES=() CANDIDATE_ENTRIES=()  # "filter weight" and its entry, side by side
for FILTER in "${FILTER_LIST[@]}"; do
  ARGS=$(filter_args "$FILTER" "$DATASET")
  echo "$DATASET: $FILTER residual: $ARGS"
  ENTRIES=(); for W in "${WEIGHTS[@]}"; do ENTRIES+=("$(entry "$FILTER" "$W")"); CANDIDATES+=("$FILTER $W"); done
  CANDIDATE_ENTRIES+=("${ENTRIES[@]}")
  # shellcheck disable=SC2046 # the filter's arguments are words
  $PY -m recbole_mgformer.benchmark --models "$(IFS=,; echo "${ENTRIES[*]}")" --seeds 0 --results "$GRID" \
    --trained-results "$RESULTS" --choice-made-on none $(common "$FILTER" "$DATASET") "$@"
done

CHOSEN=$($PY -m recbole_mgformer.benchmark.hybrid --best-on-validation "$GRID/runs" "$DATASET" "${CANDIDATE_ENTRIES[@]}")
for I in "${!CANDIDATE_ENTRIES[@]}"; do  # back to the chosen entry's filter and weight
  if [ "${CANDIDATE_ENTRIES[$I]}" = "$CHOSEN" ]; then read -r FILTER BEST <<< "${CANDIDATES[$I]}"; fi
done
echo "chosen on $DATASET's validation NDCG@20 at seed 0: $FILTER, weight $BEST"
# shellcheck disable=SC2046
$PY -m recbole_mgformer.benchmark --models "$(entry "$FILTER" "$BEST")" --seeds "$SEEDS" --results "$RESULTS" \
  --choice-made-on validation $(common "$FILTER" "$DATASET") "$@"
if [ -n "${CARRY_TO:-}" ]; then
  echo "carried unchanged to $CARRY_TO: $FILTER, weight $BEST"
  # shellcheck disable=SC2046
  $PY -m recbole_mgformer.benchmark --models "$(entry "$FILTER" "$BEST")" --seeds "$SEEDS" --results "$RESULTS" \
    --choice-made-on validation --choice-dataset "$DATASET" $(common "$FILTER" "$CARRY_TO") "$@"
fi
