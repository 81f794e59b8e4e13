#!/usr/bin/env bash
# Notebook 07's measurement: every fused variant of helpers/lessons/roofline/kernels.py, torch.compile on the
# same expression, the device-to-device copy and the 3-read/1-write streaming kernels, all in one
# run, at n = 2^26 and 2^28 (and +3, for the scalar tail).  Writes results/<gpu>/roofline.json and
# roofline.png.  About a minute on an H200.
# Run from the repository root:  PYTHONPATH=$PWD:/tmp/site bash scripts/gpu/07_roofline.sh
set -euo pipefail
python3 -m helpers.lessons.roofline --repeats 30
