"""One GPU call to test the truncation hypothesis for the 3xTF32 fused attention.

1. A probe of one mma.sync: D[0,0] = C[0,0] + A[0,0] B[0,0] with C = 1 and a product just below or above what
   float32 can add to 1; the two results say whether the tensor core rounds its float32 sum to nearest or
   toward zero (truncates).
2. The 3xTF32 kernel (tensor_cores.default_config(3, d): the record's fastest shape) without and with
   TensorCoreConfig(tile_sums=True), at B4 H16 d=64, L = 1024 and 4096, not causal and causal: the max relative
   error exactly as measure.py computes it (measure.attention_error: heads 0 and B H - 1 against float64,
   relative to the largest output) and the median of 20 timed runs (helpers.timing.time_gpu, as the benchmark).

    python scripts/attention_rounding_probe.py                      # on a GPU
    LENGTHS=40 python scripts/attention_rounding_probe.py           # in the simulator (B1 H2 there; no times)

Env: LENGTHS (1024,4096), BH (4,16; 1,2 in the simulator), D (64), SHAPES (e.g. 8x64,4x32: warps x block_k;
default the committed default), REPEATS (20).
"""

from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the checkout
import helpers  # noqa: E402  (switches the simulator on where there is no GPU)
from numba import cuda, float32  # noqa: E402

from helpers import results  # noqa: E402
from helpers.backend import is_simulator  # noqa: E402
from helpers.device import device_name  # noqa: E402
from helpers.lessons.attention import tensor_cores as tc  # noqa: E402
from helpers.lessons.attention.measure import attention_error  # noqa: E402
from helpers.lessons.attention.record import AttentionBench  # noqa: E402
from helpers.timing import time_gpu  # noqa: E402



def recorded_error(shape: tuple[int, int, int, int], causal: bool, warps: int, block_k: int) -> str:
    """The committed H200 record's error for the same 3xTF32 kernel without tile sums (its causal entry runs the
    default shape), with the record's date; "" where the record has none."""
    try:
        bench = results.load(AttentionBench)
    except results.ResultError:
        return ""
    name = "numba 3xTF32 tensor cores " + ("causal" if causal else f"w{warps}/k{block_k}")
    for row in bench.rows:
        if (row.batch, row.heads, row.length, row.head_dim) == shape:
            for m in row.measured:
                if m.name == name and m.max_rel_err is not None:
                    return f"; the committed record ({bench.provenance.date}), without tile sums: {m.max_rel_err:.1e}"
    return ""


@cuda.jit
def probe_kernel(a, b, c, d):
    """One warp, one mma.sync: A[0,0] (lane 0's a0), B[0,0] (lane 0's b0), C[0,0] (lane 0's c0); all else 0."""
    lane = cuda.threadIdx.x
    first = lane == 0
    a0 = a[0] if first else float32(0)
    b0 = b[0] if first else float32(0)
    c0 = c[0] if first else float32(0)
    z = float32(0)
    d0, d1, d2, d3 = tc.mma_tf32(a0, z, z, z, b0, z, c0, z, z, z)
    if first:
        d[0] = d0


def mma_rounding() -> str:
    """C = 1 plus a product of -2^-26 (nearest: 1; toward zero: 1 - 2^-24) and of +3 * 2^-25 (nearest: 1 + 2^-23;
    toward zero: 1)."""
    results = []
    for a, b in ((-(2.0 ** -13), 2.0 ** -13), (3 * 2.0 ** -13, 2.0 ** -12)):
        out = cuda.device_array(1, np.float32)
        probe_kernel[1, 32](cuda.to_device(np.array([a], np.float32)), cuda.to_device(np.array([b], np.float32)),
                            cuda.to_device(np.array([1.0], np.float32)), out)
        results.append(float(out.copy_to_host()[0]))
    below, above = results
    verdict = {(1.0, 1 + 2.0 ** -23): "round to nearest",
               (1 - 2.0 ** -24, 1.0): "toward zero (truncation)",
               (1.0, 1.0): "toward zero, small products cut at alignment (fewer than 3 extra bits)"}.get(
        (below, above), "neither: look at the values")
    print(f"mma.sync probe: 1 - 2^-26 -> 1 {below - 1:+.3e}; 1 + 3*2^-25 -> 1 {above - 1:+.3e}: {verdict}")
    return verdict


def main() -> int:
    env = os.environ.get
    lengths = [int(x) for x in env("LENGTHS", "1024,4096").split(",")]
    batch, heads = (int(x) for x in env("BH", "1,2" if is_simulator() else "4,16").split(","))
    d, repeats = int(env("D", "64")), int(env("REPEATS", "20"))
    base = tc.default_config(3, d)
    shapes = [tuple(int(x) for x in s.split("x")) for s in env("SHAPES", "").split(",") if s] or [
        (base.warps, base.block_k)]
    print(f"device: {device_name()}")
    mma_rounding()
    rng = np.random.default_rng()
    bh = batch * heads
    for length in lengths:
        qkv = [rng.standard_normal((bh, length, d), dtype=np.float32) for _ in range(3)]  # as measure.py draws
        dq, dk, dv = (cuda.to_device(a) for a in qkv)
        out = cuda.device_array((bh, length, d), np.float32)
        for causal in (False, True):
            for warps, block_k in shapes:
                for tile_sums in (False, True):
                    config = tc.TensorCoreConfig(warps, block_k, 3, tile_sums)

                    def run(config=config, causal=causal) -> None:
                        tc.run_tensor_cores(dq, dk, dv, out, causal, config)

                    out.copy_to_device(np.full((bh, length, d), np.nan, np.float32))  # poisoned
                    run()
                    cuda.synchronize()
                    error = attention_error(out.copy_to_host(), *qkv, sorted({0, bh - 1}), causal)
                    timing = time_gpu(run, label=f"L={length}", repeats=repeats, warmup=2)
                    ms = "n/a (simulator)" if timing is None else f"{timing.median_ms:.3f} ms"
                    print(f"B{batch} H{heads} L={length} d={d} causal={int(causal)} 3xTF32 w{warps}/k{block_k} "
                          f"tile_sums={int(tile_sums)}: max_rel_err {error:.2e} (<= 1e-5: {error <= 1e-5}), "
                          f"median of {repeats} {ms}"
                          + ("" if tile_sums else recorded_error((batch, heads, length, d), causal, warps, block_k)),
                          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
