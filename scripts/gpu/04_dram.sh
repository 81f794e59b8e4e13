#!/usr/bin/env bash
# Count the trips in hardware: Nsight Compute's DRAM bytes for every launch of the
# three-kernel and fused pipelines at n = 2^20, 2^22 (arrays fit in L2), 2^24, 2^26 and 2^28 (arrays at least 4x L2), under two cache
# policies: --cache-control all (flush before each kernel) and none (L2 kept between
# kernels). --clock-control none: the GPU's clocks are left alone.
# Writes results/h200/ncu_dram.json, with the ledger-vs-ncu 3% check (pass/fail) in it.
# Run from the repo root:  PYTHONPATH=$PWD:/tmp/site bash scripts/gpu/04_dram.sh
set -euo pipefail
if ! command -v ncu >/dev/null; then echo "ncu is not on PATH: skipping the hardware count"; exit 0; fi
ncu --version | tail -1
python3 -m helpers.lessons.dram collect --log2-sizes 20,22,24,26,28 --modes all,none
