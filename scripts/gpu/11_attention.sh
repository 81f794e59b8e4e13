#!/usr/bin/env bash
# GPU step for notebook 11, attention (at most a minute on an H200), checked first, then timed:
#   results/<gpu>/reductions_attention.json   attention B=4 H=16 L=1024, 4096 d=64 fp32: Numba
#                                             fused and unfused against torch naive, SDPA
#                                             efficient fp32 and SDPA flash bf16
#   results/<gpu>/reductions_attention_ncu.json   DRAM bytes of both attention pipelines (ncu)
# Run from the repository root:  PYTHONPATH=$PWD:/tmp/site bash scripts/gpu/11_attention.sh
LESSON=attention
source "$(dirname "$0")/lesson_parts.sh"
part 43 attention
if command -v ncu >/dev/null; then part 12 ncu-attention --length 4096 --heads 16 --limit 10; else echo "no ncu: DRAM bytes not profiled"; fi
