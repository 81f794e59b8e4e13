# numba-cuda-mlir only: does cuda.vector give a 16-byte load/store, and can its lanes be read?
"""Run with HELPERS_COMPILER=mlir on a GPU: python scripts/mlir_vector_probe.py (the output for docs/compilers.md)."""
import helpers, numpy as np
from numba import cuda

@cuda.jit
def vec_add(a, b, out):
    j = cuda.grid(1)
    if j < out.size // 4:
        va = cuda.vector.load(a, 4 * j, 4, alignment=16)
        vb = cuda.vector.load(b, 4 * j, 4, alignment=16)
        cuda.vector.store(out, 4 * j, va + vb, alignment=16)

@cuda.jit
def vec_lanes(a, out):
    j = cuda.grid(1)
    if j < out.size // 4:
        va = cuda.vector.load(a, 4 * j, 4, alignment=16)
        out[4 * j] = va[0] + va[3]

n = 1024
a, b = (np.random.default_rng(i).random(n, dtype=np.float32) for i in range(2))
da, db = cuda.to_device(a), cuda.to_device(b)
for name, kernel, args, want in [("vec_add", vec_add, (da, db), a + b), ("vec_lanes", vec_lanes, (da,), None)]:
    out = cuda.to_device(np.zeros(n, np.float32))
    try:
        kernel[4, 64](*args, out)
        got = out.copy_to_host()
        ok = np.array_equal(got, want) if want is not None else np.array_equal(got[::4], a[::4] + a[3::4])
        sig = tuple(kernel.typeof_pyval(x) for x in (*args, out))
        ptx = kernel.inspect_asm(sig)
        print(name, "bitwise", ok, "v4 loads", ptx.count("ld.global.v4"), ptx.count(".v4.f32"), "v4 stores", ptx.count("st.global.v4"))
    except Exception as exc:
        print(name, "FAILED", type(exc).__name__, str(exc)[:400])
