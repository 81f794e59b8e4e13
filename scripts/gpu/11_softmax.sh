#!/usr/bin/env bash
# GPU step for notebook 11, softmax (cut off after 2 minutes). Every implementation is checked first
# (fresh random inputs, poisoned outputs, a float64 or torch reference), then timed with CUDA events,
# L2 flushed before every repeat:
#   results/<gpu>/reductions_softmax.json     softmax 4096x1024, 4096x4096, 16384x4096: Numba
#                                             unfused / fused (row in registers) / pipelined /
#                                             16-byte (a row per warp or few warps) / online against
#                                             torch.softmax, naive torch, torch.compile
# Run from the repository root:  PYTHONPATH=$PWD:/tmp/site bash scripts/gpu/11_softmax.sh
LESSON=softmax
source "$(dirname "$0")/lesson_parts.sh"
part 120 softmax
