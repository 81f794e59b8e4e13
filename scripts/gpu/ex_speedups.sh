#!/usr/bin/env bash
# The payoff cell of every exercise: each reference solution timed against its given
# unfused pipeline at n = 2^26 (float32), 20 repeats each with CUDA events.
# Writes results/h200/exercise_speedups.json (and copies it to "$OUT" when set).
# About 40 seconds on an H200 (JIT compilation and input draws included).
# Run from the repository root:  PYTHONPATH=$PWD:/tmp/site bash scripts/gpu/ex_speedups.sh
set -euo pipefail
python3 -c "import helpers; helpers.start()"
timeout 110 python3 -m helpers.classroom.speedups --size '2^26' --repeats 20
if [ -n "${OUT:-}" ]; then
  mkdir -p "$OUT/results/h200"
  cp results/h200/exercise_speedups.json "$OUT/results/h200/"
fi
