#!/usr/bin/env bash
# GPU step for notebook 12, attention, checked first, then timed (cut off after 4 minutes, the long run and ncu after 2 each):
#   results/<gpu>/reductions_attention.json   attention B=4 H=16 L=1024, 4096 d=64: Numba fused (one thread
#                                             per row, at five block shapes), register-tiled FP32, TF32 and
#                                             3xTF32 tensor cores (and 3xTF32 with tile sums at its default
#                                             shape), the unfused pipeline in FP32 and TF32,
#                                             against torch naive (TF32 off and on), SDPA efficient fp32 and
#                                             SDPA flash bf16, with cuBLAS's FP32 rate measured in the run
#   results/<gpu>/reductions_attention_long.json  the fused kernels at L = 32768, where S and P would need 550 GB
#   results/<gpu>/reductions_attention_ncu.json   DRAM bytes of every pipeline (ncu)
# Run from the repository root:  PYTHONPATH=$PWD:/tmp/site bash scripts/gpu/12_attention.sh
LESSON=attention
source "$(dirname "$0")/lesson_parts.sh"
part 240 attention
part 120 attention-long
if command -v ncu >/dev/null; then part 120 ncu-attention --length 4096 --heads 16 --limit 110; else echo "no ncu: DRAM bytes not profiled"; fi
