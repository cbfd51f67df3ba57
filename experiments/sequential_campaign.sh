#!/usr/bin/env bash
# The sequential equal-budget campaign (issue 82): SASRec, GRU4Rec and EAGPS on a sequential protocol, each searched
# with the same budget (8 random trials, RecBole's or the model's defaults first, ASHA grace 5 of at most 50 epochs,
# search seed 0), then its best settings trained at 3 seeds; then the EAGPS ablations (EAGPS-ablations: Table 5's
# variants that are options) at the tuned EAGPS's settings. Every model trains under the same epoch cap and early
# stopping (50 epochs, patience 10, every epoch evaluated), as an equal-budget comparison requires.
# Usage: DATASET=ml-100k-seq bash experiments/sequential_campaign.sh A|B [--key=value ...]
# Two streams, one thread each, side by side on a 2-core machine; one alone runs everything in its order. Rerun a
# stream to resume it: searches continue from their records (results/tuning/<dataset>/<stem>.records/), runs from
# their checkpoints, and each run is claimed by the stream working on it (recbole_mgformer.benchmark.claims).
# A: SASRec (the slowest), GRU4Rec, the ablations.  B: EAGPS, its ablations, GRU4Rec, SASRec.
# Then each stream trains the tuned models under train_protocol: sequence (whole windows, a loss at every position) at
# their tuned settings, not searched again, 3 seeds, for the page's paired comparison with RecBole's protocol; a model
# whose search has not finished (in the other stream) is skipped, and a later rerun trains it.
# A dataset that sets train_protocol: sequence itself (ml-100k-seq-whole) is the campaign under that protocol: its
# searches and seeds are the whole-sequence rows, and this last step is left out.
set -euo pipefail

main() {
  local stream=${1:-}
  shift || true
  cd "$(dirname "$0")/.."
  export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
  case "$stream" in
    A) benchmark "$@" --models SASRec
       benchmark "$@" --models GRU4Rec
       benchmark "$@" --models EAGPS-ablations
       for model in SASRec GRU4Rec EAGPS; do whole_sequences "$model" "$@"; done ;;
    B) benchmark "$@" --models EAGPS-ablations
       benchmark "$@" --models GRU4Rec
       benchmark "$@" --models SASRec
       for model in EAGPS GRU4Rec SASRec; do whole_sequences "$model" "$@"; done ;;
    *) echo "usage: $0 A|B [--key=value ...] (the stream to run or resume)" >&2; return 2 ;;
  esac
}

benchmark() {
  "${PYTHON:-.venv/bin/python}" -m recbole_mgformer.benchmark --datasets "${DATASET:-ml-100k-seq}" --seeds 0,1,2 \
    --tune-budget 8 --tune-epochs 50 --tune-grace 5 --tune-defaults-first --tune-cpus 1 \
    --epochs=50 --stopping_step=10 --eval_step=1 "$@"
}

whole_sequences() {
  local model=$1
  shift
  local dataset=${DATASET:-ml-100k-seq}
  if grep -qE '^train_protocol: *sequence' "properties/dataset/$dataset.yaml" 2>/dev/null; then
    return 0  # the dataset trains every model on whole sequences already (ml-100k-seq-whole)
  fi
  if [[ ! -f "properties/benchmark/$dataset/$model.yaml" ]]; then
    echo "$model[train_protocol=sequence]: skipped, $model has no tuned settings for $dataset yet" >&2
    return 0
  fi
  "${PYTHON:-.venv/bin/python}" -m recbole_mgformer.benchmark --datasets "$dataset" --seeds 0,1,2 \
    --epochs=50 --stopping_step=10 --eval_step=1 "$@" --models "$model[train_protocol=sequence]"
}

# one line, parsed whole before it runs: editing this file never changes a running stream
main "$@"; exit $?
