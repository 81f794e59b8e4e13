"""Fusing through a reduction, measured: softmax, attention and AdamW against torch.

``python -m helpers.lessons.softmax.reductions softmax|attention|adamw|all [--quick]`` checks every
implementation first (fresh random inputs, poisoned outputs, against float64 NumPy
or torch) and then times it with CUDA events (GPU time, median of repeats).  The
records go to ``results/<device>/reductions_<part>.json``; notebooks 11 and 12 read
the committed H200 ones.  ``ncu-attention`` profiles both attention pipelines'
DRAM bytes with Nsight Compute.  In the simulator only the checks run, at tiny sizes.
"""

from __future__ import annotations

import argparse
import math
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ClassVar, Sequence

import numpy as np
from numba import cuda

from helpers import results
from helpers.backend import is_simulator
from helpers.checks import poison
from helpers.device import peak_fp32_flops
from helpers.lessons.attention import attention
from helpers.lessons.dram import ncu
from helpers.lessons.optimizer import optim
from helpers.lessons.softmax import softmax
from helpers.timing import Timing, copy_bandwidth, time_gpu

SOFTMAX_SHAPES = [(16384, 4096), (4096, 4096), (4096, 1024)]  # the largest first: a run cut short keeps it
ATTENTION_LENGTHS = [4096, 1024]
ATTENTION_HEADS = (4, 16)  # batch, heads
HEAD_DIM = 64
ADAMW_SIZE = 2**26
ADAMW_LIST = 200


# --- records -------------------------------------------------------------------------


@dataclass
class Measured:
    """One implementation at one size: its median GPU time and its check against the reference."""

    name: str
    median_ms: float | None
    spread_ms: float | None = None
    max_rel_err: float | None = None
    note: str = ""
    registers: int | None = None  # per thread, for a Numba kernel (None for torch or the simulator)
    threads_per_block: int | None = None


@dataclass
class SoftmaxRow:
    rows: int
    cols: int
    bytes_moved: int  # x read once and out written once
    measured: list[Measured] = field(default_factory=list)


@dataclass
class SoftmaxBench(results.Record):
    SCHEMA: ClassVar[str] = "reductions_softmax"
    VERSION: ClassVar[int] = 1
    copy_ceiling_gbs: float | None
    rows: list[SoftmaxRow] = field(default_factory=list)


@dataclass
class AttentionRow:
    batch: int
    heads: int
    length: int
    head_dim: int
    flops: float  # 4 L^2 d per head: two matrix products
    unfused_scratch_bytes: int  # S and P
    measured: list[Measured] = field(default_factory=list)


@dataclass
class AttentionBench(results.Record):
    SCHEMA: ClassVar[str] = "reductions_attention"
    VERSION: ClassVar[int] = 1
    peak_fp32_flops: float | None
    rows: list[AttentionRow] = field(default_factory=list)


@dataclass
class KernelDram:
    """One profiled launch: DRAM bytes read and written, from Nsight Compute."""

    kernel: str
    dram_read: float
    dram_write: float


@dataclass
class AttentionDram(results.Record):
    SCHEMA: ClassVar[str] = "reductions_attention_ncu"
    VERSION: ClassVar[int] = 1
    length: int
    heads: int
    kernels: list[KernelDram]
    fused_dram_bytes: float
    unfused_dram_bytes: float
    ratio: float | None


@dataclass
class AdamWRow:
    case: str  # "one tensor" or "list"
    tensors: int
    elements: int
    bytes_fused: int  # 28 B per element
    measured: list[Measured] = field(default_factory=list)


@dataclass
class AdamWBench(results.Record):
    SCHEMA: ClassVar[str] = "reductions_adamw"
    VERSION: ClassVar[int] = 1
    rows: list[AdamWRow] = field(default_factory=list)


OUT_DIR: list[Path] = []  # where the command line asked for copies of the records


def save(record: results.Record) -> Path | None:
    """Write a record as ``results/<device>/<SCHEMA>.json`` (and a copy to ``--out``); nothing in the simulator."""
    if is_simulator():
        return None
    path = results.save(record)
    for folder in OUT_DIR:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / path.name).write_text(path.read_text())
    return path


# --- helpers ---------------------------------------------------------------------------


def _time(run: Callable[[], object], label: str, repeats: int) -> Timing | None:
    return time_gpu(run, label=label, repeats=repeats, warmup=2)


def _m(name: str, timing: Timing | None, err: float | None = None, note: str = "") -> Measured:
    return Measured(name, None if timing is None else timing.median_ms,
                    None if timing is None else timing.spread_ms, err, note)


def registers(kernel: Any) -> int | None:
    """Registers per thread of a compiled Numba kernel (the most over its compiled versions); None if unknown."""
    if is_simulator():
        return None
    try:
        regs = kernel.get_regs_per_thread()
        return int(max(regs.values())) if isinstance(regs, dict) else int(regs)
    except Exception:  # noqa: BLE001 -- a missing figure must not stop a measurement
        return None


def _torch() -> Any:
    try:
        import torch

        return torch if torch.cuda.is_available() else None
    except ImportError:
        return None


def _line(m: Measured, extra: str = "") -> str:
    t = "-" if m.median_ms is None else f"{m.median_ms:9.4f} ms"
    e = "" if m.max_rel_err is None else f"  err {m.max_rel_err:.1e}"
    r = "" if m.registers is None else f"  {m.registers} regs x {m.threads_per_block} threads"
    return f"  {m.name:34s} {t}{extra}{e}{r}{('  ' + m.note) if m.note else ''}"


# --- softmax -----------------------------------------------------------------------------


def softmax_error(got: np.ndarray, x: np.ndarray, rows: np.ndarray) -> float:
    """Largest relative error over the sampled rows, against float64; inf if anything is unwritten."""
    if np.isnan(got).any():
        return math.inf
    ref = softmax.reference(x[rows])
    return float(np.max(np.abs(got[rows] - ref) / ref))


def bench_softmax(shapes: Sequence[tuple[int, int]], repeats: int = 30, variants: bool = True) -> SoftmaxBench:
    torch = _torch()
    ceiling = None
    if not is_simulator():
        ceiling = copy_bandwidth(max(r * c for r, c in shapes), repeats=repeats)[1]
        print(f"copy ceiling {ceiling:.0f} GB/s")
    bench = SoftmaxBench(copy_ceiling_gbs=ceiling)
    rng = np.random.default_rng()
    for rows, cols in shapes:
        x = (rng.standard_normal((rows, cols), dtype=np.float32) * 2).astype(np.float32)
        sample = np.unique(np.r_[rng.integers(0, rows, 200), rows - 1])
        dx = cuda.to_device(x)
        out = cuda.device_array((rows, cols), np.float32)
        row_max, row_sum = cuda.device_array(rows, np.float32), cuda.device_array(rows, np.float32)
        e = cuda.device_array((rows, cols), np.float32)
        row = SoftmaxRow(rows, cols, 8 * rows * cols)
        runs: list[tuple[str, Callable[[], object], Any, int]] = [
            ("numba unfused (4 kernels)", lambda: softmax.run_unfused(dx, row_max, e, row_sum, out),
             softmax.subtract_exp_kernel, 256),
        ]
        threads_options = [softmax.default_threads(cols)]
        if variants and not is_simulator():
            threads_options = sorted({t for t in (64, 128, 256) if cols <= 64 * t} | set(threads_options))
        for t in threads_options:
            runs.append((f"numba fused, {t} threads/row", lambda t=t: softmax.run_fused(dx, out, t),
                         softmax.rows_kernel(cols, t), t))
        pipelined = [(128, 2), (128, 4), (128, 8), (64, 4)] if variants and not is_simulator() else [(softmax.default_threads(cols), 2)]
        for t, per_block in pipelined:
            if cols <= 64 * t:
                runs.append((f"numba fused pipelined, {t} threads, {per_block} rows/block",
                             lambda t=t, b=max(1, rows // per_block): softmax.run_pipelined(dx, out, t, b),
                             softmax.pipelined_kernel(cols, t), t))
        for t in ([256] if not is_simulator() else [softmax.default_threads(cols)]):
            runs.append((f"numba online, {t} threads/row", lambda t=t: softmax.run_online(dx, out, t),
                         softmax.online_softmax_kernel, t))
        for name, run, kernel, t in runs:
            poison(out)
            run()
            cuda.synchronize()
            err = softmax_error(out.copy_to_host(), x, sample)
            measured = _m(name, _time(run, name, repeats) if err < 1e-5 else None, err,
                          "" if err < 1e-5 else "WRONG: not timed")
            measured.registers, measured.threads_per_block = registers(kernel), t
            row.measured.append(measured)
        if torch is not None:
            tx = torch.as_tensor(x, device="cuda")

            def naive(t: Any) -> Any:
                z = (t - t.max(dim=1, keepdim=True).values).exp()
                return z / z.sum(dim=1, keepdim=True)

            compiled = torch.compile(naive, dynamic=False)
            for name, fn in (("torch.softmax", lambda: torch.softmax(tx, dim=1)),
                             ("naive torch", lambda: naive(tx)), ("torch.compile(naive)", lambda: compiled(tx))):
                got = fn().cpu().numpy()
                err = softmax_error(got, x, sample)
                row.measured.append(_m(name, _time(fn, name, repeats), err))
            del tx
        bench.rows.append(row)
        save(bench)  # after every size: a run cut short keeps what it measured
        print(f"softmax {rows} x {cols}")
        for m in row.measured:
            extra = "" if m.median_ms is None else f"  {row.bytes_moved / m.median_ms / 1e6:7.0f} GB/s"
            print(_line(m, extra))
        del dx, out, e
    return bench


# --- attention -----------------------------------------------------------------------------


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


def flash_configs() -> list[attention.FlashConfig]:
    if is_simulator():
        return [attention.default_config()]
    return [attention.FlashConfig(64, 64, 1, 1), attention.FlashConfig(64, 64, 4, 1), attention.FlashConfig(64, 64, 4, 2),
            attention.FlashConfig(64, 64, 1, 2), attention.FlashConfig(128, 64, 4, 2)]


def bench_attention(lengths: Sequence[int], batch: int, heads: int, d: int = HEAD_DIM, repeats: int = 5,
                    unfused: bool = True) -> AttentionBench:
    torch = _torch()
    bench = AttentionBench(peak_fp32_flops=None if is_simulator() else peak_fp32_flops())
    rng = np.random.default_rng()
    bh = batch * heads
    for length in lengths:
        q, k, v = (rng.standard_normal((bh, length, d), dtype=np.float32) for _ in range(3))
        check_heads = sorted({0, bh - 1})
        dq, dk, dv = (cuda.to_device(a) for a in (q, k, v))
        out = cuda.device_array((bh, length, d), np.float32)
        row = AttentionRow(batch, heads, length, d, 4.0 * bh * length * length * d, 2 * 4 * bh * length * length)
        runs: list[tuple[str, bool, Callable[[], object]]] = []
        kernels: dict[str, tuple[Any, int]] = {}
        for cfg in flash_configs():
            name = f"numba fused q{cfg.block_q}/k{cfg.block_k}/b{cfg.batch}/s{cfg.keys_per_step}"
            runs.append((name, False, lambda cfg=cfg: attention.run_fused(dq, dk, dv, out, False, cfg)))
            kernels[name] = (attention.flash_kernel(d, cfg, False), cfg.block_q)
        runs.append(("numba fused causal", True, lambda: attention.run_fused(dq, dk, dv, out, True)))
        scratch = None
        if unfused:
            scratch = attention.unfused_buffers(bh, length)
            runs.append(("numba unfused (S, P in memory)", False,
                         lambda: attention.run_unfused(dq, dk, dv, scratch[0], scratch[1], out)))
        for name, causal, run in runs:
            poison(out)
            run()
            cuda.synchronize()
            err = attention_error(out.copy_to_host(), q, k, v, check_heads, causal)
            ok = err < 1e-4
            measured = _m(name, _time(run, name, repeats) if ok else None, err, "" if ok else "WRONG")
            if name in kernels:
                measured.registers, measured.threads_per_block = registers(kernels[name][0]), kernels[name][1]
            row.measured.append(measured)
        del scratch
        if torch is not None:
            torch.backends.cuda.matmul.allow_tf32 = False
            from torch.nn.attention import SDPBackend, sdpa_kernel
            from torch.nn.functional import scaled_dot_product_attention as sdpa

            shape = (batch, heads, length, d)
            tq, tk, tv = (torch.as_tensor(a, device="cuda").reshape(shape) for a in (q, k, v))
            scale = 1 / math.sqrt(d)

            def naive() -> Any:
                return torch.softmax((tq @ tk.transpose(-1, -2)) * scale, dim=-1) @ tv

            def efficient() -> Any:
                with sdpa_kernel(SDPBackend.EFFICIENT_ATTENTION):
                    return sdpa(tq, tk, tv)

            bq, bk, bv = (t.to(torch.bfloat16) for t in (tq, tk, tv))

            def flash_bf16() -> Any:
                with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                    return sdpa(bq, bk, bv)

            for name, fn, note in (("torch naive fp32 (TF32 off)", naive, ""),
                                   ("torch SDPA efficient fp32", efficient, ""),
                                   ("torch SDPA flash bf16", flash_bf16, "bf16: another precision, tensor cores")):
                try:
                    got = fn().float().reshape(bh, length, d).cpu().numpy()
                    err = attention_error(got, q, k, v, check_heads, False)
                    row.measured.append(_m(name, _time(fn, name, repeats), err, note))
                except RuntimeError as exc:  # a backend that refuses these shapes
                    row.measured.append(Measured(name, None, note=f"not run: {str(exc).splitlines()[0][:80]}"))
            del tq, tk, tv, bq, bk, bv
            torch.cuda.empty_cache()
        bench.rows.append(row)
        save(bench)
        print(f"attention B={batch} H={heads} L={length} d={d}: {row.flops / 1e9:.0f} GFLOP, "
              f"unfused scratch {row.unfused_scratch_bytes / 1e9:.2f} GB")
        for m in row.measured:
            extra = "" if m.median_ms is None else f"  {row.flops / m.median_ms / 1e9:6.1f} TFLOP/s"
            print(_line(m, extra))
        del dq, dk, dv, out
    return bench


def attention_workload(length: int, heads: int, d: int = HEAD_DIM) -> None:
    """Both attention pipelines once each (for ncu to profile)."""
    rng = np.random.default_rng(0)
    dq, dk, dv = (cuda.to_device(rng.standard_normal((heads, length, d), dtype=np.float32)) for _ in range(3))
    out = cuda.device_array((heads, length, d), np.float32)
    s, p = attention.unfused_buffers(heads, length)
    attention.run_unfused(dq, dk, dv, s, p, out)
    attention.run_fused(dq, dk, dv, out)
    cuda.synchronize()


def ncu_attention(length: int, heads: int, limit_s: float = 600) -> AttentionDram:
    """DRAM bytes per kernel of both pipelines, from Nsight Compute (L2 flushed before each kernel)."""
    program = [sys.executable, "-m", "helpers.lessons.softmax.reductions", "attention-workload", "--length", str(length),
               "--heads", str(heads)]
    cmd = ncu.ncu_command(program, "all", kernel_regex="regex:.*(scores|weighted_sum|softmax|flash).*")
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=limit_s)
    if done.returncode != 0:
        raise ncu.NcuError(" | ".join((done.stdout + done.stderr).strip().splitlines()[-5:]))
    kernels = ncu.parse_ncu_csv(done.stdout)
    per = [KernelDram(k.kernel, k.dram_bytes_read, k.dram_bytes_write) for k in kernels]
    fused = sum(r.dram_read + r.dram_write for r in per if "flash" in r.kernel)
    unfused_bytes = sum(r.dram_read + r.dram_write for r in per if "flash" not in r.kernel)
    return AttentionDram(length=length, heads=heads, kernels=per, fused_dram_bytes=fused,
                         unfused_dram_bytes=unfused_bytes, ratio=unfused_bytes / fused if fused else None)


# --- AdamW --------------------------------------------------------------------------------


def _close(got: np.ndarray, want: np.ndarray) -> float:
    """Largest difference relative to the array's scale (float32 rounding is about 6e-8)."""
    if np.isnan(got).any():
        return math.inf
    return float(np.max(np.abs(got - want)) / max(np.max(np.abs(want)), 1e-30))


def bench_adamw(size: int, count: int, repeats: int = 20, steps: int = 3) -> AdamWBench:
    torch = _torch()
    opt = optim.AdamW()
    bench = AdamWBench()
    rng = np.random.default_rng()
    cases = [("one tensor", [size]), ("list", optim.mixed_sizes(count, size))]
    for case, sizes in cases:
        total = sum(sizes)
        flat_p = rng.standard_normal(total, dtype=np.float32)
        flat_g = rng.standard_normal(total, dtype=np.float32)
        offsets = np.r_[0, np.cumsum(sizes)]
        dp, dg = cuda.to_device(flat_p), cuda.to_device(flat_g)
        dm, dv = cuda.device_array(total, np.float32), cuda.device_array(total, np.float32)
        denom = cuda.device_array(max(sizes), np.float32)
        views = [[a[offsets[i]:offsets[i + 1]] for i in range(len(sizes))] for a in (dp, dg, dm, dv)]
        row = AdamWRow(case, len(sizes), total, 28 * total)

        def reset() -> None:
            dp.copy_to_device(flat_p)
            dm.copy_to_device(np.zeros(total, np.float32))
            dv.copy_to_device(np.zeros(total, np.float32))

        def numba_fused() -> None:
            optim.run_fused_list(*views, opt, 1)

        def numba_flat() -> None:  # one launch over the buffer the tensors are views of
            optim.run_fused(dp, dg, dm, dv, opt, 1)

        def numba_unfused() -> None:
            for p, g, m, v in zip(*views):
                optim.run_unfused(p, g, m, v, denom[: p.size], opt, 1)

        impls = [("numba fused (one launch per tensor)", numba_fused), ("numba unfused (8 launches per tensor)", numba_unfused)]
        if len(sizes) > 1:
            impls.insert(1, ("numba fused, one launch over a flat buffer", numba_flat))
        states: dict[str, tuple[np.ndarray, ...]] = {}
        for name, fn in impls:
            reset()
            for step in range(1, steps + 1):
                for group in [views] if fn is not numba_flat else [[[dp], [dg], [dm], [dv]]]:
                    for p, g, m, v in zip(*group):
                        if fn is numba_unfused:
                            optim.run_unfused(p, g, m, v, denom[: p.size], opt, step)
                        else:
                            optim.run_fused(p, g, m, v, opt, step)
            states[name] = (dp.copy_to_host(), dm.copy_to_host(), dv.copy_to_host())
        want = None
        tparams: list[Any] = []
        if torch is not None:
            tparams = [torch.nn.Parameter(torch.as_tensor(flat_p[offsets[i]:offsets[i + 1]].copy(), device="cuda"))
                       for i in range(len(sizes))]
            for prm, i in zip(tparams, range(len(sizes))):
                prm.grad = torch.as_tensor(flat_g[offsets[i]:offsets[i + 1]].copy(), device="cuda")
            ref_opt = torch.optim.AdamW(tparams, lr=opt.lr, betas=(opt.beta1, opt.beta2), eps=opt.eps,
                                        weight_decay=opt.weight_decay, fused=True)
            for _ in range(steps):
                ref_opt.step()
            want = tuple(np.concatenate([t.detach().cpu().numpy() for t in ts]) for ts in (
                tparams, [ref_opt.state[t]["exp_avg"] for t in tparams], [ref_opt.state[t]["exp_avg_sq"] for t in tparams]))
        for name, fn in impls:
            err = None if want is None else max(_close(a, b) for a, b in zip(states[name], want))
            row.measured.append(_m(name, _time(fn, name, repeats), err))
        if torch is not None:
            for label, kwargs in (("torch AdamW foreach=False", {"foreach": False}),
                                  ("torch AdamW foreach=True", {"foreach": True}),
                                  ("torch AdamW fused=True", {"fused": True})):
                topt = torch.optim.AdamW(tparams, lr=opt.lr, betas=(opt.beta1, opt.beta2), eps=opt.eps,
                                         weight_decay=opt.weight_decay, **kwargs)
                topt.step()
                row.measured.append(_m(label, _time(topt.step, label, repeats)))
                del topt
            del tparams
            torch.cuda.empty_cache()
        bench.rows.append(row)
        save(bench)
        print(f"AdamW, {case}: {len(sizes)} tensors, {total} elements, {row.bytes_fused / 1e9:.2f} GB at 28 B/element")
        for m in row.measured:
            extra = "" if m.median_ms is None else f"  {row.bytes_fused / m.median_ms / 1e6:7.0f} GB/s at 28 B/elem"
            print(_line(m, extra))
        del dp, dg, dm, dv, denom, views
    return bench


# --- command line ---------------------------------------------------------------------------



Row = SoftmaxRow | AttentionRow | AdamWRow
Bench = SoftmaxBench | AttentionBench | AdamWBench


def _row_title(part: str, row: Row) -> str:
    if part == "softmax":
        return f"softmax {row.rows} x {row.cols}"
    if part == "attention":
        return f"attention B={row.batch} H={row.heads} L={row.length} d={row.head_dim}"
    return f"AdamW, {row.case} ({row.tensors} tensor{'s' if row.tensors != 1 else ''}, {row.elements:,} elements)"


def plot_part(part: str, record: Bench) -> Any:
    """One panel per measured shape: GPU time of every implementation (log scale), Numba in blue, torch in orange."""
    import matplotlib.pyplot as plt

    rows = record.rows
    fig, axes = plt.subplots(len(rows), 1, figsize=(8, 0.32 * sum(len(r.measured) for r in rows) + 1.2 * len(rows)),
                             squeeze=False)
    for ax, row in zip(axes[:, 0], rows):
        timed = [m for m in row.measured if m.median_ms]
        names = [m.name for m in timed]
        colors = ["tab:blue" if n.startswith("numba") else "tab:orange" for n in names]
        y = list(range(len(names)))[::-1]  # points, not bars: a bar's length means nothing on a log axis
        _ = ax.scatter([m.median_ms for m in timed], y, c=colors, zorder=3)
        ax.set_yticks(y, names)
        ax.grid(axis="x", which="both", alpha=0.3)
        ax.set_xscale("log")
        ax.set_xlabel("median GPU time (ms), log scale")
        ax.set_title(_row_title(part, row), fontsize=9)
        ax.tick_params(axis="y", labelsize=7)
    where = record.provenance
    fig.suptitle(f"{where.device if where else ''}, {where.date[:10] if where else ''}", fontsize=8)
    fig.tight_layout()
    return fig


def save_plots(folder: Path | None = None) -> list[Path]:
    """Draw the committed softmax, attention and AdamW records as PNGs beside them (no GPU needed)."""
    import matplotlib.pyplot as plt

    folder = folder or results.RESULTS_DIR / results.COMMITTED
    written = []
    for part in ("softmax", "attention", "adamw"):
        record = committed(part)
        if record is None:
            continue
        figure = plot_part(part, record)
        path = folder / f"reductions_{part}.png"
        figure.savefig(path, dpi=110)
        plt.close(figure)
        written.append(path)
    return written


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m helpers.lessons.softmax.reductions", description=__doc__.split("\n\n")[0])
    parser.add_argument("part", choices=["softmax", "attention", "adamw", "all", "ncu-attention", "attention-workload",
                                         "plots"], help="what to measure; 'plots' draws the committed records")
    parser.add_argument("--quick", action="store_true", help="fewer variants and repeats")
    parser.add_argument("--length", type=int, default=4096, help="L for ncu-attention / attention-workload")
    parser.add_argument("--heads", type=int, default=16, help="heads for ncu-attention / attention-workload")
    parser.add_argument("--limit", type=float, default=600, help="seconds ncu may run (ncu-attention)")
    parser.add_argument("--out", type=Path, default=None, help="also copy the JSON records here")
    args = parser.parse_args(argv)
    if args.out is not None:
        OUT_DIR.append(args.out)
    if args.part == "plots":
        for path in save_plots():
            print("wrote", path)
        return
    sim = is_simulator()
    if sim:
        print("simulator: checking correctness at tiny sizes; no times (they would say nothing about a GPU)")
    if args.part == "attention-workload":
        attention_workload(args.length, args.heads)
        return
    records: list[Any] = []
    started = time.time()
    if args.part in ("softmax", "all"):
        shapes = [(8, 37), (5, 70)] if sim else SOFTMAX_SHAPES
        records.append(bench_softmax(shapes, repeats=10 if args.quick else 30, variants=not args.quick))
    if args.part in ("attention", "all"):
        lengths, (b, h), d = ([40], (1, 2), 8) if sim else (ATTENTION_LENGTHS, ATTENTION_HEADS, HEAD_DIM)
        records.append(bench_attention(lengths, b, h, d, repeats=3 if args.quick else 5))
    if args.part in ("adamw", "all"):
        size, count = (1000, 7) if sim else (ADAMW_SIZE, ADAMW_LIST)
        records.append(bench_adamw(size, count, repeats=5 if args.quick else 20))
    if args.part == "ncu-attention":
        result = ncu_attention(args.length, args.heads, args.limit)
        for k in result.kernels:
            print(f"  {k.kernel:28s} DRAM read {k.dram_read / 1e6:9.1f} MB, written {k.dram_write / 1e6:9.1f} MB")
        print(f"unfused / fused DRAM bytes: {result.ratio:.1f}x" if result.ratio else "no fused launch profiled")
        records.append(result)
    for record in records:
        path = save(record)
        if path is not None:
            print("wrote", path)
    print(f"done in {time.time() - started:.0f} s")


# --- reading the committed records (notebooks 11 and 12) --------------------------------------


RECORDS: dict[str, type[results.Record]] = {"softmax": SoftmaxBench, "attention": AttentionBench,
                                            "attention_ncu": AttentionDram, "adamw": AdamWBench}


def committed(part: str) -> Bench | AttentionDram | None:
    """The committed H200 record for ``part`` (softmax, attention, attention_ncu, adamw), or None (saying why)
    if there is none."""
    try:
        record = results.load(RECORDS[part])
    except results.ResultError as error:
        print(f"no committed H200 result for {part}: {error}")
        return None
    where = record.provenance.describe() if record.provenance else "(no provenance recorded)"
    print(f"committed result ({part}): {where}")
    return record


def _by_name(row: Row) -> dict[str, Measured]:
    return {m.name: m for m in row.measured}


def _median(row: Row, name: str) -> float | None:
    """The median time of the implementation called ``name`` in ``row``, or None if absent or untimed."""
    m = _by_name(row).get(name)
    return None if m is None else m.median_ms


def best(row: Row, prefix: str) -> Measured | None:
    """The fastest checked measurement whose name starts with ``prefix``."""
    timed = [m for m in row.measured if m.name.startswith(prefix) and m.median_ms is not None]
    return min(timed, key=lambda m: m.median_ms) if timed else None


def softmax_table(record: SoftmaxBench) -> str:
    """Time and GB/s (x read once plus out written once) per implementation and shape."""
    lines = [f"{'M x N':>12}  {'implementation':34s} {'time':>10}  {'GB/s':>6}  {'max rel err':>11}"]
    for row in record.rows:
        for m in row.measured:
            t = "-" if m.median_ms is None else f"{m.median_ms:7.4f} ms"
            gbs = "-" if m.median_ms is None else f"{row.bytes_moved / m.median_ms / 1e6:6.0f}"
            err = "-" if m.max_rel_err is None else f"{m.max_rel_err:.1e}"
            lines.append(f"{row.rows:>6} x {row.cols:<5}  {m.name:34s} {t:>10}  {gbs:>6}  {err:>11}")
    if record.copy_ceiling_gbs:
        lines.append(f"device-to-device copy, same run: {record.copy_ceiling_gbs:.0f} GB/s")
    return "\n".join(lines)


def softmax_claims(record: SoftmaxBench) -> list[str]:
    """The performance claims about the fused softmax, each answered from the record."""
    claims = []
    for row in record.rows:
        fused, unfused = best(row, "numba fused"), best(row, "numba unfused")
        torch_ms = _median(row, "torch.softmax")
        shape = f"{row.rows} x {row.cols}"
        if fused and torch_ms:
            ratio = torch_ms / fused.median_ms
            claims.append(f"fused Numba softmax at least as fast as torch.softmax at {shape}: "
                          f"{'yes' if ratio >= 1 else 'no'}, {ratio:.2f}x its throughput")
        if fused and unfused:
            ratio = unfused.median_ms / fused.median_ms
            claims.append(f"fused is >= 3x faster than the four Numba kernels at {shape}: "
                          f"{'yes' if ratio >= 3 else 'no'}, {ratio:.2f}x")
        if fused and record.copy_ceiling_gbs:
            frac = row.bytes_moved / fused.median_ms / 1e6 / record.copy_ceiling_gbs
            claims.append(f"fused softmax at {shape} reaches {frac:.0%} of the device copy's bandwidth "
                          f"({fused.name})")
    return claims


def attention_table(record: AttentionBench) -> str:
    """Time and TFLOP/s (4 L^2 d per head) per implementation and length."""
    lines = [f"{'L':>5}  {'implementation':34s} {'time':>10}  {'TFLOP/s':>7}  {'error':>8}  note"]
    for row in record.rows:
        for m in row.measured:
            t = "-" if m.median_ms is None else f"{m.median_ms:7.3f} ms"
            tf = "-" if m.median_ms is None else f"{row.flops / m.median_ms / 1e9:7.1f}"
            err = "-" if m.max_rel_err is None else f"{m.max_rel_err:.1e}"
            lines.append(f"{row.length:>5}  {m.name:34s} {t:>10}  {tf:>7}  {err:>8}  {m.note}")
    return "\n".join(lines)


def attention_claims(record: AttentionBench, ncu_record: AttentionDram | None = None) -> list[str]:
    """The claims about the fused attention kernel, each answered from the records."""
    claims = []
    for row in record.rows:
        fused, unfused = best(row, "numba fused q"), best(row, "numba unfused")
        naive_ms = _median(row, "torch naive fp32 (TF32 off)")
        L = row.length
        if fused and unfused:
            r = unfused.median_ms / fused.median_ms
            claims.append(f"fused faster than the unfused Numba pipeline at L = {L}: {'yes' if r > 1 else 'no'}, {r:.2f}x")
        if fused and naive_ms:
            r = naive_ms / fused.median_ms
            claims.append(f"fused faster than naive torch fp32 at L = {L}: {'yes' if r > 1 else 'no'}, {r:.2f}x")
        if fused and record.peak_fp32_flops:
            frac = row.flops / (fused.median_ms * 1e-3) / record.peak_fp32_flops
            claims.append(f"fused at L = {L} runs at {frac:.0%} of the FP32 peak ({fused.name})")
    if ncu_record and ncu_record.ratio:
        r = ncu_record.ratio
        claims.append(f"fused moves >= 10x fewer DRAM bytes than unfused at L = {ncu_record.length}, "
                      f"{ncu_record.heads} heads (ncu): "
                      f"{'yes' if r >= 10 else 'no'}, {r:.0f}x")
    return claims


def adamw_table(record: AdamWBench) -> str:
    """Time and GB/s (at the fused kernel's 28 B per element) per implementation and case."""
    lines = [f"{'case':12s} {'implementation':44s} {'time':>10}  {'GB/s':>6}  {'diff vs torch':>13}"]
    for row in record.rows:
        for m in row.measured:
            t = "-" if m.median_ms is None else f"{m.median_ms:7.3f} ms"
            gbs = "-" if m.median_ms is None else f"{row.bytes_fused / m.median_ms / 1e6:6.0f}"
            err = "-" if m.max_rel_err is None else f"{m.max_rel_err:.1e}"
            lines.append(f"{row.case:12s} {m.name:44s} {t:>10}  {gbs:>6}  {err:>13}")
    return "\n".join(lines)


def adamw_claims(record: AdamWBench) -> list[str]:
    """The claims about the fused AdamW step, answered from the record."""
    claims = []
    for row in record.rows:
        ours, theirs = _median(row, "numba fused (one launch per tensor)"), _median(row, "torch AdamW fused=True")
        if ours and theirs:
            r = ours / theirs
            where = "one tensor of 2^26" if row.case == "one tensor" else f"a list of {row.tensors} tensors"
            claims.append(f"fused Numba step within 10% of torch's fused=True on {where}: "
                          f"{'yes' if r <= 1.1 else 'no'}, {r:.2f}x its time")
    return claims


@dataclass
class InFlight:
    """How many bytes of loads one Numba softmax configuration can have outstanding."""

    name: str
    threads_per_block: int
    registers: int
    blocks_per_sm: int  # resident blocks, limited by registers, threads and the 32-block cap
    loads_per_thread: int  # independent loads a thread can have outstanding at once
    bytes_in_flight: int  # over the whole GPU
    achieved_gbs: float

    @property
    def implied_latency_us(self) -> float:
        """Little's law backwards: the latency at which these bytes in flight give the achieved rate."""
        return self.bytes_in_flight / (self.achieved_gbs * 1e3)


def resident_blocks(threads: int, regs: int, max_threads: int = 2048, max_blocks: int = 32,
                    registers_per_sm: int = 65536) -> int:
    """Blocks of ``threads`` that fit on one SM at ``regs`` registers per thread (8-register granules)."""
    per_warp = -(-regs // 8) * 8 * 32
    warps = -(-threads // 32)
    return max(0, min(max_blocks, max_threads // threads, registers_per_sm // (per_warp * warps)))


def bytes_in_flight(record: SoftmaxBench, rows: int = 16384, cols: int = 4096) -> list[InFlight]:
    """Bytes in flight for each timed fused and online Numba softmax at one shape.

    A row-in-registers thread issues all its ``ceil(cols / threads)`` loads before it
    uses any; an online thread uses each value before its next load, so count one.
    """
    if record.provenance is None or record.provenance.sm_count is None:
        raise results.ResultError("bytes_in_flight needs the SM count of the GPU that was measured (its provenance)")
    sms = record.provenance.sm_count
    out = []
    for row in record.rows:
        if (row.rows, row.cols) != (rows, cols):
            continue
        for m in row.measured:
            if m.median_ms is None or not m.registers or not m.name.startswith(("numba fused", "numba online")):
                continue
            t = m.threads_per_block
            loads = -(-cols // t) if m.name.startswith("numba fused") else 1
            blocks = resident_blocks(t, m.registers)
            out.append(InFlight(m.name, t, m.registers, blocks, loads, sms * blocks * t * loads * 4,
                                row.bytes_moved / m.median_ms / 1e6))
    return out


def adamw_launches(record: AdamWBench) -> list[str]:
    """What the launch count costs on the list of tensors, from the record's times."""
    rows = [r for r in record.rows if r.case == "list"]
    if not rows:
        return ["no measurement of the list of tensors in this record"]
    row = rows[0]
    per_tensor = _median(row, "numba fused (one launch per tensor)")
    flat = _median(row, "numba fused, one launch over a flat buffer")
    unfused = _median(row, "numba unfused (8 launches per tensor)")
    n = row.tensors
    lines = []
    if per_tensor and flat:
        lines.append(f"{n} launches: {per_tensor:.3f} ms; one launch over the same bytes: {flat:.3f} ms; "
                     f"so each extra launch costs about {(per_tensor - flat) / (n - 1) * 1e3:.1f} µs")
    if unfused and flat:
        lines.append(f"{8 * n} launches (unfused): {unfused:.3f} ms, {unfused / flat:.0f}x the single launch")
    one = [r for r in record.rows if r.case == "one tensor"]
    if one:
        big = _median(one[0], "numba fused (one launch per tensor)")
        if big:
            gbs = one[0].bytes_fused / big / 1e6
            average = row.bytes_fused / n
            lines.append(f"an average tensor's {average / 1e6:.1f} MB take {average / gbs / 1e3:.2f} µs at the "
                         f"large tensor's {gbs:.0f} GB/s")
    return lines


if __name__ == "__main__":
    main()
