#!/usr/bin/env bash
# The bytes-in-flight model's measurement (Little's law), one run: DRAM latency by pointer chase
# (one thread, random cache lines in 4 MiB, 256 MiB and 1 GiB buffers), achieved bandwidth of
# streaming probe kernels against bytes in flight per SM (1-3 reads : 1 write, 4- and 16-byte
# accesses, 1/2/4 groups per thread in flight, 1-8 resident blocks per SM), every series kernel
# (add, multiply, scale, a copy, fused and notebook 07's variants, 16-byte three kernels) and the
# 2x2 {4-byte, 16-byte} x {three kernels, fused}, and scale_kernel with its division replaced by a
# multiply (a diagnostic).  Writes results/<gpu>/bytes_in_flight.json
# and bytes_in_flight.png, bytes_in_flight_model.png (copied to $OUT if set), and prints the
# model's prediction against each measurement.
# About 45 s on an H200 (the first run took 42 s, most of it compiling ~40 kernels).
# Run from the repository root:  PYTHONPATH=$PWD:/tmp/site bash scripts/gpu/10_inflight.sh
set -euo pipefail
export PYTHONUNBUFFERED=1
status=0  # a run cut short still leaves its checkpointed JSON: copy it either way
timeout 115 python3 -m helpers.lessons.inflight --repeats 15 --n-probe $((1 << 26)) --n-kernels $(((1 << 26) + 3)) || status=$?
if [ -n "${OUT:-}" ]; then
    for d in results/h200 results/gpu; do cp "$d"/bytes_in_flight*.json "$d"/bytes_in_flight*.png "$OUT"/ 2>/dev/null || true; done
fi
exit $status
