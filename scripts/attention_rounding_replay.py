"""Numerical emulation of the 3xTF32 fused attention kernel (helpers/lessons/attention/tensor_cores.py), one head.

A maintainer's study (minutes on a CPU; no GPU needed).  It replays, in NumPy, the kernel's arithmetic in its order of operations:
Q scaled by log2(e)/sqrt(d) in float32; every operand split x = big + small (big = tf32(x) with ties away
from zero, small = tf32(x - big)); S = Q K^T for each key tile as mma steps of 8 head columns (the kernel's
grouping: dims 16p + 4t + {0,1}, then 16p + 4t + {2,3}), each mma three accumulations (small*big, big*small,
big*big); online softmax in float32 with exp2 and the correction, the row sum kept per lane (lane t's keys in
the kernel's order) and summed over the four lanes by the butterfly at the end; O rescaled, then P V
accumulated into O as mma steps of 8 keys (16p + 4t + {0,1}, then {2,3}), three accumulations each; out =
O / sum.  What is NOT known is how the tensor core rounds its float32 accumulation; the models:

  rn      D = round-to-nearest(C + sum of the 8 exact products)        (what the CUDA simulator emulates)
  rz      D = round-toward-zero(C + sum of the 8 exact products)
  align0  every product and C truncated toward zero to 24 bits below the largest one's leading bit, summed
          exactly, then the sum truncated (rounded toward zero) to float32 (Fasi et al. 2021's description
          of V100/T4/A100 tensor cores); used for P V only, S with rz
  align3  the same with 3 extra alignment bits

Fixes (F): none (the committed kernel), tile (each key tile's P V into fresh zero fragments, then
O = O * correction + tile in float32 round-to-nearest, as an FMA), tile_split (the same, the two small
products in a second fresh fragment: tile = big*big part + small parts), tile_psum (tile, and the row sum
summed from big + small, the weights the mma sees).

Error: max |out - ref| / max |ref| (float64 reference), as helpers/lessons/attention/measure.py computes it
(there over heads 0 and B H - 1; here per head, and over the pair of heads drawn for each seed).

Env: LENGTHS (4096,1024), MODELS (rn,rz), FIXES (none,tile), CAUSAL (0,1), SEEDS (0), HEADS (1 or 2), BK (64),
D (64), S_MODEL (S's model), FMA (1), LONG (a length: measure.bench_long's sampled-rows check instead).
"""

from __future__ import annotations

import math
import os
import sys
import time

import numpy as np

F32, F64 = np.float32, np.float64
FMA = os.environ.get("FMA", "1") == "1"  # the kernel's x * correction + y as one FMA (nvvm contracts); 0: two roundings


def mul_add(x, y, z):
    """x * y + z in float32: one rounding (FMA) or two."""
    if FMA:
        return (x.astype(F64) * y.astype(F64) + z).astype(F32)
    return ((x * y).astype(F32) + z).astype(F32)


def tf32(x):
    """Round float32 to TF32 as cvt.rna.tf32.f32 does (10 mantissa bits, ties away from zero)."""
    x = np.ascontiguousarray(x, dtype=F32)
    bits = x.view(np.uint32)
    return ((bits + np.uint32(0x1000)) & np.uint32(0xFFFFE000)).view(F32)


def split(x):
    big = tf32(x)
    return big, tf32((x - big).astype(F32))


def round_rz(x64):
    """float64 -> float32, rounded toward zero."""
    f = x64.astype(F32)
    over = np.abs(f.astype(F64)) > np.abs(x64)
    return np.where(over, np.nextafter(f, F32(0)), f)


def make_acc(model):
    """acc(c, a, b): one mma's D = A B + C for float32 C (R x N), TF32 A (R x 8), B (8 x N)."""
    if model in ("rn", "rz"):
        rnd = (lambda x: x.astype(F32)) if model == "rn" else round_rz

        def acc(c, a, b):
            return rnd(c.astype(F64) + a.astype(F64) @ b.astype(F64))
        return acc
    extra = int(model[len("align"):])

    def acc(c, a, b):
        terms = a.astype(F64)[:, :, None] * b.astype(F64)[None, :, :]  # exact: 11 x 11 bit significands
        terms = np.concatenate([terms, c.astype(F64)[:, None, :]], axis=1)
        big = np.max(np.abs(terms), axis=1, keepdims=True)
        with np.errstate(divide="ignore"):
            e = np.floor(np.log2(np.where(big > 0, big, 1.0)))
        quantum = np.exp2(e - 23 - extra)
        summed = (np.trunc(terms / quantum) * quantum).sum(axis=1)  # exact: few bits each, one scale
        return round_rz(summed)
    return acc


def lane_keys(bk):
    """For lane t, the tile's keys in the order the kernel adds them to its part of the row sum."""
    nt = bk // 8
    return np.array([[16 * (n // 2) + 4 * t + 2 * (n % 2) + j for n in range(nt) for j in range(2)]
                     for t in range(4)])


def groups(width):
    """The 8-wide k groups of one mma, in the kernel's order: 16p + 4t + {0,1}, then 16p + 4t + {2,3}."""
    out = []
    for p in range(width // 16):
        for half in (0, 2):
            out.append(np.array([16 * p + 4 * t + half + j for j in range(2) for t in range(4)]))
    return out


def three(acc, c, a_pair, b_pair, cols_a, rows_b, small_into=None):
    """One 3xTF32 mma: small*big, big*small, big*big, as the kernel orders them (or the two small products
    into ``small_into`` when it is given: returns (c, small))."""
    (ab, as_), (bb, bs) = a_pair, b_pair
    if small_into is None:
        c = acc(c, as_[:, cols_a], bb[rows_b])
        c = acc(c, ab[:, cols_a], bs[rows_b])
        return acc(c, ab[:, cols_a], bb[rows_b])
    small_into = acc(small_into, as_[:, cols_a], bb[rows_b])
    small_into = acc(small_into, ab[:, cols_a], bs[rows_b])
    return acc(c, ab[:, cols_a], bb[rows_b]), small_into


def emulate(q, k, v, causal, model, fix, bk=64, s_model=None, rows=None):
    """The kernel's output for one head (L x d float32), or for the query rows ``rows`` only (each row's
    arithmetic is its own: the other rows of its block change nothing in it)."""
    length, d = k.shape
    rows = np.arange(length) if rows is None else np.asarray(rows)
    q = q[rows]
    acc = make_acc(model)
    acc_s = make_acc(s_model or ("rz" if model.startswith("align") else model))
    scale = F32(math.log2(math.e) / math.sqrt(d))
    qx = split((q * scale).astype(F32))
    kx, vx = split(k), split(v)
    kt = tuple(x.T.copy() for x in kx)  # d x L: B[k=dim, col=key]
    dgroups, kgroups, lanes = groups(d), groups(bk), lane_keys(bk)
    o = np.zeros((len(rows), d), F32)
    m = np.full(len(rows), -np.inf, F32)
    total = np.zeros((len(rows), 4), F32)
    rows_all = rows
    for start in range(0, length, bk):
        r0 = int(np.searchsorted(rows_all, start)) if causal else 0  # rows before `start`: only masked keys, a no-op
        rows = rows_all[r0:]
        keys = np.arange(start, min(start + bk, length))
        s = np.zeros((len(rows), bk), F32)
        qr = (qx[0][r0:], qx[1][r0:])
        kcols = np.arange(start, start + bk).clip(max=length - 1)
        kb = (kt[0][:, kcols], kt[1][:, kcols])
        for g in dgroups:
            s = three(acc_s, s, qr, kb, g, g)
        key_ids = start + np.arange(bk)
        masked = (key_ids[None, :] >= length) | (causal & (key_ids[None, :] > rows[:, None]))
        s = np.where(masked, F32(-np.inf), s)
        m_new = np.maximum(m[r0:], s.max(axis=1))
        corr = np.exp2((m[r0:] - m_new).astype(F32).astype(F64)).astype(F32)
        m[r0:] = m_new
        p = np.exp2((s - m_new[:, None]).astype(F32).astype(F64)).astype(F32)
        px = split(p)
        weights = (px[0].astype(F64) + px[1].astype(F64)).astype(F32) if fix == "tile_psum" else p
        part = np.zeros((len(rows), 4), F32)
        for i in range(lanes.shape[1]):
            part = (part + weights[:, lanes[:, i]]).astype(F32)
        total[r0:] = mul_add(total[r0:], corr[:, None], part)
        vb = (np.zeros((bk, d), F32), np.zeros((bk, d), F32))
        vb[0][:len(keys)], vb[1][:len(keys)] = vx[0][keys], vx[1][keys]
        if fix == "none":
            acc_o = (o[r0:] * corr[:, None]).astype(F32)
            for g in kgroups:
                acc_o = three(acc, acc_o, px, vb, g, g)
            o[r0:] = acc_o
            continue
        tile = np.zeros((len(rows), d), F32)
        small = np.zeros((len(rows), d), F32) if fix == "tile_split" else None
        for g in kgroups:
            if small is None:
                tile = three(acc, tile, px, vb, g, g)
            else:
                tile, small = three(acc, tile, px, vb, g, g, small)
        if small is not None:
            tile = (tile + small).astype(F32)
        o[r0:] = mul_add(o[r0:], corr[:, None], tile)
    whole = ((total[:, 0] + total[:, 2]).astype(F32) + (total[:, 1] + total[:, 3]).astype(F32)).astype(F32)
    return (o / whole[:, None]).astype(F32)


def reference(q, k, v, causal):
    q64, k64, v64 = (a.astype(F64) for a in (q, k, v))
    s = q64 @ k64.T / math.sqrt(q.shape[1])
    if causal:
        s = np.where(np.arange(s.shape[1])[None, :] <= np.arange(s.shape[0])[:, None], s, -np.inf)
    p = np.exp(s - s.max(axis=1, keepdims=True))
    return (p / p.sum(axis=1, keepdims=True)) @ v64


def heads(seed, length, d):
    """Two heads drawn as measure.bench_attention draws its inputs: standard normal float32 (this stands in for
    heads 0 and B H - 1, the two measure.py checks)."""
    rng = np.random.default_rng(seed)
    qkv = [rng.standard_normal((2, length, d), dtype=np.float32) for _ in range(3)]
    return [(qkv[0][h], qkv[1][h], qkv[2][h]) for h in range(2)]


def reference_rows(q, k, v, causal, rows):
    q64, k64, v64 = (a.astype(F64) for a in (q[rows], k, v))
    s = q64 @ k64.T / math.sqrt(q.shape[1])
    if causal:
        s = np.where(np.arange(s.shape[1])[None, :] <= np.asarray(rows)[:, None], s, -np.inf)
    p = np.exp(s - s.max(axis=1, keepdims=True))
    return (p / p.sum(axis=1, keepdims=True)) @ v64


def long_check(length, seeds, models, fixes, causals, bk, d, s_model):
    """measure.bench_long's check: rows 0-7, L/2 .. +7 and the last 8 of heads 0 and B H - 1, each head's error
    relative to its own largest sampled output, the worse head (measure.sampled_error)."""
    rows = np.unique(np.r_[0:8, length // 2:length // 2 + 8, length - 8:length])
    for seed in seeds:
        pair = heads(seed, length, d)
        for causal in causals:
            refs = [reference_rows(*h, causal, rows) for h in pair]
            for model in models:
                for fix in fixes:
                    t0 = time.time()
                    per = [float(np.max(np.abs(emulate(*h, causal, model, fix, bk, s_model, rows) - r))
                                 / np.max(np.abs(r))) for h, r in zip(pair, refs)]
                    print(f"LONG L={length} sampled rows seed={seed} causal={int(causal)} model={model:6s} "
                          f"fix={fix:10s} err/head={' '.join(f'{e:.2e}' for e in per)} err={max(per):.2e} "
                          f"({time.time() - t0:.0f} s)", flush=True)


def main():
    env = os.environ.get
    lengths = [int(x) for x in env("LENGTHS", "4096,1024").split(",")]
    models = env("MODELS", "rn,rz").split(",")
    fixes = env("FIXES", "none,tile").split(",")
    causals = [bool(int(x)) for x in env("CAUSAL", "0,1").split(",")]
    seeds = [int(x) for x in env("SEEDS", "0").split(",")]
    nheads = int(env("HEADS", "1"))
    bk, d = int(env("BK", "64")), int(env("D", "64"))
    s_model = env("S_MODEL") or None  # the accumulation model of S = Q K^T (default: as P V's; rz for align*)
    print(f"# block_k={bk} d={d} FMA={int(FMA)} S_MODEL={s_model}; err = max|out - ref| / max|ref| per head, "
          "then over the pair", flush=True)
    if env("LONG"):
        return long_check(int(env("LONG")), seeds, models, fixes, causals, bk, d, s_model)
    for length in lengths:
        for seed in seeds:
            pair = heads(seed, length, d)[:nheads]
            for causal in causals:
                refs = [reference(*h, causal) for h in pair]
                for model in models:
                    for fix in fixes:
                        t0 = time.time()
                        outs = [emulate(*h, causal, model, fix, bk, s_model) for h in pair]
                        per = [float(np.max(np.abs(o - r)) / np.max(np.abs(r))) for o, r in zip(outs, refs)]
                        both = max(float(np.max(np.abs(o - r))) for o, r in zip(outs, refs)) / max(
                            float(np.max(np.abs(r))) for r in refs)
                        mean_bias = float(np.mean([np.mean((o - r) * np.sign(r)) for o, r in zip(outs, refs)]))
                        print(f"L={length:5d} seed={seed} causal={int(causal)} model={model:6s} fix={fix:10s} "
                              f"err/head={' '.join(f'{e:.2e}' for e in per)} err={both:.2e} "
                              f"bias(toward |ref|)={mean_bias:+.1e} ({time.time() - t0:.0f} s)", flush=True)


if __name__ == "__main__":
    sys.exit(main())
