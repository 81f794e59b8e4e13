"""The attention of lessons 12 and 13, measured.

``attention`` checks every implementation (at an odd length first, against float64 NumPy on two
heads, relative to the largest output) before timing it beside torch's naive attention and SDPA
kernels (:func:`helpers.lessons.softmax.measure.measure_sizes`).  ``attention-long`` times the fused
kernels at a length where S and P would not fit.  ``ncu-attention`` profiles the DRAM bytes of every
pipeline in :data:`WORKLOAD`, running ``attention-workload`` under Nsight Compute.
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import replace
from typing import Any, Callable, Sequence

import numpy as np
from numba import cuda

from helpers.backend import is_simulator
from helpers.device import peak_fp32_flops, total_memory_bytes
from helpers.harness.campaign import whole
from helpers.harness.cli import Command
from helpers.harness.peers import release_memory
from helpers.lessons.dram import ncu
from helpers.lessons.softmax.measure import (Implementation, checked_output, fitting, gpu_torch, keeper, measure_sizes,
                                             plots_command, quick_option)
from helpers.lessons.softmax.record import Measured
from helpers.timing import time_gpu

from . import kernels as attention
from . import bf16, tensor_cores, tiled
from .record import AttentionBench, AttentionDram, AttentionLong, AttentionRow, KernelDram
from .report import attention_table, dram_table, save_plot

ATTENTION_LENGTHS = [4096, 1024]
ATTENTION_HEADS = (4, 16)  # batch, heads
HEAD_DIM = 64
TOLERANCE = 1e-4  # of the largest output, against float64
BF16_TOLERANCE = 2e-2  # torch's bf16 flash kernel: another precision
TF32_TOLERANCE = 2e-3  # one TF32 pass: 10-bit mantissas

_REFERENCES: dict[tuple[Any, ...], np.ndarray] = {}


def attention_error(got: np.ndarray, q: np.ndarray, k: np.ndarray, v: np.ndarray, heads: Sequence[int],
                    causal: bool) -> float:
    """Largest error over the sampled heads, relative to the largest output magnitude (float64 reference)."""
    if np.isnan(got).any():
        return math.inf
    idx = list(heads)
    key = (id(q), q.shape, tuple(idx), causal)
    if key not in _REFERENCES:
        if len(_REFERENCES) > 4:
            _REFERENCES.clear()
        _REFERENCES[key] = attention.reference(q[idx], k[idx], v[idx], causal)
    ref = _REFERENCES[key]
    return float(np.max(np.abs(got[idx] - ref)) / np.max(np.abs(ref)))


def flash_configs() -> list[attention.FlashConfig]:  # the block shapes timed
    if is_simulator():
        return [attention.default_config()]
    return [attention.FlashConfig(64, 64, 1, 1), attention.FlashConfig(64, 64, 4, 1), attention.FlashConfig(64, 64, 4, 2),
            attention.FlashConfig(64, 64, 1, 2), attention.FlashConfig(128, 64, 4, 2)]


def tiled_configs(d: int) -> list[tiled.TiledConfig]:  # the register-tiled shapes timed
    if is_simulator():
        return [tiled.default_tiled_config(d)]
    shapes = [(64, 32, 4, 4), (64, 16, 4, 2), (32, 32, 4, 4), (64, 32, 8, 4), (64, 32, 4, 8), (128, 16, 8, 2)]
    return fitting([tiled.TiledConfig(*shape) for shape in shapes], d)


def tensor_core_configs(d: int, passes: int) -> list[tensor_cores.TensorCoreConfig]:  # the shapes timed
    if is_simulator():
        return [tensor_cores.default_config(passes, d)]
    shapes = [tensor_cores.TensorCoreConfig(w, k, passes) for w in (2, 4, 8) for k in (32, 64)]
    if passes == 1:  # and 16 warps an SM, by launch bounds that cap the registers at 128 (the compiler may spill)
        shapes += [tensor_cores.TensorCoreConfig(w, k, 1, min_blocks=16 // w) for w, k in ((8, 32), (8, 64), (4, 32))]
        # and the next key tile fetched into registers during the work on this one (no spills at these shapes)
        shapes += [tensor_cores.TensorCoreConfig(8, k, 1, prefetch=True) for k in (32, 64)]
    return fitting(shapes, d)


def numba_implementations(qkv: Sequence[np.ndarray], error: Callable[[np.ndarray, bool], float],
                          unfused: bool) -> list[Implementation]:
    """Every Numba attention: the fused kernel at each block shape, the register-tiled one, the tensor-core one
    (one TF32 pass, and 3xTF32), causal too, and the unfused pipelines (S and P in memory, float32 and TF32)."""
    bh, length, d = qkv[0].shape
    dq, dk, dv = (cuda.to_device(a) for a in qkv)
    out = cuda.device_array((bh, length, d), np.float32)
    found: list[Implementation] = []

    def add(name: str, run: Callable[[], object], causal: bool = False, kernel: Any = None,
            threads: int | None = None, tf32: bool = False) -> None:
        check = checked_output(run, out, lambda got: error(got, causal))
        found.append(Implementation(name, run, check, TF32_TOLERANCE if tf32 else TOLERANCE,
                                    "TF32: 10-bit mantissas, tensor cores" if tf32 else "", kernel, threads))

    for cfg in flash_configs():
        add(f"numba fused q{cfg.block_q}/k{cfg.block_k}/b{cfg.batch}/s{cfg.keys_per_step}",
            lambda cfg=cfg: attention.run_fused(dq, dk, dv, out, False, cfg), False,
            attention.flash_kernel(d, cfg, False), cfg.block_q)
    # causal at q64/k64/b4/s2, the shape lesson 12 compares it with (the default is now the measured fastest)
    add("numba fused causal", lambda: attention.run_fused(dq, dk, dv, out, True, attention.FlashConfig()), True)
    for c in tiled_configs(d):
        add(f"numba tiled q{c.block_q}/k{c.block_k}/r{c.rows}x{c.keys}",
            lambda c=c: tiled.run_tiled(dq, dk, dv, out, False, c), False, tiled.tiled_kernel(d, c, False), c.threads())
    add("numba tiled causal", lambda: tiled.run_tiled(dq, dk, dv, out, True), True)
    for passes, precision in ((1, "TF32"), (3, "3xTF32")) if d % 16 == 0 else ():  # 16 head columns a read
        for c in tensor_core_configs(d, passes):
            add(tensor_cores.config_name(c),
                lambda c=c: tensor_cores.run_tensor_cores(dq, dk, dv, out, False, c), False,
                tensor_cores.tensor_core_kernel(d, c, False), 32 * c.warps, tf32=passes == 1)
        c = replace(tensor_cores.default_config(passes, d), tile_sums=False)  # the name says: no tile sums
        add(f"numba {precision} tensor cores causal",
            lambda c=c: tensor_cores.run_tensor_cores(dq, dk, dv, out, True, c), True, tf32=passes == 1)
    if d % 16 == 0:
        # 3xTF32 at its default shape, each key tile's P V summed apart (tensor_cores says why)
        c = replace(tensor_cores.default_config(3, d), tile_sums=True)
        add(tensor_cores.config_name(c), lambda c=c: tensor_cores.run_tensor_cores(dq, dk, dv, out, False, c), False,
            tensor_cores.tensor_core_kernel(d, c, False), 32 * c.warps)
        add("numba 3xTF32 tile sums causal", lambda c=c: tensor_cores.run_tensor_cores(dq, dk, dv, out, True, c), True)
        found += bf16_implementations(qkv, error)  # bf16 pairs: half the bytes of every input and output; SDPA flash's
    if unfused:
        s, p = attention.unfused_buffers(bh, length)
        add("numba unfused (S, P in memory)", lambda: attention.run_unfused(dq, dk, dv, s, p, out))
        add("numba unfused TF32 (S, P in memory)",
            lambda: tensor_cores.run_unfused_tensor_cores(dq, dk, dv, s, p, out), tf32=True)
    return found


def bf16_implementations(qkv: Sequence[np.ndarray], error: Callable[[np.ndarray, bool], float]) -> list[Implementation]:
    """The bf16 tensor-core kernel, not causal and causal, on the inputs rounded to bf16 once (outside the timing)."""
    q, k, v = (cuda.to_device(bf16.to_bf16(a)) for a in qkv)
    out = cuda.device_array(q.shape, np.uint32)
    found, config = [], bf16.default_bf16_config(qkv[0].shape[2])
    for causal in (False, True):
        def run(causal: bool = causal) -> None:
            bf16.run_bf16(q, k, v, out, causal, config)

        def check(run: Callable[[], None] = run, causal: bool = causal) -> float:
            out.copy_to_device(np.full(out.shape, 0x7FC07FC0, np.uint32))  # NaN in both halves: poisoned
            run()
            return error(bf16.from_bf16(out.copy_to_host()), causal)

        found.append(Implementation("numba bf16 tensor cores" + (" causal" if causal else ""), run, check,
                                    BF16_TOLERANCE, "bf16: another precision, tensor cores",
                                    bf16.bf16_kernel(qkv[0].shape[2], config, causal), 32 * config.warps))
    return found


def torch_implementations(torch: Any, qkv: Sequence[np.ndarray], batch: int, heads: int,
                          error: Callable[[np.ndarray, bool], float]) -> list[Implementation]:
    """torch's naive fp32 attention (TF32 off), SDPA's memory-efficient fp32 kernel and its flash bf16 kernel."""
    from torch.nn.attention import SDPBackend, sdpa_kernel  # torch is optional: imported only when it is here
    from torch.nn.functional import scaled_dot_product_attention as sdpa  # likewise

    torch.backends.cuda.matmul.allow_tf32 = False
    bh, length, d = qkv[0].shape
    tq, tk, tv = (torch.as_tensor(a, device="cuda").reshape(batch, heads, length, d) for a in qkv)
    bq, bk, bv = (t.to(torch.bfloat16) for t in (tq, tk, tv))
    scale = 1 / math.sqrt(d)

    def naive() -> Any:
        return torch.softmax((tq @ tk.transpose(-1, -2)) * scale, dim=-1) @ tv

    def efficient() -> Any:
        with sdpa_kernel(SDPBackend.EFFICIENT_ATTENTION):
            return sdpa(tq, tk, tv)

    def naive_tf32() -> Any:
        torch.backends.cuda.matmul.allow_tf32 = True  # cuBLAS on TF32 tensor cores, for this composition only
        try:
            return naive()
        finally:
            torch.backends.cuda.matmul.allow_tf32 = False

    def flash_bf16() -> Any:
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            return sdpa(bq, bk, bv)

    runs = [("torch naive fp32 (TF32 off)", naive, TOLERANCE, ""),
            ("torch naive TF32", naive_tf32, TF32_TOLERANCE, "TF32 on: S and P through memory, products on tensor cores"),
            ("torch SDPA efficient fp32", efficient, TOLERANCE, ""),
            ("torch SDPA flash bf16", flash_bf16, BF16_TOLERANCE, "bf16: another precision, tensor cores")]
    return [Implementation(name, fn, lambda fn=fn: error(fn().float().reshape(bh, length, d).cpu().numpy(), False),
                           tol, note) for name, fn, tol, note in runs]


def sgemm_rate(torch: Any, n: int = 8192) -> float | None:
    """cuBLAS's FP32 rate (TF32 off) on an n x n x n product, in FLOP/s: the FP32 units' practical ceiling."""
    if torch is None:
        return None
    torch.backends.cuda.matmul.allow_tf32 = False
    a, b = (torch.randn(n, n, device="cuda") for _ in range(2))
    timing = time_gpu(lambda: a @ b, label="cuBLAS SGEMM", repeats=10, warmup=2)
    return None if timing is None else 2.0 * n ** 3 / (timing.median_ms * 1e-3)


def bench_attention(lengths: Sequence[int], batch: int, heads: int, d: int = HEAD_DIM, repeats: int = 5,
                    unfused: bool = True, keep: Callable[[AttentionBench], object] | None = None) -> AttentionBench:
    """Every attention at every length, checked (first at an odd length) then timed; ``keep(record)`` after each."""
    torch = gpu_torch()
    bench = AttentionBench(peak_fp32_flops=None if is_simulator() else peak_fp32_flops(),
                           sgemm_fp32_flops=None if is_simulator() else sgemm_rate(torch))
    rng = np.random.default_rng()
    bh = batch * heads

    def implementations(length: int) -> list[Implementation]:
        qkv = [rng.standard_normal((bh, length, d), dtype=np.float32) for _ in range(3)]

        def error(got: np.ndarray, causal: bool) -> float:
            return attention_error(got, *qkv, sorted({0, bh - 1}), causal)

        found = numba_implementations(qkv, error, unfused)
        return found + (torch_implementations(torch, qkv, batch, heads, error) if torch is not None else [])

    def done(length: int, measured: list[Measured]) -> None:
        release_memory()
        row = AttentionRow(batch, heads, length, d, float(attention.attention_flops(bh, length, d, False)),
                           attention.footprint(bh, length, d).unfused_scratch, measured)
        bench.rows.append(row)
        if keep is not None:
            keep(bench)
        print(f"attention B={batch} H={heads} L={length} d={d}: {row.flops / 1e9:.0f} GFLOP, "
              f"unfused scratch {row.unfused_scratch_bytes / 1e9:.2f} GB")
        print(attention_table(AttentionBench(peak_fp32_flops=None, rows=[row])))

    measure_sizes(implementations, lengths, repeats, done)
    return bench


LONG_LENGTH = 32768


def sampled_error(got: np.ndarray, qkv: Sequence[np.ndarray], causal: bool, rows: np.ndarray) -> float:
    """Largest error over some query rows of the first and last head, relative to their largest output: the
    float64 reference of whole heads at a long L would need L x L doubles each."""
    worst = 0.0
    for h in (0, qkv[0].shape[0] - 1):
        want = attention.reference(*(a[h:h + 1] for a in qkv), causal, rows=rows)[0]
        worst = max(worst, float(np.max(np.abs(got[h, rows] - want)) / np.max(np.abs(want))))
    return worst


def long_implementations(qkv: Sequence[np.ndarray]) -> list[Implementation]:
    """The fused kernels at their default shapes, not causal and causal: none allocates anything that grows with L."""
    bh, length, d = qkv[0].shape
    rows = np.unique(np.r_[0:8, length // 2:length // 2 + 8, length - 8:length])
    dq, dk, dv = (cuda.to_device(a) for a in qkv)
    out = cuda.device_array((bh, length, d), np.float32)
    three = replace(tensor_cores.default_config(3, d), tile_sums=False)  # each named for what it is
    three_tiles = replace(three, tile_sums=True)
    found = []
    for causal in (False, True):
        runs = [("numba tiled", lambda c=causal: tiled.run_tiled(dq, dk, dv, out, c), TOLERANCE),
                ("numba TF32 tensor cores", lambda c=causal: tensor_cores.run_tensor_cores(dq, dk, dv, out, c),
                 TF32_TOLERANCE),
                ("numba 3xTF32 tensor cores", lambda c=causal: tensor_cores.run_tensor_cores(dq, dk, dv, out, c, three),
                 TOLERANCE),
                ("numba 3xTF32 tile sums",
                 lambda c=causal: tensor_cores.run_tensor_cores(dq, dk, dv, out, c, three_tiles), TOLERANCE)]
        found += [Implementation(name + (" causal" if causal else ""), run,
                                 checked_output(run, out, lambda got, c=causal: sampled_error(got, qkv, c, rows)), tol)
                  for name, run, tol in runs]
    return found


def bench_long(length: int = LONG_LENGTH, batch: int = 4, heads: int = 16, d: int = HEAD_DIM,
               keep: Callable[[AttentionLong], object] | None = None) -> AttentionLong:
    """The fused kernels at a length whose S and P would not fit: checked on sampled rows, then timed."""
    rng = np.random.default_rng()
    qkv = [rng.standard_normal((batch * heads, length, d), dtype=np.float32) for _ in range(3)]
    record = AttentionLong(batch, heads, length, d, attention.footprint(batch * heads, length, d).unfused_scratch,
                           total_memory_bytes())
    print(f"attention B={batch} H={heads} L={length} d={d}: the unfused pipeline's S and P would need "
          f"{record.unfused_scratch_bytes / 1e9:,.0f} GB; the fused kernels allocate nothing")
    measure_sizes(lambda n: long_implementations([np.ascontiguousarray(a[:, :n]) for a in qkv]), [length], 3,
                  lambda n, measured: record.measured.extend(measured))
    if keep is not None:
        keep(record)
    return record


WORKLOAD = [  # (pipeline, launches): what attention-workload runs, in this order
    ("numba unfused fp32", 3), ("numba fused fp32", 1), ("numba tiled fp32", 1),
    ("numba unfused TF32", 3), ("numba TF32 tensor cores", 1)]


def attention_workload(length: int, heads: int, d: int = HEAD_DIM) -> None:
    """Every pipeline of :data:`WORKLOAD` once, in its order (for ncu to profile)."""
    rng = np.random.default_rng(0)
    dq, dk, dv = (cuda.to_device(rng.standard_normal((heads, length, d), dtype=np.float32)) for _ in range(3))
    out = cuda.device_array((heads, length, d), np.float32)
    s, p = attention.unfused_buffers(heads, length)
    attention.run_unfused(dq, dk, dv, s, p, out)
    attention.run_fused(dq, dk, dv, out)
    tiled.run_tiled(dq, dk, dv, out)
    tensor_cores.run_unfused_tensor_cores(dq, dk, dv, s, p, out)
    tensor_cores.run_tensor_cores(dq, dk, dv, out)
    cuda.synchronize()


def ncu_attention(length: int, heads: int, limit_s: float = 600) -> AttentionDram:
    """DRAM bytes per kernel of every pipeline, from Nsight Compute (L2 flushed before each kernel); the kernels
    are given to their pipelines by launch order."""
    program = [sys.executable, "-m", "helpers.lessons.attention", "attention-workload", "--length", str(length),
               "--heads", str(heads)]
    kernels, _ = ncu.run_ncu(program, "all", None, limit_s, "regex:.*")
    if len(kernels) != sum(n for _, n in WORKLOAD):
        raise ncu.NcuError(f"ncu profiled {len(kernels)} kernels; the workload launches "
                           f"{sum(n for _, n in WORKLOAD)}: {[k.kernel for k in kernels]}")
    per = [KernelDram(k.kernel, k.dram_bytes_read, k.dram_bytes_write) for k in kernels]
    pipelines, at = {}, 0
    for name, launches in WORKLOAD:
        pipelines[name] = sum(r.dram_read + r.dram_write for r in per[at:at + launches])
        at += launches
    fused, unfused_bytes = pipelines["numba fused fp32"], pipelines["numba unfused fp32"]
    return AttentionDram(length=length, heads=heads, kernels=per, fused_dram_bytes=fused,
                         unfused_dram_bytes=unfused_bytes, ratio=unfused_bytes / fused if fused else None,
                         pipelines=pipelines)


def run_attention(args: argparse.Namespace) -> AttentionBench | None:
    keep = keeper(args)
    lengths, (b, h), d = ([40], (1, 2), 8) if is_simulator() else (ATTENTION_LENGTHS, ATTENTION_HEADS, HEAD_DIM)
    bench = bench_attention(lengths, b, h, d, repeats=3 if args.quick else 5, keep=keep)
    return None if keep is None else bench


def run_long(args: argparse.Namespace) -> AttentionLong | None:
    keep = keeper(args)
    length, (b, h), d = (80, (1, 2), 16) if is_simulator() else (LONG_LENGTH, ATTENTION_HEADS, HEAD_DIM)
    record = bench_long(length, b, h, d, keep=keep)
    return None if keep is None else record


def shape_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--length", type=whole(1, "--length"), default=4096, help="L, the sequence length")
    parser.add_argument("--heads", type=whole(1, "--heads"), default=16, help="heads (batch and heads in one)")


def ncu_options(parser: argparse.ArgumentParser) -> None:
    shape_options(parser)
    parser.add_argument("--limit", type=float, default=600, help="seconds ncu may run")


def run_ncu(args: argparse.Namespace) -> AttentionDram:
    record = ncu_attention(args.length, args.heads, args.limit)
    print(dram_table(record))
    return record


def run_workload(args: argparse.Namespace) -> int:
    attention_workload(args.length, args.heads)
    return 0


COMMANDS = [
    Command("attention", "check, then time, every attention (Numba fused, tiled, tensor cores, unfused) against torch "
            "(reductions_attention.json)",
            run_attention, quick_option),
    Command("attention-long", f"the fused kernels at L = {LONG_LENGTH}, where S and P would not fit "
            "(reductions_attention_long.json)", run_long, lambda parser: None),
    Command("ncu-attention", "DRAM bytes of every pipeline from Nsight Compute (reductions_attention_ncu.json)",
            run_ncu, ncu_options),
    Command("attention-workload", "run every pipeline of the ncu profile once, for ncu to profile", run_workload, shape_options),
    plots_command("attention", save_plot),
]
