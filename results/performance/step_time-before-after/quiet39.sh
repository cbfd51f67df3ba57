#!/bin/bash
# 2026-11-28: MGFormer's CPU step before (52f5566, the first check's "after") and now (69ae962), ABBA, on paused cores.
set -x
PY=/work/main/.venv/bin/python
M="LightGCN[n_layers=3],MGFormer,MGFormer[attention=False],DirectAU"
for side in before after after before; do
  dir=/work/st-$side
  (cd $dir && PYTHONPATH=$dir $PY -c "import recbole_mgformer; print(recbole_mgformer.__file__)" && \
   PYTHONPATH=$dir $PY benchmarks/step_time.py --threads 1 --repeats 5 --models "$M" --results /work/logs/st39-$side-$RANDOM)
done
echo QUIET-DONE
