#!/usr/bin/env bash
# GPU step for notebook 12 (at most 30 s on an H200), checked first, then timed:
#   results/<gpu>/reductions_adamw.json       AdamW on one 2^26 tensor and a list of 200:
#                                             Numba fused / unfused against torch.optim.AdamW
# Run from the repository root:  PYTHONPATH=$PWD:/tmp/site bash scripts/gpu/12_optimizer.sh
set -uo pipefail
export PYTHONUNBUFFERED=1
out=()
[ -n "${OUT:-}" ] && out=(--out "$OUT")
part() { local limit=$1; shift; echo "== $*"; timeout "$limit" python3 -m helpers.lessons.optimizer "$@" "${out[@]}"; echo "rc=$? ($*)"; }
part 30 adamw
