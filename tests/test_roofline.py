"""The fused-kernel variants of helpers/lessons/roofline/ (kernels.py): correct, compiled to the loads they claim
(evidence.py), and the claims the benchmark (measure.py) makes of its record."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

import helpers
from helpers import pipeline, results
from helpers.checks import poisoned, random_inputs
from helpers.harness.peers import Unavailable
from helpers.lessons.roofline import evidence, kernels, measure
from helpers.lessons.roofline import record as rr

SIM_VARIANTS = [name for name, v in kernels.VARIANT_INFO.items() if not v.gpu_only]
SCALAR = [name for name, v in kernels.VARIANT_INFO.items() if v.elements_per_access == 1]
VECTOR = [name for name, v in kernels.VARIANT_INFO.items() if v.elements_per_access == 4]
# Sizes that 4 (elements per access), 256 (block) and 4 x grid do not divide.
AWKWARD_SIZES = [1, 3, 5, 1000, 1001, 1003, 4099]


def _inputs(n: int, seed: int):
    host = random_inputs(n, seed=seed)
    return host, [cuda.to_device(x) for x in host]


def test_registry_names_every_variant_once():
    assert list(kernels.VARIANTS) == list(kernels.VARIANT_INFO)
    assert kernels.VARIANT_INFO["naive"].kernel is pipeline.fused_kernel
    assert kernels.DEFAULT_BEST in kernels.VARIANTS
    assert not kernels.VARIANT_INFO[kernels.DEFAULT_BEST].gpu_only
    assert kernels.SCALAR_FALLBACK in SCALAR
    assert {"naive", "grid_stride", "ilp4", "streaming", "vec4", "linked_cuda_c"} <= set(kernels.VARIANTS)
    for v in kernels.VARIANT_INFO.values():
        assert v.aligned_only == (v.elements_per_access == 4)


@pytest.mark.parametrize("n", AWKWARD_SIZES)
@pytest.mark.parametrize("name", SIM_VARIANTS)
def test_variant_is_bitwise_equal_to_numpy(name, n):
    (a, b, c), (da, db, dc) = _inputs(n, seed=n)
    out = poisoned(n)
    kernels.VARIANTS[name](da, db, dc, 1.7, out)
    got = out.copy_to_host()
    assert not np.isnan(got).any(), f"{name} left elements unwritten at n = {n}"
    assert np.array_equal(got, pipeline.reference(a, b, c, 1.7)), f"{name} differs from NumPy at n = {n}"


@pytest.mark.skipif(not helpers.is_simulator(), reason="the simulator's refusal")
def test_linked_cuda_c_says_it_needs_a_gpu():
    _, (da, db, dc) = _inputs(16, seed=1)
    with pytest.raises(Unavailable, match="needs a GPU"):
        kernels.VARIANTS["linked_cuda_c"](da, db, dc, 2.0, poisoned(16))


@pytest.mark.skipif(helpers.is_simulator(), reason="the linked CUDA C runs on a GPU only")
@pytest.mark.parametrize("n", [1000, 1003, 4099, 2**20 + 3])
def test_linked_cuda_c_is_bitwise_equal_on_gpu(n):
    (a, b, c), (da, db, dc) = _inputs(n, seed=n)
    out = poisoned(n)
    kernels.VARIANTS["linked_cuda_c"](da, db, dc, 1.7, out)
    assert np.array_equal(out.copy_to_host(), pipeline.reference(a, b, c, 1.7))


@pytest.mark.skipif(helpers.is_simulator(), reason="large sizes and real grids need a GPU")
@pytest.mark.parametrize("name", list(kernels.VARIANTS))
def test_every_variant_at_a_large_awkward_size_on_gpu(name):
    n = 2**22 + 3
    (a, b, c), (da, db, dc) = _inputs(n, seed=3)
    out = poisoned(n)
    kernels.VARIANTS[name](da, db, dc, 1.7, out)
    assert np.array_equal(out.copy_to_host(), pipeline.reference(a, b, c, 1.7))


@pytest.mark.parametrize("name", [n for n in VECTOR if n in SIM_VARIANTS or not helpers.is_simulator()])
def test_vector_variants_refuse_a_misaligned_view(name):
    _, (da, db, dc) = _inputs(41, seed=2)
    out = poisoned(41)
    with pytest.raises(kernels.MisalignedArray, match=r"`b` starts 4 bytes past a 16-byte boundary"):
        kernels.VARIANTS[name](da[:40], db[1:], dc[:40], 2.0, out[:40])


def test_best_fused_falls_back_to_scalar_for_a_misaligned_view():
    (a, b, c), (da, db, dc) = _inputs(41, seed=4)
    out = poisoned(41)
    kernels.best_fused(da[1:], db[1:], dc[1:], 2.0, out[1:])
    got = out.copy_to_host()
    assert np.isnan(got[0])  # outside the view: untouched
    assert np.array_equal(got[1:], pipeline.reference(a[1:], b[1:], c[1:], 2.0))


def test_best_fused_is_correct_and_names_a_known_variant():
    (a, b, c), (da, db, dc) = _inputs(1003, seed=5)
    out = poisoned(1003)
    kernels.best_fused(da, db, dc, 0.5, out)
    assert np.array_equal(out.copy_to_host(), pipeline.reference(a, b, c, 0.5))
    assert kernels.best_variant_name() in kernels.VARIANTS


def test_host_arrays_are_rejected_by_name():
    a, b, c = random_inputs(8, seed=6)
    with pytest.raises(TypeError, match="`a` is a host NumPy array"):
        kernels.VARIANTS["vec4"](a, b, c, 1.0, poisoned(8))


# --- the compiled evidence (static: the same PTX for cc 9.0 on any machine) ---------------------


@pytest.mark.parametrize("name", SCALAR)
def test_scalar_variants_compile_to_4_byte_accesses(name):
    ev = evidence.ptx_evidence(name)
    assert ev.widest_load_bytes == 4 and ev.widest_store_bytes == 4
    assert ev.vector_opcodes() == []


def test_vec4_compiles_to_16_byte_loads_and_stores():
    ev = evidence.ptx_evidence("vec4")
    assert ev.vector_opcodes() == ["ld.global.v4.f32", "st.global.v4.f32"]
    # plus the scalar tail: one 4-byte load per input and one store
    assert ev.opcodes["ld.global.f32"] == 3 and ev.opcodes["st.global.f32"] == 1


def test_streaming_hints_reach_the_ptx():
    assert set(evidence.ptx_evidence("streaming").opcodes) == {"ld.global.cs.b32", "st.global.cs.b32"}
    assert evidence.ptx_evidence("vec4_streaming").vector_opcodes() == ["ld.global.cs.v4.f32", "st.global.cs.v4.f32"]


def test_linked_cuda_c_calls_a_function_with_float4_accesses():
    ev = evidence.ptx_evidence("linked_cuda_c")
    assert ev.calls == 1
    assert not any(".v4." in op for op in ev.opcodes)  # the kernel itself: only the scalar tail
    assert ev.vector_opcodes() == ["ld.global.nc.v4.f32", "st.global.wb.v4.f32"]
    assert ".func" in ev.linked_ptx and "fused_vec4" in ev.linked_ptx


def test_ceiling_probe_moves_the_same_bytes_as_the_fused_kernel():
    fused, probe = evidence.ptx_evidence("vec4"), evidence.ptx_evidence("stream3")
    assert probe.vector_opcodes() == fused.vector_opcodes()
    assert "div.rn.f32" in fused.ptx and "div.rn.f32" not in probe.ptx


def test_evidence_rejects_an_unknown_name():
    with pytest.raises(KeyError, match="no variant named 'vec8'"):
        evidence.ptx_evidence("vec8")


# --- the claims the benchmark checks ------------------------------------------------------------


def _record(best_ms: float, torch_ms: float, best_gbs: float, gbs: float) -> rr.Roofline:
    def run():
        return rr.RooflineRun(
            copy=rr.Timed(gbs=4000.0),
            variants={"vec4": rr.Timed(median_ms=best_ms, gbs=gbs, bitwise_equal=True, iqr_ms=0.001),
                      "naive": rr.Timed(median_ms=best_ms * 1.2, gbs=0.8 * gbs, bitwise_equal=True)},
            stream3=rr.Timed(median_ms=best_ms, gbs=best_gbs),
            torch_compile=rr.Timed(median_ms=torch_ms, iqr_ms=0.001))
    return rr.Roofline(expression="e", dtype="float32", s=1.7, bytes_per_element=16,
                             sizes=list(measure.CHECK_SIZES), runs={n: run() for n in measure.CHECK_SIZES})


def test_claims_hold_only_when_both_conditions_hold():
    ok = measure.summarize(_record(best_ms=0.99, torch_ms=1.01, best_gbs=4200, gbs=4150))
    assert all(c.holds for c in ok.claims) and len(ok.claims) == 4 and ok.best_variant == "vec4"
    slow = measure.summarize(_record(best_ms=1.02, torch_ms=1.01, best_gbs=4200, gbs=4150))
    assert [c.holds for c in slow.claims] == [True, False, True, False]  # slower than torch.compile by > 1 IQR
    assert "1.0200 against 1.0100 ms (+1.0%" in slow.claims[1].note
    low = measure.summarize(_record(best_ms=0.99, torch_ms=1.01, best_gbs=4200, gbs=3900))
    assert [c.holds for c in low.claims] == [False, True, False, True]  # 92.9% of the best streaming kernel
    assert low.claims[0].line().endswith("no, 92.9%")


def test_a_variant_that_is_not_bitwise_equal_cannot_be_best():
    record = _record(best_ms=0.99, torch_ms=1.01, best_gbs=4200, gbs=4150)
    record.runs[2**28].variants["vec4"].bitwise_equal = False
    assert measure.summarize(record).best_variant == "naive"


def test_the_record_reads_back_as_written(tmp_path):
    record = measure.summarize(_record(best_ms=0.99, torch_ms=1.01, best_gbs=4200, gbs=4150))
    back = results.load(rr.Roofline, results.save(record, folder=tmp_path).parent)
    assert back == record and back.runs[2**28].percent_of_best(back.runs[2**28].variants["vec4"]) == pytest.approx(98.81, abs=0.01)


@pytest.mark.skipif(not helpers.is_simulator(), reason="the simulator's refusal")
def test_benchmark_refuses_the_simulator():
    with pytest.raises(Unavailable):
        measure.benchmark()


def test_the_benchmark_checks_each_kernel_against_its_own_answer_before_timing_it():
    """The 3:1 streaming kernels are checked against a + b + c, the variants against the chapter's answer."""
    from helpers.harness import campaign, peers

    pool = campaign.Pool(300, seed=7, s=1.7)
    made = measure.factories()
    prepared = peers.prepare({k: made[k] for k in ("naive", "vec4", "stream3", "torch_compile")}, pool, say=False)
    if helpers.is_simulator():
        assert list(prepared.absent) == ["torch_compile"]
    checks, bitwise = [], {}
    failed = campaign.run_cases(prepared.builders, [300], pool=pool, report=checks.append, progress=False,
                                time=lambda label, n, case: bitwise.setdefault(label, measure._bitwise(case)))
    assert not failed and all(c.passed for c in checks)
    assert {c.n for c in checks} == {297, 300}  # the odd size first
    assert {label for label, equal in bitwise.items() if equal} >= {"naive", "vec4", "stream3"}


def test_the_compiled_evidence_links_with_lto_as_the_timed_kernels_were():
    """``cuda.jit`` links a kernel's LTO-IR with link-time optimization by default, and the evidence does the same,
    so with the record's compiler it gives the record's register counts (lesson 07 prints both)."""
    nvjitlink = pytest.importorskip("cuda.bindings.nvjitlink", reason="no nvJitLink here: no register counts")
    pytest.importorskip("cuda.bindings.nvrtc", reason="no NVRTC here: the linked variant is not compiled")
    import numba_cuda

    record = results.load(rr.Roofline)
    compiled_by = (record.provenance.versions.get("numba-cuda"), (record.provenance.cuda_driver or "").split(".")[0])
    if compiled_by != (numba_cuda.__version__, str(nvjitlink.version()[0])):
        pytest.skip(f"the record's compiler (numba-cuda, CUDA major) was {compiled_by}, not this one")
    timed = next(iter(record.runs.values())).variants
    assert {name: evidence.ptx_evidence(name).registers for name in timed} == {n: v.registers for n, v in timed.items()}
