#!/usr/bin/env bash
# GPU step for notebook 08 (under a minute on an H200):
#   results/<gpu>/transfers.json + .png          host<->device GB/s (pageable, pinned) against the
#                                                 device copy, and the pipeline on host arrays
# Run from the repository root:  PYTHONPATH=$PWD:/tmp/site bash scripts/gpu/08_transfers.sh
set -euo pipefail
python3 -m helpers.lessons.transfers host-link
