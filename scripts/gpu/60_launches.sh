#!/usr/bin/env bash
# Notebook 09's measurement (launches cost too): CUDA graphs beside fusion.
#   1. an API probe: cuda.core import paths, capture and replay of Numba launches, bitwise
#      equality with direct launches, host time per replay at n = 1024, the refusals;
#   2. python -m helpers.lab.launches: host time per launch against array arguments (0..5,
#      lazy and explicit signature) and {three kernels, fused} x {direct, graph} beside CuPy,
#      torch eager and torch.compile (default and reduce-overhead), every variant checked first.
# Writes results/h200/launches.json, launches_arguments.png, launches_two_by_two.png (also to $OUT).
# About 3 minutes on an H200 (at most 25 + 100 + 55 + 60 s; tests/test_graphs.py runs in the pytest phase).  Run from the repository root:  PYTHONPATH=$PWD:/tmp/site bash scripts/gpu/60_launches.sh
set -uo pipefail
export PYTHONUNBUFFERED=1
SIZES=${LAUNCH_SIZES:-'2^10..2^28:2'}  # every other power of two
timeout 25 python3 - <<'PY'
import time, statistics
import numpy as np
import helpers
helpers.start()
from numba import cuda
from helpers import graphs
from helpers.pipeline import add_kernel, multiply_kernel, scale_kernel, fused_kernel, reference
from helpers.checks import random_inputs, check_close
from helpers.sizes import BLOCK_SIZE, blocks_for
import importlib.metadata as md
for p in ("numba", "numba-cuda", "cuda-core", "cuda-bindings", "cuda-python", "cupy-cuda13x", "torch"):
    try: print(f"version {p}: {md.version(p)}")
    except Exception as e: print(f"version {p}: absent")
core = graphs.core()
print("cuda.core module:", core.__name__, "| GraphBuilder:", graphs.graph_builder_type().__module__,
      "| LEGACY_DEFAULT_STREAM:", hasattr(core, "LEGACY_DEFAULT_STREAM"))
n = 1024
a, b, c = (cuda.to_device(x) for x in random_inputs(n))
t1, t2, out, ref_out = (cuda.device_array(n, np.float32) for _ in range(4))
s = np.float32(3.0)
bl = blocks_for(n)
def three(stream, out=out):
    add_kernel[bl, BLOCK_SIZE, stream](a, b, t1)
    multiply_kernel[bl, BLOCK_SIZE, stream](t1, c, t2)
    scale_kernel[bl, BLOCK_SIZE, stream](t2, s, out)
three(0, ref_out); cuda.synchronize()
g = graphs.capture(three, name="three")
print("captured:", g, "stream type:", type(g.stream).__name__)
out.copy_to_device(np.full(n, np.nan, np.float32)); cuda.synchronize()
g.run()
print("bitwise equal to direct launches:", np.array_equal(out.copy_to_host(), ref_out.copy_to_host()))
# new inputs: copy into the captured buffers on the graph's stream, replay
new = random_inputs(n)
for dev, host in zip((a, b, c), new): g.copy_into(dev, host)
g.run()
try:
    check_close(out, reference(*new, s)); print("new inputs via copy_into: correct")
except Exception as e: print("new inputs via copy_into: WRONG", e)
def host_per_call(call, stream, burst=200, reps=9):
    return statistics.median(graphs.host_us_per_call(call, stream, burst=burst, repeats=reps))
leg = graphs.legacy_stream()
print(f"host us per call at n=1024: three direct {host_per_call(lambda: three(0), leg):.1f}, "
      f"fused direct {host_per_call(lambda: fused_kernel[bl, BLOCK_SIZE](a, b, c, s, out), leg):.1f}, "
      f"three graph replay {host_per_call(g.replay, g.stream):.1f}")
print(f"host us per call, three direct with the cuda.core stream passed: {host_per_call(lambda: three(g.stream), g.stream):.1f}")
out.copy_to_device(np.full(n, np.nan, np.float32)); cuda.synchronize()
g.replay(leg); cuda.synchronize()
try: check_close(out, reference(*new, s)); print("replay on the legacy default stream: correct")
except Exception as e: print("replay on the legacy default stream: WRONG", e)
t = graphs.time_calls(g.replay, g.stream, label="three graph")
print(f"time_calls three graph: host {t.host_median_us:.1f} us, loop {t.loop_median_ms*1e3:.1f} us, gpu {t.gpu_median_ms*1e3:.1f} us, hold {t.hold_us:.0f} us")
t = graphs.time_calls(lambda: three(0), leg, label="three direct")
print(f"time_calls three direct: host {t.host_median_us:.1f} us, loop {t.loop_median_ms*1e3:.1f} us, gpu {t.gpu_median_ms*1e3:.1f} us")
# refusals
h = np.ones(n, np.float32)
for what, fn in (("host array", lambda st: add_kernel[bl, BLOCK_SIZE, st](h, b, t1)),
                 ("other stream", lambda st: add_kernel[bl, BLOCK_SIZE](a, b, t1))):
    try: graphs.capture(fn); print(what, ": NOT refused")
    except graphs.NotCapturable as e: print(what, ": refused:", str(e)[:100])
    except Exception as e: print(what, ": other error", type(e).__name__, e)
g2 = graphs.capture(three, warm_up=False); g2.run(); print("capture still works after refusals")
# what numba does with a host array inside a capture when nothing checks it
bld = g.stream.create_graph_builder(); bld.begin_building()
try:
    add_kernel[bl, BLOCK_SIZE, bld](h, b, t1); print("unchecked host array in capture: no error at launch")
except Exception as e: print("unchecked host array in capture:", type(e).__name__, str(e)[:160])
try:
    bld.end_building(); bld.complete(); print("  ... and the capture completed")
except Exception as e: print("  ... end/complete:", type(e).__name__, str(e)[:160])
try:
    cuda.synchronize(); g.run(); print("context usable afterwards: yes")
except Exception as e: print("context usable afterwards: NO", e)
PY
echo "probe rc=$?"
# Numba, CuPy and torch eager first; each torch.compile mode in a process of its own, merged into
# the same result, so that one that fails or hangs cannot take the other measurements with it.
timeout 100 python3 -m helpers.lab.launches --sizes "$SIZES" --repeats 20 --impl three,fused,three-graph,fused-graph,best-graph,cupy,torch
rc=$?
timeout 55 python3 -m helpers.lab.launches --sizes "$SIZES" --repeats 20 --impl compile --merge --no-plots
echo "torch.compile default: rc=$?"
timeout 60 python3 -m helpers.lab.launches --sizes "$SIZES" --repeats 20 --impl compile-ro --merge
echo "torch.compile reduce-overhead: rc=$?"
if [ -n "${OUT:-}" ]; then mkdir -p "$OUT"; cp results/h200/launches*.json results/h200/launches*.png "$OUT"/ 2>/dev/null; fi
exit $rc
