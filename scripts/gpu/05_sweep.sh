#!/usr/bin/env bash
# Notebook 05's measurement: the size sweep n = 2^10 ... 2^28 (every power of two, float32)
# of the three-kernel and fused Numba pipelines against NumPy, CuPy, torch eager,
# torch.compile and a device-to-device copy, 25 repeats per size in three timing modes,
# every implementation checked against NumPy first; then the launch-overhead measurement.
# Writes results/h200/bench_sweep.json, launch_overhead.json, sweep_runtime.png,
# sweep_bandwidth.png, headline.png and launch_overhead.png.  About 2 minutes on an H200.
# Run from the repository root:  PYTHONPATH=$PWD:/tmp/site bash scripts/gpu/05_sweep.sh
set -euo pipefail
python3 -c "import helpers; helpers.start()"
timeout 220 python3 -m helpers.lessons.sweep --sizes '2^10..2^28' --repeats 25 --impl all
