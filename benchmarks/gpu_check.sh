#!/usr/bin/env bash
# The checks only a GPU can make, as one short script for a lent GPU machine (a bare image with python3, a CUDA
# torch, numpy, pandas and scipy, but no RecBole): pass RecBole's wheels in a folder (default .whl, made on a
# machine with pip access by `pip download --no-deps --python-version 3.12 ... recbole==1.2.1 colorlog==4.7.2
# texttable thop`) and the imported atomic files in dataset/.
# Usage: bash benchmarks/gpu_check.sh OUT_DIR [SECONDS_FOR_TRAINING]
#   1. one training step of LightGCN, DirectAU, MGFormer without attention and MGFormer in fp32 and bf16 on the GPU,
#      side by side (benchmarks/step_time.py), into results/performance/<gpu>/;
#   2. the amazon-beauty campaign's `feature_map: focused` seeds 2 and 1 on the GPU (fp32, as the campaign's other
#      MGFormer rows), for as long as SECONDS_FOR_TRAINING allows (default 300); a finished seed writes its record.
# Everything it writes lands in OUT_DIR/results.tgz, its log in OUT_DIR/log.txt.
set -uo pipefail
out=${1:?usage: $0 OUT_DIR [SECONDS_FOR_TRAINING]}
train_seconds=${2:-300}
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

SECONDS=0
timeout 170 python3 benchmarks/step_time.py --device cuda --repeats 5 --steps 20 --warmup 5 \
  --models "LightGCN,DirectAU,MGFormer[attention=False],MGFormer[precision=fp32],MGFormer[precision=bf16]" \
  --results "results/performance/$gpu"
echo "step_time: exit $?, ${SECONDS} s"

SECONDS=0
timeout "$train_seconds" python3 -m recbole_mgformer.benchmark --datasets amazon-beauty --seeds 2,1 \
  --models "MGFormer[feature_map=focused]" --precision=fp32 --device=cuda --checkpoint_dir /tmp/gpu_check_ckpt
echo "focused seeds: exit $?, ${SECONDS} s"

find results -type f -newer /tmp/gpu_check.start -print0 | tar -czf "$out/results.tgz" --null -T -
tar -tzf "$out/results.tgz"
