#!/bin/bash
# The bounded hybrid attempt (issue 55): MGFormer attention=False plus a filter's scores as a residual
# (filter_residual: $FILTER, gfcf, chebycf or bspm, at its settings from the dataset's own search of that filter,
# properties/benchmark/<dataset>/<GFCF|ChebyCF|BSPM>.yaml, else its paper's in properties/model/:
# recbole_mgformer/benchmark/hybrid.py; $FILTER_ARGS replaces them). The weight is chosen on validation NDCG@20 at
# seed 0 from $WEIGHTS (0.25 0.5 1 2; records to $GRID), then the chosen weight runs at seeds $SEEDS (0,1,2) onto the
# board ($RESULTS).
# $BASE is the trained entry's options (attention=False: its tuned file; on a set without one, the settings it ran
# at, e.g. BASE='attention=False; embedding_size=128; ...').
#
# MGFormer attention=False trains once a seed, as its own board row ($RESULTS/runs/<dataset>/, its best epoch kept in
# $CHECKPOINTS), and every weight is scored from that checkpoint, not trained again
# (recbole_mgformer/benchmark/scoring.py): the grid trains it at seed 0, the last command at seeds 1 and 2, where it
# has no record; where its record exists without a checkpoint (trained before checkpoints were kept), the record
# moves to $RESULTS/exploration/runs/<dataset>/ and the entry trains again (--retrain-missing-checkpoints), so the
# hybrid and its trained entry are the same models. Model selection differs from training the hybrid end to end: the
# best epoch is chosen on the entry's validation NDCG@20 without the residual (each record says so).
# (The ml-100k grid of results/exploration/hybrid-grid/ and its board rows were trained end to end, one model per
# weight, before this: their records exist, so this script skips them.)
#
# Usage: DATASET=amazon-beauty bash experiments/hybrid_grid.sh [--key=value ...]   (DATASET defaults to ml-100k; the
# arguments go to every benchmark command; PYTHON picks the interpreter; RESULTS, GRID and CHECKPOINTS the folders;
# FILTER, FILTER_ARGS, WEIGHTS, BASE and SEEDS as above; PRECISION the matmul precision, fp32 unless set, e.g.
# PRECISION=auto for bf16 where the CPU runs it natively). Several processes may run it at once: each run is claimed
# by one.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
DATASET=${DATASET:-ml-100k}
RESULTS=${RESULTS:-results}
GRID=${GRID:-$RESULTS/exploration/hybrid-grid}
CHECKPOINTS=${CHECKPOINTS:-saved/benchmark}
SEEDS=${SEEDS:-0,1,2}
FILTER=${FILTER:-gfcf}
BASE=${BASE:-attention=False}
PRECISION=${PRECISION:-fp32}
read -r -a WEIGHTS <<< "${WEIGHTS:-0.25 0.5 1 2}"
FILTER_ARGS=${FILTER_ARGS:-$($PY -m recbole_mgformer.benchmark.hybrid "$DATASET" "$FILTER")}
echo "$DATASET: $FILTER residual: $FILTER_ARGS"
COMMON=(--datasets "$DATASET" --checkpoint_dir "$CHECKPOINTS" --retrain-missing-checkpoints --precision="$PRECISION" $FILTER_ARGS "$@")
entry() { echo "MGFormer[$BASE; filter_residual=$FILTER; filter_residual_weight=$1]"; }
ENTRIES=(); for W in "${WEIGHTS[@]}"; do ENTRIES+=("$(entry "$W")"); done
GRID_ENTRIES=$(IFS=,; echo "${ENTRIES[*]}")
$PY -m recbole_mgformer.benchmark --models "$GRID_ENTRIES" --seeds 0 --results "$GRID" --trained-results "$RESULTS" \
  "${COMMON[@]}"
BEST=$($PY - "$GRID/runs" "$DATASET" "${WEIGHTS[@]}" -- "${ENTRIES[@]}" <<'PY'
import json, sys
from recbole_mgformer.benchmark.entries import parse_entry, variant_name
from recbole_mgformer.benchmark.runs import record_path
runs, dataset, *rest = sys.argv[1:]
weights, entries = rest[: rest.index("--")], rest[rest.index("--") + 1 :]
def valid_ndcg(entry):
    return json.loads(record_path(runs, dataset, variant_name(*parse_entry(entry)), 0).read_text())["valid"]["ndcg@20"]
best = max(range(len(entries)), key=lambda i: valid_ndcg(entries[i]))  # the first of equal scores: the smallest weight
print(weights[best])
PY
)
echo "weight chosen on validation NDCG@20 at seed 0: $BEST"
$PY -m recbole_mgformer.benchmark --models "$(entry "$BEST")" --seeds "$SEEDS" --results "$RESULTS" "${COMMON[@]}"
