#!/usr/bin/env bash
# The opening page's three claims, measured (notebooks 01-03 read the result):
#  - FP32 lanes: SMs x FP32 lanes per SM, from the device;
#  - "the cores idle while numbers travel": ncu SM / DRAM throughput (% of peak), issue
#    slots in use and warp stall reasons for add, multiply, scale and fused at n = 2^26;
#  - "torch.compile finds the fusion": kernels launched (torch profiler), eager against
#    compiled, the generated Triton kernel, and the result against NumPy.
#  - notebook 02's FMA sweep: fma_chain_kernel timed at 8 to 2,048 FMAs per element (what the
#    notebook shows where there is no GPU).
# Writes results/h200/seed_claims.json and fma_sweep.json (and copies them to $OUT if set). About
# 60 s on an H200 (ncu replays 4 kernels; torch.compile compiles once) and 10 s for the sweep;
# hard limits 115 s and 60 s.
# Run from the repository root:  PYTHONPATH=$PWD:/tmp/site bash scripts/gpu/02_arithmetic.sh
set -euo pipefail
timeout 115 python3 -m helpers.lessons.arithmetic all
timeout 60 python3 -m helpers.lessons.arithmetic sweep
if [ -n "${OUT:-}" ]; then cp results/*/seed_claims.json results/*/fma_sweep.json "$OUT"/ 2>/dev/null || true; fi
