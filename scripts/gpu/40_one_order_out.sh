#!/usr/bin/env bash
# GPU step for notebooks 06 and 08 (about a minute on an H200):
#   results/<gpu>/transfers.json + .png          host<->device GB/s (pageable, pinned) against the
#                                                 device copy, and the pipeline on host arrays
#   results/<gpu>/fuser_vs_torch_compile.json     the tiny fuser, the hand-written fused kernel and
#                                                 torch.compile: GPU time and host time per call
# Run from the repository root:  PYTHONPATH=$PWD:/tmp/site bash scripts/gpu/40_one_order_out.sh
set -euo pipefail
python3 -m helpers.lab.transfers
python3 -m helpers.lab.fuser_vs_compile
