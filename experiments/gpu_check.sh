#!/usr/bin/env bash
# The checks only a GPU can make, as one short script for a lent GPU machine (a bare image with python3, a CUDA
# torch, numpy, pandas and scipy, but no RecBole): pass RecBole's wheels in a folder (default .whl, made on a
# machine with pip access by `pip download --no-deps --python-version 3.12 ... recbole==1.2.1 colorlog==4.7.2
# texttable thop`) and the imported atomic files in dataset/.
# Usage: bash experiments/gpu_check.sh OUT_DIR [SECONDS_FOR_TRAINING] [MODELS] [SEEDS]
#   0. the tests that a visible GPU changes (tests/config/test_config_check.py, tests/training/test_distributed.py);
#   1. one training step of LightGCN, DirectAU, MGFormer without attention and MGFormer in fp32 and bf16 on the GPU,
#      side by side (experiments/step_time.py), into results/performance/<gpu>/, and MGFormer with the whole key side
#      in one chunk (key_chunk_size is sized for a CPU's cache; on the H200 the step ran its matmuls at 2% of
#      their rate);
#   2. amazon-beauty campaign runs on the GPU (MODELS, default its `feature_map: focused` ablation, at SEEDS, default
#      2,1, as on 2026-11-27; fp32 where a model has the option, as the campaign's rows), for as long as
#      SECONDS_FOR_TRAINING allows (default 300); a finished seed writes its record, and a run whose record exists is
#      skipped. A model's equal-budget search must have landed first (this image has no Ray to run one).
# Everything it writes lands in OUT_DIR/results.tgz, its log in OUT_DIR/log.txt.
# Records name the checkout's commit (git): where the tree travels without .git, send a copy of it and point git
# there (here: `cp -r .git .gitcopy`, ignored; there: `export GIT_DIR=$PWD/.gitcopy GIT_WORK_TREE=$PWD`).
set -uo pipefail
out=${1:?usage: $0 OUT_DIR [SECONDS_FOR_TRAINING] [MODELS] [SEEDS]}
train_seconds=${2:-300}
models=${3:-MGFormer[feature_map=focused]}
seeds=${4:-2,1}
cd "$(dirname "$0")/.."
mkdir -p "$out"
exec > >(tee "$out/log.txt") 2>&1
export PYTHONUNBUFFERED=1 PYTHONPATH="/tmp/site:$PWD"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  "${WHEELS:-.whl}"/*.whl || exit 1
nvidia-smi -L
python3 -c "import torch, numpy, pandas, scipy, recbole; print('torch', torch.__version__, 'numpy', numpy.__version__,
    'pandas', pandas.__version__, 'scipy', scipy.__version__, 'recbole', recbole.__version__)"
gpu=$(python3 -c "import torch; print(torch.cuda.get_device_name(0).lower().replace(' ', '-'))")
touch /tmp/gpu_check.start

# the tests whose behaviour depends on a visible GPU (one needs Ray, which this image lacks, and fails for that)
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/config/test_config_check.py tests/training/test_distributed.py -m "not slow"

SECONDS=0
timeout 170 python3 experiments/step_time.py --device cuda --repeats 5 --steps 20 --warmup 5 \
  --models "LightGCN,DirectAU,MGFormer[attention=False],MGFormer[precision=fp32],MGFormer[precision=bf16],MGFormer[precision=fp32; key_chunk_size=65536]" \
  --results "results/performance/$gpu"
echo "step_time: exit $?, ${SECONDS} s"

SECONDS=0
python3 - "$models" <<'EOF' && train=1 || train=0  # no search can run here: each entry's tuned file must be there
import sys
from recbole_mgformer.benchmark import parse_entry, split_models
from recbole_mgformer.benchmark.tuning import tuned_file_for
missing = [e for e in split_models(sys.argv[1]) if tuned_file_for(*parse_entry(e), "amazon-beauty") is None]
sys.exit(f"no tuned file for {missing} on amazon-beauty: let their searches land first" if missing else 0)
EOF
if (( train )); then
  precision=$([[ $models == *MGFormer* || $models == *DirectAU* ]] && echo --precision=fp32)
  timeout "$train_seconds" python3 -m recbole_mgformer.benchmark --datasets amazon-beauty --seeds "$seeds" \
    --models "$models" $precision --device=cuda --checkpoint_dir /tmp/gpu_check_ckpt
  echo "campaign runs ($models, seeds $seeds): exit $?, ${SECONDS} s"
fi

find results -type f -newer /tmp/gpu_check.start -print0 | tar -czf "$out/results.tgz" --null -T -
tar -tzf "$out/results.tgz"
