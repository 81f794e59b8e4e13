// One 16-byte step of out = (a + b) * c / s, written in CUDA C so that it can use
// float4: every load and the store move four floats in one instruction.
//
// Linked into a Numba kernel by helpers/lessons/roofline/kernels.py (numba-cuda's `declare_device`
// with `link=`), which calls it once per group of four elements.  Numba's calling
// convention: the first parameter receives the return value, the int returned is a
// status (0: no exception).  The pointers must be 16-byte aligned: the Python
// launcher checks that before it launches.
//
// __ldg reads through the read-only path (ld.global.nc.v4.f32); __stwb is an
// ordinary write-back store, spelled so the compiler emits st.global.v4.f32 and
// not a generic st.v4.f32.  The _rn intrinsics fix IEEE round-to-nearest for each
// operation, in the kernel's order, so the result matches NumPy bit for bit.
extern "C" __device__ int fused_vec4(int *result, const float *a, const float *b,
                                     const float *c, float s, float *out, long long j)
{
    const float4 x = __ldg(reinterpret_cast<const float4 *>(a) + j);
    const float4 y = __ldg(reinterpret_cast<const float4 *>(b) + j);
    const float4 z = __ldg(reinterpret_cast<const float4 *>(c) + j);
    float4 r;
    r.x = __fdiv_rn(__fmul_rn(__fadd_rn(x.x, y.x), z.x), s);
    r.y = __fdiv_rn(__fmul_rn(__fadd_rn(x.y, y.y), z.y), s);
    r.z = __fdiv_rn(__fmul_rn(__fadd_rn(x.z, y.z), z.z), s);
    r.w = __fdiv_rn(__fmul_rn(__fadd_rn(x.w, y.w), z.w), s);
    __stwb(reinterpret_cast<float4 *>(out) + j, r);
    *result = 0;
    return 0;
}
