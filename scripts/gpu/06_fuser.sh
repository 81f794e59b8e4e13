#!/usr/bin/env bash
# GPU step for notebook 06 (under a minute on an H200):
#   results/<gpu>/fuser_vs_torch_compile.json     the tiny fuser, the hand-written fused kernel and
#                                                 torch.compile: GPU time and host time per call
# Run from the repository root:  PYTHONPATH=$PWD:/tmp/site bash scripts/gpu/06_fuser.sh
set -euo pipefail
python3 -m helpers.lessons.fuser
