#!/bin/bash
# The bounded hybrid attempt on ml-100k: MGFormer attention=False (its tuned file) plus GF-CF's scores as a residual
# (filter_residual: gfcf, GF-CF at its own ml-100k search's k 64 and alpha 1.0). The weight is chosen on validation
# NDCG@20 at seed 0 from {0.25, 0.5, 1, 2} (records to results/exploration/hybrid-grid/), then the chosen weight runs
# at seeds 0, 1, 2 onto the board. Usage: bash benchmarks/hybrid_grid.sh   (PYTHON=... to pick the interpreter)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
EXTRA="--precision=fp32 --filter_residual_k=64 --filter_residual_alpha=1.0"
GRID=results/exploration/hybrid-grid
entry() { echo "MGFormer[attention=False; filter_residual=gfcf; filter_residual_weight=$1]"; }
for W in 0.25 0.5 1 2; do
  $PY -m recbole_mgformer.benchmark --models "$(entry $W)" --datasets ml-100k --seeds 0 \
    --results "$GRID" --checkpoint_dir saved/hybrid-grid $EXTRA
done
BEST=$($PY - "$GRID" <<'PY'
import glob, json, sys
runs = [json.load(open(f)) for f in glob.glob(f"{sys.argv[1]}/runs/ml-100k/*residual*-seed0.json")]
print(max(runs, key=lambda r: r["valid"]["ndcg@20"])["overrides"]["filter_residual_weight"])
PY
)
echo "weight chosen on validation: $BEST"
$PY -m recbole_mgformer.benchmark --models "$(entry "$BEST")" --datasets ml-100k --seeds 0,1,2 $EXTRA
