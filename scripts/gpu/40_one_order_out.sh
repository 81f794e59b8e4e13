#!/usr/bin/env bash
# GPU step for notebooks 06 and 08 (about a minute on an H200):
#   results/<gpu>/transfers.json + .png   host<->device GB/s (pageable, pinned) against the
#                                          device copy, and the pipeline on host arrays
#                                          against the pipeline on device arrays
#   results/<gpu>/fuser_vs_torch_compile.json   the tiny fuser's kernel, the hand-written
#                                          fused kernel and torch.compile on (a + b) * c / s
# Run from the repository root:  PYTHONPATH=$PWD:/tmp/site bash scripts/gpu/40_one_order_out.sh
set -euo pipefail
python3 - <<'PY'
import helpers
helpers.start()
if helpers.is_simulator():
    raise SystemExit("no GPU: this step measures the host link and needs one")

import numpy as np
from numba import cuda
from helpers.checks import random_inputs
from helpers.fuser import fuse
from helpers.pipeline import fused_kernel, reference
from helpers.results import write_result
from helpers.sizes import BLOCK_SIZE, blocks_for, default_size
from helpers.timing import time_gpu
from helpers.lab.transfers import measure_transfers, pipeline_timings, plot_transfers

# 1. Host link against device memory, and the pipeline with and without implicit copies.
record = measure_transfers()
n = default_size()
pipeline = pipeline_timings(n, repeats=5)
record["pipeline"] = {
    "n": n,
    "median_ms": {label: t.median_ms for label, t in pipeline.items()},
    "spread_ms": {label: t.spread_ms for label, t in pipeline.items()},
}
path = write_result("transfers", record)
plot_transfers(record, title=f"host link against device memory ({helpers.banner()[9:]})").savefig(
    path.with_suffix(".png"), dpi=120)
for label, values in record["gbs"].items():
    print(f"{label:40s} {values[-1]:8.1f} GB/s at {record['sizes_bytes'][-1]} bytes")
for label, t in pipeline.items():
    print(t)
print("wrote", path)

# 2. The tiny fuser against the hand-written kernel and torch.compile, same expression.
fused = fuse(lambda a, b, c, s: (a + b) * c / s, scalars=("s",))
rows = []
try:
    import torch
    compiled = torch.compile(lambda a, b, c, s: (a + b) * c / s, dynamic=False)
except Exception as exc:  # torch missing or broken: still record the Numba kernels
    print("torch.compile unavailable:", exc)
    torch = compiled = None

def time_torch(run, repeats=50, warmup=3):
    for _ in range(warmup):
        run()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    samples = []
    for _ in range(repeats):
        start.record(); run(); end.record(); end.synchronize()
        samples.append(start.elapsed_time(end))
    return float(np.median(samples))

s = np.float32(1.5)
for n in (2**20, 2**24, 2**28):
    a, b, c = random_inputs(n)
    da, db, dc = (cuda.to_device(x) for x in (a, b, c))
    out_fuser, out_hand = cuda.device_array(n, np.float32), cuda.device_array(n, np.float32)
    blocks = blocks_for(n)
    run_fuser = lambda: fused[blocks, BLOCK_SIZE](da, db, dc, s, out_fuser)
    run_hand = lambda: fused_kernel[blocks, BLOCK_SIZE](da, db, dc, s, out_hand)
    run_fuser(); run_hand(); cuda.synchronize()
    expected = reference(a, b, c, s)
    row = {
        "n": n,
        "bytes_moved": 16 * n,
        "fuser_ms": time_gpu(run_fuser, label="fuser").median_ms,
        "hand_written_ms": time_gpu(run_hand, label="hand-written").median_ms,
        "fuser_equals_hand_written": bool(np.array_equal(out_fuser.copy_to_host(), out_hand.copy_to_host())),
        "fuser_equals_numpy": bool(np.array_equal(out_fuser.copy_to_host(), expected)),
    }
    if compiled is not None:
        ta, tb, tc = (torch.as_tensor(x, device="cuda") for x in (a, b, c))
        result = compiled(ta, tb, tc, float(s))
        row["torch_compile_ms"] = time_torch(lambda: compiled(ta, tb, tc, float(s)))
        got = result.cpu().numpy()
        row["torch_compile_equals_numpy"] = bool(np.array_equal(got, expected))
        row["torch_compile_max_abs_diff"] = float(np.max(np.abs(got - expected)))
        del ta, tb, tc, result
    rows.append(row)
    print(row)
    del da, db, dc, out_fuser, out_hand
versions = {"torch": getattr(torch, "__version__", None)}
print("wrote", write_result("fuser_vs_torch_compile", {"expression": "(a + b) * c / s", "rows": rows, **versions}))
PY
