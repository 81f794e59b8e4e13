#!/usr/bin/env bash
# GPU step for notebook 11, softmax (at most 35 s on an H200). Every implementation is checked first
# (fresh random inputs, poisoned outputs, a float64 or torch reference), then timed with CUDA events:
#   results/<gpu>/reductions_softmax.json     softmax 4096x1024, 4096x4096, 16384x4096: Numba
#                                             unfused / fused (row in registers) / online against
#                                             torch.softmax, naive torch, torch.compile
# Run from the repository root:  PYTHONPATH=$PWD:/tmp/site bash scripts/gpu/11_softmax.sh
LESSON=softmax
source "$(dirname "$0")/lesson_parts.sh"
part 35 softmax
