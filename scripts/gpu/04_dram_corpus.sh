#!/usr/bin/env bash
# The trip ledger beside Nsight Compute's DRAM bytes for the series kernels and a few
# corpus shapes (a copy, a scalar-bounded copy, saxpy, float64, two stencils, a
# transpose, a block reduction) at n = 2^26 elements per array (at least 4x the L2),
# with the L2 kept between kernels (--cache-control none) and the clocks left alone
# (--clock-control none).  About 60 s on an H200.
# Writes results/h200/ncu_corpus.json (and a copy in $OUT when set); prints a table.
# Run from the repo root:  PYTHONPATH=$PWD:/tmp/site bash scripts/gpu/04_dram_corpus.sh
set -euo pipefail
if ! command -v ncu >/dev/null; then echo "ncu is not on PATH: skipping the hardware count"; exit 0; fi
ncu --version | tail -1
timeout 115 python3 -m helpers.lessons.dram corpus --log2-n 26
if [ -n "${OUT:-}" ]; then cp results/*/ncu_corpus.json "$OUT"/ 2>/dev/null || true; fi
