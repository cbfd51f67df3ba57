#!/usr/bin/env bash
# The amazon-beauty equal-budget campaign (every model tuned with the same budget, three seeds) on a CPU machine: two streams side by side, one thread each.
# Usage: bash experiments/amazon_beauty_campaign.sh A|B [--key=value ...]
# Rerun a stream to resume it: searches, trials and seed runs continue where they stopped, finished ones are skipped.
# What follows A or B goes to every command (e.g. --device=cuda). Every search: 8 random trials, ASHA grace 10 of at
# most 100 epochs, search seed 0. The models with a `precision` option (MGFormer, its variants and DirectAU, which
# share the DirectAU loss) multiply in fp32, as their earlier three-seed Beauty rows did; the rest have no such option.
# The rows the verdict needs come first: MGFormer, `attention: False` and DirectAU before the ablations and the others.
# Each stream ends on the other's last entries (B on A's ablations, A on SGL, the slowest baseline): each run and
# search is claimed by the stream working on it (recbole_mgformer.benchmark.claims), so whichever stream finishes
# first takes the other's seeds still to run, and none is trained twice. (A search in progress is not shared: a
# stream that meets SGL's search running in B skips SGL's seeds and ends; rerun it once the search has finished.)
set -euo pipefail

main() {
  local stream=${1:-}
  shift || true
  cd "$(dirname "$0")/.."
  export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
  case "$stream" in
    A) benchmark "$@" --models "MGFormer,MGFormer[attention=False],MGFormer-ablations" --precision=fp32
       benchmark "$@" --models SGL ;;
    B) benchmark "$@" --models "BPR,LightGCN"
       benchmark "$@" --models DirectAU --precision=fp32
       benchmark "$@" --models "XSimGCL,SimGCL,SGL"
       benchmark "$@" --models "MGFormer-ablations" --precision=fp32 ;;
    *) echo "usage: $0 A|B [--key=value ...] (the stream to run or resume)" >&2; return 2 ;;
  esac
}

benchmark() {
  "${PYTHON:-.venv/bin/python}" -m recbole_mgformer.benchmark --datasets amazon-beauty --seeds 0,1,2 \
    --tune-budget 8 --tune-epochs 100 --tune-grace 10 --tune-cpus 1 "$@"
}

# one line, parsed whole before it runs: editing this file never changes a running stream
main "$@"; exit $?
