#!/usr/bin/env bash
# GPU step for notebook 14 (at most 30 s on an H200), checked first, then timed:
#   results/<gpu>/reductions_adamw.json       AdamW on one 2^26 tensor and a list of 200:
#                                             Numba fused / unfused against torch.optim.AdamW
# Run from the repository root:  PYTHONPATH=$PWD:/tmp/site bash scripts/gpu/14_optimizer.sh
LESSON=optimizer
source "$(dirname "$0")/lesson_parts.sh"
part 30 adamw
