#!/usr/bin/env bash
# Notebook 09's measurement (launches cost too): CUDA graphs beside fusion.
#   python -m helpers.lessons.launches: host time per launch against array arguments (0..5,
#      lazy and explicit signature) and {three kernels, fused} x {direct, graph} beside CuPy,
#      torch eager and torch.compile (default and reduce-overhead), every variant checked first.
# Writes results/h200/launches.json, launches_arguments.png, launches_two_by_two.png (also to $OUT).
# About 3 minutes on an H200 (at most 100 + 55 + 3 x 160 s; tests/test_graphs.py runs in the pytest phase).  Run from the repository root:  PYTHONPATH=$PWD:/tmp/site bash scripts/gpu/09_launches.sh
set -uo pipefail
export PYTHONUNBUFFERED=1
SIZES=${LAUNCH_SIZES:-'2^10..2^28:2'}  # every other power of two
python3 -c "import helpers; helpers.start()"
# Numba, CuPy and torch eager first; each torch.compile mode in a process of its own, merged into
# the same result, so that one that fails or hangs cannot take the other measurements with it.
timeout 100 python3 -m helpers.lessons.launches --sizes "$SIZES" --repeats 20 --impl three,fused,three-graph,fused-graph,best-graph,cupy,torch
rc=$?
timeout 55 python3 -m helpers.lessons.launches --sizes "$SIZES" --repeats 20 --impl compile --merge --no-plots
echo "torch.compile default: rc=$?"
# reduce-overhead records CUDA graphs of its own.  A run that is stuck is sent SIGUSR1 first, which makes
# it print every thread's stack (where it is stuck), then killed.  If one compilation for every size
# (dynamic=True) cannot be set up, the same peer is measured compiled per size (dynamic=False).
timeout -s USR1 -k 10 150 python3 -m helpers.lessons.launches --sizes "$SIZES" --repeats 20 --impl compile-ro --merge
ro=$?
echo "torch.compile reduce-overhead (dynamic=True): rc=$ro"
if [ $ro -ne 0 ]; then
    timeout -s USR1 -k 10 150 python3 -m helpers.lessons.launches --sizes "$SIZES" --repeats 20 --impl compile-ro --merge --compile-per-size
    echo "torch.compile reduce-overhead (dynamic=False): rc=$?"
fi
# The same mode told that a, b and c stay where they are (no copy into torch's buffers before a replay).
timeout -s USR1 -k 10 150 python3 -m helpers.lessons.launches --sizes "$SIZES" --repeats 20 --impl compile-ro-static --merge
echo "torch.compile reduce-overhead, static inputs: rc=$?"
if [ -n "${OUT:-}" ]; then mkdir -p "$OUT"; cp results/h200/launches*.json results/h200/launches*.png "$OUT"/ 2>/dev/null; fi
exit $rc
