#!/usr/bin/env bash
# GPU step for notebooks 11 and 12 (at most 2 minutes on an H200: each part has its own time limit): fusing through a reduction.
# Every implementation is checked first (fresh random inputs, poisoned outputs, float64 or
# torch reference), then timed with CUDA events (GPU time, median):
#   results/<gpu>/reductions_softmax.json     softmax 4096x1024, 4096x4096, 16384x4096: Numba
#                                             unfused / fused (row in registers) / online against
#                                             torch.softmax, naive torch, torch.compile
#   results/<gpu>/reductions_attention.json   attention B=4 H=16 L=1024, 4096 d=64 fp32: Numba
#                                             fused and unfused against torch naive, SDPA
#                                             efficient fp32 and SDPA flash bf16
#   results/<gpu>/reductions_adamw.json       AdamW on one 2^26 tensor and a list of 200:
#                                             Numba fused / unfused against torch.optim.AdamW
#   results/<gpu>/reductions_attention_ncu.json   DRAM bytes of both attention pipelines (ncu)
# Each part writes its record after every size, so a part cut short keeps what it measured.
# Run from the repository root:  PYTHONPATH=$PWD:/tmp/site bash scripts/gpu/70_reductions.sh
set -uo pipefail
export PYTHONUNBUFFERED=1
out=()
[ -n "${OUT:-}" ] && out=(--out "$OUT")
part() { local limit=$1; shift; echo "== $*"; timeout "$limit" python3 -m helpers.lab.reductions "$@" "${out[@]}"; echo "rc=$? ($*)"; }
part 35 softmax
part 43 attention
part 30 adamw
if command -v ncu >/dev/null; then part 12 ncu-attention --length 4096 --heads 16 --limit 10; else echo "no ncu: DRAM bytes not profiled"; fi
