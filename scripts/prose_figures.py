"""Measured figures quoted in the lessons' markdown, each tied to the data it comes from.

A markdown cell that quotes a measured number puts a marker right after it::

    the fused kernel is 2.27×<!-- fig: speedup_loop_2_28 --> faster
    the PTX has 3<!-- out: fused_global_loads --> loads

The marker is an HTML comment, so a reader never sees it.  ``fig: NAME`` names a
function in :data:`FIGURES` that computes the number from a committed result in
``results/h200/``; ``out: NAME`` names a pattern in :data:`OUTPUTS` whose first
group is found in the notebook's own committed outputs.  :func:`check_markdown`
compares the quoted number with the computed one at the precision it is quoted
(``2.27`` must round from the data to 2.27, ``4,500`` to 4,500; a leading ``~`` or
``about`` rounds at the precision written, where the zeros that end a whole number of three digits
or more are not significant: ``about 2.3`` takes 2.25 to 2.35, ``about 2.27`` only 2.265 to 2.275,
``about 4,500`` 4,450 to 4,550); ``fig<=: NAME`` and ``fig>=: NAME``
mark a bound ("at most 10%", "at least 75%") and returns one line per disagreement; ``tests/test_prose_figures.py``
runs it over every lesson; ``python scripts/prose_figures.py`` does the same from the
command line and lists every figure with its value.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from helpers.lessons.inflight import report as inflight_report
from helpers.lessons.optimizer import report as optimizer_report
from helpers.lessons.roofline import ceiling
from helpers.results import RESULTS_DIR

MARKER = re.compile(r"<!--\s*(fig|fig<=|fig>=|out):\s*([\w.]+)\s*-->")
# The number a marker belongs to: the last one before it, with optional ~, thousands commas and decimals.
NUMBER = re.compile(r"(~|about )?(-?\d[\d,]*(?:\.\d+)?)(?:e(-?\d+))?[^\d<>]{0,12}$")

FIGURES: dict[str, Callable[[], float]] = {}
OUTPUTS: dict[str, str] = {}


def figure(name: str) -> Callable[[Callable[[], float]], Callable[[], float]]:
    """Register a function computing one quoted figure from committed results."""

    def register(fn: Callable[[], float]) -> Callable[[], float]:
        FIGURES[name] = fn
        return fn

    return register


def committed(name: str, folder: Path | None = None) -> dict:
    """A committed H200 result as plain JSON."""
    return json.loads(((folder or RESULTS_DIR / "h200") / f"{name}.json").read_text())


@dataclass(frozen=True)
class Quote:
    """A number as written in prose: its value, its decimals, and whether it is marked approximate."""

    value: float
    decimals: int
    approximate: bool
    unit: float = 0.0  # one unit of the last significant digit: 0.01 for 2.27, 100 for 4,500, 1 for 10

    def agrees(self, actual: float) -> bool:
        """True when ``actual`` is what this quote says, at the precision it is written."""
        if self.approximate:  # "about": what rounds to the quote at its last significant digit
            return abs(actual - self.value) <= self.unit / 2 * (1 + 1e-9)
        return round(actual, self.decimals) == round(self.value, self.decimals)


def parse_quote(text_before: str) -> Quote | None:
    """The number just before a marker (``text_before`` ends where the marker starts)."""
    m = NUMBER.search(text_before[-40:])
    if m is None:
        return None
    digits = m.group(2).replace(",", "")
    decimals = len(digits.split(".")[1]) if "." in digits else 0
    value = float(digits)
    if m.group(3):
        value *= 10 ** int(m.group(3))
        decimals -= int(m.group(3))
    whole = digits.split(".")[0].lstrip("-")
    zeros = len(whole) - len(whole.rstrip("0")) if "." not in digits and len(whole) >= 3 else 0
    return Quote(value, decimals, bool(m.group(1)), 10.0 ** (zeros - decimals))


def check_markdown(text: str, outputs: str = "", figures: dict[str, Callable[[], float]] | None = None,
                   patterns: dict[str, str] | None = None) -> list[str]:
    """Every marker in ``text`` whose quoted number disagrees with its source, one line each."""
    figures = FIGURES if figures is None else figures
    patterns = OUTPUTS if patterns is None else patterns
    problems = []
    for m in MARKER.finditer(text):
        kind, name = m.groups()
        quote = parse_quote(text[: m.start()])
        context = text[max(0, m.start() - 50): m.start()].replace("\n", " ")
        if quote is None:
            problems.append(f"no number before the marker {m.group(0)!r} ({context!r})")
            continue
        if kind.startswith("fig"):
            if name not in figures:
                problems.append(f"unknown figure {name!r}")
                continue
            actual = figures[name]()
        else:
            if name not in patterns:
                problems.append(f"unknown output pattern {name!r}")
                continue
            found = re.search(patterns[name], outputs)
            if found is None:
                problems.append(f"output pattern {name!r} not found in the notebook's outputs")
                continue
            actual = float(next(g for g in found.groups() if g is not None).replace(",", ""))
        if kind == "fig<=" or kind == "fig>=":  # the quote is a bound: "at most 10%", "at least 75%"
            if (actual > quote.value) if kind == "fig<=" else (actual < quote.value):
                problems.append(f"{context!r}: quoted a bound of {quote.value:g}, the data say {actual:.6g} ({kind}: {name})")
        elif not quote.agrees(actual):
            problems.append(f"{context!r}: quoted {quote.value:g}, the data say {actual:.6g} ({kind}: {name})")
    return problems


def marked_spans(text: str) -> list[tuple[int, int]]:
    """Character spans of the numbers that carry a marker (for finding unmarked figures)."""
    spans = []
    for m in MARKER.finditer(text):
        q = NUMBER.search(text[max(0, m.start() - 40): m.start()])
        if q:
            start = max(0, m.start() - 40) + q.start()
            spans.append((start, m.start()))
    return spans


# Measured figures in prose: numbers with one of these units must carry a marker.
MEASURED = re.compile(r"(?<![\w.^])~?\d[\d,]*(?:\.\d+)?(?:\s*(?:µs|ms|GB/s|TB/s|%)|×)")


def unmarked_figures(text: str, allowed: tuple[str, ...] = ()) -> list[str]:
    """Numbers with a unit of time, bandwidth, percent or ratio that carry no marker."""
    spans = marked_spans(text)
    found = []
    for m in MEASURED.finditer(text):
        if any(a <= m.start() < b for a, b in spans) or m.group(0).strip() in allowed:
            continue
        found.append(m.group(0))
    return found


# --- the figures --------------------------------------------------------------------

# Patterns found in a notebook's own outputs (first group that matched is the number).
OUTPUTS.update({
    "fma_8_to_32": r"8 -> 32 FMAs per element: runtime x(\d+\.\d+)|: x(\d+\.\d+) at 32,",
    "speedup_03": r"from bytes, measured (\d+\.\d+)x",
})


@figure("hbm_bound_tbs")
def _hbm_bound_tbs() -> float:
    return ceiling.bound_gbs() / 1e3


for _gbs, _pct, _ratio in [("best_3to1_gbs", "best_3to1_pct_bound", "3:1"),
                           ("best_1to1_gbs", "best_1to1_pct_bound", "1:1")]:
    figure(_gbs)(lambda ratio=_ratio: ceiling.best_measured(ratio).gbs)
    figure(_pct)(lambda ratio=_ratio: 100 * ceiling.best_measured(ratio).gbs / ceiling.bound_gbs())


@figure("torch_compile_max_abs_diff")
def _compile_diff() -> float:
    rows = committed("fuser_vs_torch_compile")["rows"]
    diffs = [r["torch_compile_max_abs_diff"] for r in rows if "torch_compile_max_abs_diff" in r]
    diffs += [c["max_abs_diff"] for r in rows for k, c in r.get("contenders", {}).items() if "compile" in k]
    return float(max(diffs))


def _roofline_row(n: int = 2**28) -> dict:
    return committed("roofline")["runs"][str(n)]


def _best_3to1_at(row: dict) -> float:
    return max(row[k]["gbs"] for k in ("stream3", "stream3_torch_compile") if row.get(k) and row[k].get("gbs"))


@figure("naive_pct_best")
def _naive_pct_best() -> float:
    row = _roofline_row()
    return 100 * row["variants"]["naive"]["gbs"] / _best_3to1_at(row)


def _sweep_speedup(mode: str, n: int = 2**28) -> float:
    times = {m["implementation"]: m["median_ms"] for m in committed("bench_sweep")["measurements"]
             if m["n"] == n and m["mode"] == mode}
    return times["numba three kernels"] / times["numba fused"]


for _name, _mode in [("speedup_loop_2_28", "loop"), ("speedup_cold_2_28", "gpu_cold")]:
    figure(_name)(lambda mode=_mode: _sweep_speedup(mode))



def notebook_outputs(nb: dict) -> str:
    """The text of every committed output of a notebook (JSON as nbformat writes it)."""
    texts = []
    for cell in nb.get("cells", []):
        for out in cell.get("outputs", []):
            text = out.get("text") if out.get("output_type") == "stream" else out.get("data", {}).get("text/plain")
            if text:
                texts.append("".join(text) if isinstance(text, list) else text)
    return "\n".join(texts)


def check_notebook(path: Path) -> list[str]:
    """Every disagreement between a notebook's marked figures and their data, as ``c<cell>: ...``."""
    nb = json.loads(Path(path).read_text())
    outputs = notebook_outputs(nb)
    return [f"c{i}: {p}" for i, cell in enumerate(nb["cells"]) if cell["cell_type"] == "markdown"
            for p in check_markdown("".join(cell["source"]), outputs)]


def main(argv: list[str] | None = None) -> int:
    """``python scripts/prose_figures.py [NOTEBOOK ...]``: check the marked figures; list the registered ones."""
    import argparse

    parser = argparse.ArgumentParser(prog="python scripts/prose_figures.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="notebooks to check (default: every lesson)")
    args = parser.parse_args(argv)
    for name, fn in sorted(FIGURES.items()):
        print(f"{name:28s} {fn():.6g}")
    paths = args.notebooks or sorted((RESULTS_DIR.parent / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    problems = [f"{p.name} {line}" for p in paths for line in check_notebook(p)]
    print("\n".join(problems) or f"every marked figure in {len(paths)} notebooks agrees with its data")
    return 1 if problems else 0


# --- the opening page's claims, measured (results/h200/seed_claims.json) ---------------


def _seed() -> dict:
    return committed("seed_claims")


def _seed_kernels(field: str) -> list[float]:
    return [k[field] for k in _seed()["kernels"] if k.get(field) is not None]


@figure("seed_lanes")
def _seed_lanes() -> float:
    return float(_seed()["lanes"]["lanes"])


for _name, _extreme, _field in [
    ("seed_fma_max", max, "fma_pipe_pct"),
    ("seed_issue_max", max, "issue_active_pct"),
    ("seed_dram_busy_min", min, "dram_throughput_pct"),
    ("seed_dram_busy_max", max, "dram_throughput_pct"),
]:
    figure(_name)(lambda extreme=_extreme, field=_field: extreme(_seed_kernels(field)))


@figure("seed_stall_min_share")
def _seed_stall_share() -> float:
    shares = [100 * k["stalls_per_issue"]["long_scoreboard"] / sum(k["stalls_per_issue"].values())
              for k in _seed()["kernels"] if k.get("stalls_per_issue")]
    return min(shares)


# --- notebook 02 ---------------------------------------------------------------------
# The timing table and the FMA sweep print only on a GPU; the prose quotes the committed H200 run of the
# same kernels at the same size (bytes_in_flight.json: add, multiply, scale, copy at n = 2^26 + 3, GPU time).

OUTPUTS.update({
    "nb02_knee_fmas": r"knee at ~(\d+) FMAs per element",
    "nb02_fma_at_knee": r"x(\d+\.\d+) at \d+ \(the measured point nearest the knee\)",
    "nb02_fma_doubling": r"\d+ -> \d+: x(\d+\.\d+)",
    "nb02_fma_8_over_floor": r"at 8 FMAs per element the kernel takes (\d+\.\d+)x its memory floor",
    "nb02_fma_pct_peak": r"(\d+)% of the model's peak",
})


def _inflight_kernel(name: str) -> dict:
    return next(k for k in committed("bytes_in_flight")["kernels"] if k["name"] == name)


def _inflight_floor_ratio(name: str) -> float:
    """Measured time over the floor (bytes moved / the datasheet bound)."""
    k = _inflight_kernel(name)
    floor_ms = 4 * (k["reads"] + k["writes"]) * k["n"] / (ceiling.bound_gbs() * 1e9) * 1e3
    return k["median_ms"] / floor_ms


@figure("nb02_copy_min_gbs")
def _nb02_copy_min() -> float:
    return min(b.gbs for b in ceiling.candidates("1:1"))


@figure("nb02_scale_over_copy")
def _nb02_scale_over_copy() -> float:
    return _inflight_kernel("scale")["median_ms"] / _inflight_kernel("copy")["median_ms"]


for _name, _kernel in [("nb02_add_over_floor", "add"), ("nb02_scale_over_floor", "scale"),
                       ("nb02_copy_kernel_over_floor", "copy")]:
    figure(_name)(lambda name=_kernel: _inflight_floor_ratio(name))

for _name, _kernel in [("nb02_add_pct_bound", "add"), ("nb02_multiply_pct_bound", "multiply"),
                       ("nb02_scale_pct_bound", "scale"), ("nb02_copy_kernel_pct_bound", "copy")]:
    figure(_name)(lambda name=_kernel: 100 * _inflight_kernel(name)["gbs"] / ceiling.bound_gbs())


def _nb02_dram_busy(kernel: str) -> float:
    return next(k["dram_throughput_pct"] for k in _seed()["kernels"] if k["kernel"] == kernel)


def _nb02_profiled_pct_bound(kernel: str, bytes_per_element: int) -> float:
    """The profiled launch's own rate (its bytes over ncu's duration) as a share of the datasheet bound."""
    k = next(k for k in _seed()["kernels"] if k["kernel"] == kernel)
    return 100 * bytes_per_element * k["n"] / (k["duration_us"] * 1e3) / ceiling.bound_gbs()


figure("nb02_add_dram_busy")(lambda: _nb02_dram_busy("add_kernel"))
figure("nb02_scale_dram_busy")(lambda: _nb02_dram_busy("scale_kernel"))
figure("nb02_add_profiled_pct_bound")(lambda: _nb02_profiled_pct_bound("add_kernel", 12))  # reads 2, writes 1
figure("nb02_scale_profiled_pct_bound")(lambda: _nb02_profiled_pct_bound("scale_kernel", 8))  # reads 1, writes 1


# --- notebook 03 ---------------------------------------------------------------------
# The timing prints only on a GPU; the prose quotes the committed H200 run of the same two pipelines at the
# same size (bytes_in_flight.json "pipelines": three kernels and fused, 4-byte and 16-byte accesses, GPU time).


def _inflight_pipeline(name: str) -> dict:
    return next(p for p in committed("bytes_in_flight")["pipelines"] if p["name"] == name)


def _inflight_pipeline_gbs(name: str) -> float:
    p = _inflight_pipeline(name)
    return p["bytes_per_element"] * p["n"] / (p["median_ms"] * 1e-3) / 1e9


for _name, _three, _fused in [("nb03_speedup", "three kernels, 4-byte", "fused, 4-byte"),
                              ("nb03_speedup_16byte", "three kernels, 16-byte", "fused, 16-byte")]:
    figure(_name)(lambda three=_three, fused=_fused:
                  _inflight_pipeline(three)["median_ms"] / _inflight_pipeline(fused)["median_ms"])

for _name, _pipeline in [("nb03_three_us", "three kernels, 4-byte"), ("nb03_fused_us", "fused, 4-byte")]:
    figure(_name)(lambda name=_pipeline: 1e3 * _inflight_pipeline(name)["median_ms"])

for _name, _pipeline in [("nb03_three_gbs", "three kernels, 4-byte"), ("nb03_fused_gbs", "fused, 4-byte")]:
    figure(_name)(lambda name=_pipeline: _inflight_pipeline_gbs(name))


@figure("nb03_eager_max_abs_diff")
def _nb03_eager_diff() -> float:
    return float(_seed()["compile"]["max_abs_diff_eager_vs_numpy"])


# --- notebook 04 ---------------------------------------------------------------------
# ncu_dram.json (both pipelines at five sizes, L2 flushed "all" or kept "none") and ncu_corpus.json (2^26, L2 kept).


def _ncu_launches(mode: str) -> list[dict]:
    return committed("ncu_dram")["modes"][mode]["launches"]


def _ncu_launch(mode: str, n: int, kernel: str) -> dict:
    return next(r for r in _ncu_launches(mode) if r["n"] == n and r["kernel"] == kernel)


def _flushed_write_shortfalls_mb(from_n: int = 2**24) -> list[float]:
    """Counted minus ncu-measured DRAM writes per launch, L2 flushed before each kernel, arrays of at least from_n."""
    return [(r["ledger_bytes_written"] - r["ncu_dram_bytes_written"]) / 1e6 for r in _ncu_launches("all")
            if r["n"] >= from_n]


@figure("nb04_fused_2_22_kept_mb")
def _nb04_fused_2_22_kept() -> float:
    r = _ncu_launch("none", 2**22, "fused_kernel")
    return (r["ncu_dram_bytes_read"] + r["ncu_dram_bytes_written"]) / 1e6


for _name, _extreme in [("nb04_flushed_write_short_min_mb", min), ("nb04_flushed_write_short_max_mb", max)]:
    figure(_name)(lambda extreme=_extreme: extreme(_flushed_write_shortfalls_mb()))


@figure("nb04_flushed_write_short_2_28_max_pct")
def _nb04_short_2_28_pct() -> float:
    return max(100 * (r["ledger_bytes_written"] - r["ncu_dram_bytes_written"]) / r["ledger_bytes_written"]
               for r in _ncu_launches("all") if r["n"] == 2**28)


@figure("nb04_add_2_24_flushed_write_short_mb")
def _nb04_add_2_24_short() -> float:
    r = _ncu_launch("all", 2**24, "add_kernel")
    return (r["ledger_bytes_written"] - r["ncu_dram_bytes_written"]) / 1e6


def _agreement_worst(mode: str) -> float:
    return committed("ncu_dram")["agreement_check"]["by_cache_policy"][mode]["worst"]["ratio"]


for _name, _mode in [("nb04_flushed_worst_short_pct", "all"), ("nb04_kept_worst_short_pct", "none")]:
    figure(_name)(lambda mode=_mode: 100 * (1 - _agreement_worst(mode)))


def _corpus_launch(kernel: str) -> dict:
    return next(r for r in committed("ncu_corpus")["launches"] if r["kernel"] == kernel)


for _name, _kernel in [("nb04_three_point_ratio", "three_point_interior"),
                       ("nb04_five_point_ratio", "five_point_interior"), ("nb04_block_max_ratio", "block_max")]:
    figure(_name)(lambda kernel=_kernel: _corpus_launch(kernel)["ratio"])


@figure("nb04_block_max_extra_write_mb")
def _nb04_block_max_extra() -> float:
    r = _corpus_launch("block_max")
    return (r["ncu_dram_bytes_written"] - r["ledger_bytes_written"]) / 1e6


figure("nb04_block_max_count_write_mb")(lambda: _corpus_launch("block_max")["ledger_bytes_written"] / 1e6)
figure("nb04_l2_mib")(lambda: committed("ncu_dram")["l2_cache_bytes"] / 2**20)


@figure("nb04_fused_2_22_count_mb")
def _nb04_fused_2_22_count() -> float:
    r = _ncu_launch("none", 2**22, "fused_kernel")
    return (r["ledger_bytes_read"] + r["ledger_bytes_written"]) / 1e6


@figure("nb04_add_2_24_count_write_mb")
def _nb04_add_2_24_count() -> float:
    return _ncu_launch("all", 2**24, "add_kernel")["ledger_bytes_written"] / 1e6


@figure("nb04_carryover_max_mb")
def _nb04_carryover_max() -> float:
    """From 2^24 up: a launch's DRAM writes with the L2 kept, against its writes with the L2 flushed plus the write
    shortfall (count minus flushed writes) of the launch before it; the largest gap in MB."""
    flushed, kept = _ncu_launches("all"), _ncu_launches("none")
    return max(abs(k["ncu_dram_bytes_written"] - f["ncu_dram_bytes_written"]
                   - (p["ledger_bytes_written"] - p["ncu_dram_bytes_written"])) / 1e6
               for p, f, k in zip(flushed, flushed[1:], kept[1:]) if f["n"] >= 2**24)


@figure("nb04_corpus_write_gap_max_mb")
def _nb04_corpus_write_gap_max() -> float:
    """The largest gap, either way, between a corpus launch's DRAM writes and its counted writes, in MB."""
    return max(abs(r["ncu_dram_bytes_written"] - r["ledger_bytes_written"])
               for r in committed("ncu_corpus")["launches"]) / 1e6

# --- notebook 05 ---------------------------------------------------------------------------
# (the sweep, results/h200/bench_sweep.json, and the notebook's own printed lines)


def _sweep_row(implementation: str, mode: str, n: int) -> dict:
    return next(m for m in committed("bench_sweep")["measurements"]
                if m["implementation"] == implementation and m["mode"] == mode and m["n"] == n)


def _sweep_us(implementation: str, mode: str, n: int) -> float:
    return 1e3 * _sweep_row(implementation, mode, n)["median_ms"]


for _name, _impl, _mode, _n in [
    ("nb05_fused_loop_2_11_us", "numba fused", "loop", 2**11),
    ("nb05_fused_loop_2_13_us", "numba fused", "loop", 2**13),
    ("nb05_three_loop_2_12_us", "numba three kernels", "loop", 2**12),
    ("nb05_three_loop_2_13_us", "numba three kernels", "loop", 2**13),
    ("nb05_three_loop_2_14_us", "numba three kernels", "loop", 2**14),
    ("nb05_three_gpu_2_10_us", "numba three kernels", "gpu", 2**10),
    ("nb05_fused_gpu_2_10_us", "numba fused", "gpu", 2**10),
    ("nb05_fused_gpu_2_21_us", "numba fused", "gpu", 2**21),
    ("nb05_fused_cold_2_21_us", "numba fused", "gpu_cold", 2**21),
    ("nb05_three_gpu_2_21_us", "numba three kernels", "gpu", 2**21),
    ("nb05_three_cold_2_21_us", "numba three kernels", "gpu_cold", 2**21),
]:
    figure(_name)(lambda impl=_impl, mode=_mode, n=_n: _sweep_us(impl, mode, n))


for _name, _extreme in [("nb05_fused_loop_2_12_min_us", min), ("nb05_fused_loop_2_12_max_us", max)]:
    figure(_name)(lambda extreme=_extreme: 1e3 * extreme(_sweep_row("numba fused", "loop", 2**12)["samples_ms"]))


@figure("nb05_best_over_fused_loop_small")
def _nb05_best_over_fused() -> float:
    """The median, over 2^10..2^20, of the best variant's Python-loop time over the plain fused kernel's."""
    import statistics

    ratios = [_sweep_us("numba fused (best)", "loop", 2**k) / _sweep_us("numba fused", "loop", 2**k)
              for k in range(10, 21)]
    return statistics.median(ratios)


OUTPUTS.update({
    "nb05_rate_fused_gbs": r"fused moves its bytes at ([\d,]+) GB/s",
    "nb05_rate_three_gbs": r"three kernels at ([\d,]+) GB/s: bytes ratio",
    "nb05_loop_2_10": r"Python loop\s+three/fused: (\d+\.\d+)x at 2\^10",
    "nb05_warm_highest": r"L2 warm\s+three/fused:.*highest (\d+\.\d+)x at 2\^21",
    "nb05_loop_lowest": r"Python loop\s+three/fused:.*lowest (\d+\.\d+)x at 2\^12",
    "nb05_loop_highest": r"Python loop\s+three/fused:.*highest (\d+\.\d+)x at 2\^13",
    "nb05_best_pct_best3": r"numba fused \(best\)\s+[\d,]+ GB/s = [\d.]+% of the bound\s+([\d.]+)% of the best 3:1",
    "nb05_compile_pct_best3": r"torch\.compile\s+[\d,]+ GB/s = [\d.]+% of the bound\s+([\d.]+)% of the best 3:1",
    "nb05_fused_pct_best3": r"numba fused\s+[\d,]+ GB/s = [\d.]+% of the bound\s+([\d.]+)% of the best 3:1",
    "nb05_cupy_pct_best3": r"cupy ElementwiseKernel\s+[\d,]+ GB/s = [\d.]+% of the bound\s+([\d.]+)% of the best 3:1",
    "nb05_torch_eager_gbs": r"torch eager\s+([\d,]+) GB/s = ",
    "nb05_copy_gbs": r"device copy\s+([\d,]+) GB/s = ",
    "nb05_fused_2_20_us": r"numba fused\s+([\d.]+) µs",
    "nb05_fused_graph_2_20_us": r"numba fused \+ graph\s+([\d.]+) µs",
    "nb05_best_loop_up_to": r"numba fused \(best\) is slower than numba fused in the Python loop at \S+ \(by up to (\d+\.\d+)x",
    "nb05_best_gpu_up_to": r"numba fused \(best\) is slower than numba fused .*; in GPU time, L2 warm at \S+ \(by up to (\d+\.\d+)x",
    "nb05_add_issue_us": r"numba add, lazy @cuda\.jit\s+([\d.]+) µs",
    "nb05_fused_issue_us": r"numba fused, lazy @cuda\.jit\s+([\d.]+) µs",
    "nb05_cupy_issue_us": r"cupy ElementwiseKernel \(add\)\s+([\d.]+) µs",
    "nb05_torch_issue_us": r"torch\.add\(out=\)\s+([\d.]+) µs",
    "nb05_explicit_add_us": r"explicit signature minus lazy, per launch: add: issue ([+-]\d+\.\d+) µs",
    "nb05_explicit_fused_us": r"explicit signature minus lazy, per launch: .*; fused: issue ([+-]\d+\.\d+) µs",
})


# --- notebook 06 ---------------------------------------------------------------------------
# (the fuser against torch.compile, results/h200/fuser_vs_torch_compile.json, and live timings)


def _fuser_row(n: int) -> dict:
    return next(r for r in committed("fuser_vs_torch_compile")["rows"] if r["n"] == n)


for _name, _who, _what, _n in [
    ("nb06_compile_gpu_2_28_us", "torch.compile", "gpu_ms", 2**28),
    ("nb06_hand_gpu_2_28_us", "hand-written", "gpu_ms", 2**28),
    ("nb06_compile_host_2_20_us", "torch.compile", "host_us", 2**20),
    ("nb06_fuser_host_2_20_us", "fuser", "host_us", 2**20),
    ("nb06_hand_host_2_20_us", "hand-written", "host_us", 2**20),
    ("nb06_compile_host_2_28_us", "torch.compile", "host_us", 2**28),
    ("nb06_hand_host_2_28_us", "hand-written", "host_us", 2**28),
    ("nb06_fuser_host_2_28_us", "fuser", "host_us", 2**28),
    ("nb06_hand_host_iqr_2_28_us", "hand-written", "host_iqr_us", 2**28),
]:
    figure(_name)(lambda who=_who, what=_what, n=_n:
                  _fuser_row(n)["contenders"][who][what] * (1e3 if what == "gpu_ms" else 1.0))


OUTPUTS.update({
    "nb06_hand_fused_speedup": r"hand-fused is (\d+\.\d+)x faster",
    "nb06_sgd_speedup": r"speed-up (\d+\.\d+)x, bytes predict",
    "nb06_sgd_bytes_predict": r"speed-up [\d.]+x, bytes predict (\d+(?:\.\d+)?)x",
})


# --- notebook 07 ---------------------------------------------------------------------------
# (results/h200/roofline.json at 2^28: % of the bound and of the best 3:1 measurement)


def _nb07_pct_best(name: str) -> float:
    row = _roofline_row()
    entry = row["variants"][name] if name in row["variants"] else row[name]
    return 100 * entry["gbs"] / _best_3to1_at(row)


for _kernel in ("naive", "grid_stride", "ilp4"):  # registers of the kernels as timed (the committed run's count)
    figure(f"nb07_{_kernel}_registers")(lambda k=_kernel: float(_roofline_row()["variants"][k]["registers"]))


@figure("nb07_knee_flops_per_byte")
def _nb07_knee_flops_per_byte() -> float:
    """Notebook 02's compute knee in flops per byte: its FMAs per element, 2 flops each, over the 8 bytes each
    element moves (read 4, write 4)."""
    return committed("fma_sweep")["knee_fmas"] * 2 / 8


@figure("nb07_naive_pct_bound")
def _nb07_naive_pct_bound() -> float:
    return 100 * _roofline_row()["variants"]["naive"]["gbs"] / ceiling.bound_gbs()


@figure("nb07_naive_gap_pct_best")
def _nb07_naive_gap() -> float:
    return 100 - _nb07_pct_best("naive")


@figure("nb07_best3_spread_pct")
def _nb07_best3_spread() -> float:
    """The best 3:1 kernel's interquartile range, as a percentage of its median, at 2^28."""
    row = _roofline_row()
    best = max((row[k] for k in ("stream3", "stream3_torch_compile") if row.get(k) and row[k].get("gbs")),
               key=lambda e: e["gbs"])
    return 100 * best["iqr_ms"] / best["median_ms"]


@figure("nb07_scalar_best_pct_best")
def _nb07_scalar_best() -> float:
    return max(_nb07_pct_best(name) for name in ("grid_stride", "ilp4", "streaming"))


@figure("nb07_resident_gap_points")
def _nb07_resident_gap() -> float:
    return _nb07_pct_best("vec4") - _nb07_pct_best("vec4_resident")


for _name, _variant in [("nb07_vec4_pct_best", "vec4"), ("nb07_vec4_resident_pct_best", "vec4_resident"),
                        ("nb07_linked_pct_best", "linked_cuda_c"), ("nb07_compile_pct_best", "torch_compile")]:
    figure(_name)(lambda variant=_variant: _nb07_pct_best(variant))


@figure("nb07_odd_loss_max_pct")
def _nb07_odd_loss() -> float:
    """The largest slowdown, in percent, from a size to that size plus 3 (2^26 and 2^28) among the three kernels
    that lesson 07 says lose there: torch.compile's a + b + c, grid_stride and streaming."""
    runs = committed("roofline")["runs"]
    losses = []
    for n in (2**26, 2**28):
        even, odd = runs[str(n)], runs[str(n + 3)]
        pick = [lambda r: r["stream3_torch_compile"], lambda r: r["variants"]["grid_stride"],
                lambda r: r["variants"]["streaming"]]
        losses += [100 * (get(odd)["median_ms"] / get(even)["median_ms"] - 1) for get in pick]
    return max(losses)


# --- notebook 08 ---------------------------------------------------------------------------
# (the notebook's own run, and the committed results/h200/transfers.json a simulator reads)


def _nb08_committed_prediction(kind: str = "three kernels", copy_bytes: int | None = None) -> tuple[float, float]:
    """Notebook 08's prediction of ``kind`` (the three kernels or fused) on host arrays from the committed sweep's
    pageable rates at its largest copy (or at the size nearest ``copy_bytes``), and the measurement."""
    record = committed("transfers")
    pipeline, sizes = record["pipeline"], record["sizes_bytes"]
    at = -1 if copy_bytes is None else min(range(len(sizes)), key=lambda i: abs(sizes[i] - copy_bytes))
    h2d, d2h = (record["gbs"][f"{way} (pageable)"][at] for way in ("host->device", "device->host"))
    each_way = {"three kernels": 32, "fused": 16}[kind]  # bytes per element each way (the ledgers)
    copies_ms = (each_way * pipeline["n"] / h2d + each_way * pipeline["n"] / d2h) / 1e6
    return (copies_ms + pipeline["median_ms"][f"{kind}, on device"], pipeline["median_ms"][f"{kind}, host arrays"])


for _name, _kind in [("nb08_committed_measured_ms", "three kernels"), ("nb08_committed_fused_measured_ms", "fused")]:
    figure(_name)(lambda kind=_kind: _nb08_committed_prediction(kind)[1])
for _name, _kind in [("nb08_committed_own_size_ms", "three kernels"), ("nb08_committed_fused_own_size_ms", "fused")]:
    figure(_name)(  # each hidden copy moves one array of n float32: the cell's prediction in the simulator
        lambda kind=_kind: _nb08_committed_prediction(kind, 4 * committed("transfers")["pipeline"]["n"])[0])


@figure("nb08_committed_three_over_fused")
def _nb08_committed_three_over_fused() -> float:
    """The committed run's three kernels on host arrays over its fused pipeline on host arrays (measured)."""
    return _nb08_committed_prediction("three kernels")[1] / _nb08_committed_prediction("fused")[1]


for _name, _kind in [("nb08_committed_three_iqr_ms", "three kernels"), ("nb08_committed_fused_iqr_ms", "fused")]:
    figure(_name)(lambda kind=_kind: committed("transfers")["pipeline"]["spread_ms"][f"{kind}, host arrays"])


OUTPUTS.update({
    "nb08_host_slowdown": r"host arrays make the three kernels (\d+)x slower",
    "nb08_pinned_ratio": r"is (\d+)x the pinned host->device",
    "nb08_pageable_ratio": r"is (\d+)x the pageable host->device",
    "nb08_copy_pct_bound": r"the device copy reaches (\d+)% of",
    "nb08_pinned_h2d_gbs": r"host->device \(pinned\)\s+([\d.]+) GB/s",
    "nb08_predicted_ms": r"three kernels on host arrays: predicted\s+(\d+\.\d+) ms",
    "nb08_measured_ms": r"three kernels on host arrays: predicted\s+[\d.]+ ms, measured\s+(\d+\.\d+) ms",
    "nb08_fused_predicted_ms": r"fused\s+on host arrays: predicted\s+(\d+\.\d+) ms",
    "nb08_fused_measured_ms": r"fused\s+on host arrays: predicted\s+[\d.]+ ms, measured\s+(\d+\.\d+) ms",
    "nb08_pageable_h2d_at_copy_gbs": r"pageable rates at [\d,]+ MiB per copy: ([\d.]+) GB/s in",
    "nb08_nvlink_times_fused": r"t1 alone over NVLink 4 \(H200\): [\d.]+ ms, (\d+\.\d+)x",
    "nb08_pcie_times_fused": r"t1 alone over PCIe Gen5 x16: [\d.]+ ms, (\d+\.\d+)x",
})



# --- notebook 09 ---------------------------------------------------------------------------
# (results/h200/launches.json: host time per launch against arguments, and the 2x2 over sizes;
#  a time is the median of its samples, as the notebook's tables print it)


def _launches() -> dict:
    return committed("launches")


def _nb09_median(variant: str, n: int, mode: str) -> float:
    """Median of a variant at size n: ``host`` in µs, ``loop`` and ``gpu`` converted from ms to µs."""
    import statistics  # here, not at the top: keeps this notebook's block whole for the merge

    timed = next(t for t in _launches()["timings"] if t["variant"] == variant and t["n"] == n)
    samples = timed["host_us"] if mode == "host" else [1e3 * x for x in timed[f"{mode}_ms"]]
    return statistics.median(samples)


def _nb09_argument_us(arrays: int, which: str = "lazy") -> float:
    import statistics  # here, not at the top: keeps this notebook's block whole for the merge

    return statistics.median(next(c for c in _launches()["argument_costs"] if c["arrays"] == arrays)[f"{which}_us"])


for _name, _variant, _n, _mode in [
    ("nb09_fused_host_2_10_us", "numba fused", 2**10, "host"),
    ("nb09_fused_loop_2_10_us", "numba fused", 2**10, "loop"),
    ("nb09_three_graph_host_2_10_us", "numba three kernels + graph", 2**10, "host"),
    ("nb09_three_loop_2_10_us", "numba three kernels", 2**10, "loop"),
    ("nb09_three_graph_loop_2_10_us", "numba three kernels + graph", 2**10, "loop"),
    ("nb09_fused_graph_loop_2_10_us", "numba fused + graph", 2**10, "loop"),
    ("nb09_compile_gpu_2_28_us", "torch.compile", 2**28, "gpu"),
    ("nb09_best_graph_gpu_2_28_us", "numba fused (best) + graph", 2**28, "gpu"),
    ("nb09_fused_graph_gpu_2_28_us", "numba fused + graph", 2**28, "gpu"),
    ("nb09_compile_loop_2_28_us", "torch.compile", 2**28, "loop"),
    ("nb09_best_graph_loop_2_28_us", "numba fused (best) + graph", 2**28, "loop"),
]:
    figure(_name)(lambda variant=_variant, n=_n, mode=_mode: _nb09_median(variant, n, mode))

for _arrays in (3, 4):
    figure(f"nb09_args_{_arrays}_lazy_us")(lambda arrays=_arrays: _nb09_argument_us(arrays))


@figure("nb09_three_host_per_launch_us")
def _nb09_three_per_launch() -> float:
    return _nb09_median("numba three kernels", 2**10, "host") / 3


@figure("nb09_args_3_over_direct")
def _nb09_args_3_over_direct() -> float:
    """Section 3's 3-array launch against one of section 4's three direct launches (3, 3 and 2 arrays)."""
    return _nb09_argument_us(3) / _nb09_three_per_launch()


# Notebook 05's measurements (results/h200/launch_overhead.json, bursts of 300).
for _name, _launcher in [("nb09_nb05_add_issue_us", "numba add, lazy @cuda.jit"),
                         ("nb09_nb05_fused_issue_us", "numba fused, lazy @cuda.jit")]:
    figure(_name)(lambda launcher=_launcher: committed("launch_overhead")["launchers"][launcher]["issue_us"])


for _name, (_a, _b), _n in [  # ratios of two Numba variants' Python-loop medians at one size
    ("nb09_graph_gain_three_2_10", ("numba three kernels", "numba three kernels + graph"), 2**10),
    ("nb09_three_over_fused_2_10", ("numba three kernels", "numba fused"), 2**10),
    ("nb09_graph_over_direct_three_2_28", ("numba three kernels + graph", "numba three kernels"), 2**28),
    ("nb09_fusion_over_graph_2_28_loop", ("numba three kernels + graph", "numba fused"), 2**28),
]:
    figure(_name)(lambda a=_a, b=_b, n=_n: _nb09_median(a, n, "loop") / _nb09_median(b, n, "loop"))


@figure("nb09_compile_host_share_2_28_us")
def _nb09_compile_host_share() -> float:
    """What a Python loop sees of torch.compile at 2^28 beyond its GPU time (µs)."""
    return _nb09_median("torch.compile", 2**28, "loop") - _nb09_median("torch.compile", 2**28, "gpu")


def _nb09_best_gain_pct(sizes: range) -> list[float]:
    """How much faster the best fused variant's graph is than the plain fused graph, % (Python-loop view)."""
    return [100 * (_nb09_median("numba fused + graph", 2**k, "loop")
                   / _nb09_median("numba fused (best) + graph", 2**k, "loop") - 1) for k in sizes]


for _name, _extreme, _sizes in [("nb09_best_gain_small_max_pct", max, range(10, 21, 2)),
                                ("nb09_best_gain_large_min_pct", min, range(22, 29, 2)),
                                ("nb09_best_gain_large_max_pct", max, range(22, 29, 2))]:
    figure(_name)(lambda extreme=_extreme, sizes=_sizes: extreme(_nb09_best_gain_pct(sizes)))


OUTPUTS.update({
    "nb09_lazy_base_us": r"lazy @cuda\.jit: ([\d.]+) µs \+",
    "nb09_lazy_slope_us": r"lazy @cuda\.jit: [\d.]+ µs \+ ([\d.]+) µs per array",
    "nb09_explicit_slope_us": r"explicit signature: [\d.]+ µs \+ ([\d.]+) µs per array",
    "nb09_graph_base_us": r"graph replay: ([\d.]+) µs \+",
    "nb09_explicit_saves_at_most_us": r"explicit signature saves at most ([\d.]+) µs",
    "nb09_ro_gpu_ratio": r"reduce-overhead: ([\d.]+)x the default mode's GPU time",
    "nb09_ro_static_gpu_ratio": r"static inputs: ([\d.]+)x the default mode's GPU time",
    "nb09_copies_predict": r"before the kernel's 16 B predicts ([\d.]+)x",
    "nb09_graph_three_gpu_2_28": r"a graph leaves the three kernels' GPU time within 5% at 2\^28: \w+, ([\d.]+)x",
    "nb09_fusion_gpu_2_28": r"faster than the three-kernel graph at 2\^28 \(the bytes ratio\): \w+, ([\d.]+)x",
})


def _nb09_host_range(variant: str, extreme: Callable) -> float:
    """The least or most host time per call (µs) of a variant over the sweep's sizes, 2^10 to 2^28."""
    return extreme(_nb09_median(variant, 2**k, "host") for k in range(10, 29, 2))


for _name, _variant, _extreme in [
    ("nb09_compile_host_min_us", "torch.compile", min),
    ("nb09_compile_host_max_us", "torch.compile", max),
    ("nb09_ro_host_min_us", "torch.compile reduce-overhead", min),
    ("nb09_ro_host_max_us", "torch.compile reduce-overhead", max),
    ("nb09_ro_static_host_min_us", "torch.compile reduce-overhead, static inputs", min),
    ("nb09_ro_static_host_max_us", "torch.compile reduce-overhead, static inputs", max),
]:
    figure(_name)(lambda variant=_variant, extreme=_extreme: _nb09_host_range(variant, extreme))


# --- notebook 14 ---------------------------------------------------------------------------
# (results/h200/reductions_adamw.json: one tensor of 2^26 and a list of 200 tensors)


def _nb14_row(case: str) -> dict:
    return next(r for r in committed("reductions_adamw")["rows"] if r["case"] == case)


def _nb14_ms(case: str, name: str) -> float:
    return next(m for m in _nb14_row(case)["measured"] if m["name"] == name)["median_ms"]


_NB12_FUSED, _NB12_UNFUSED = "numba fused (one launch per tensor)", "numba unfused (8 launches per tensor)"
_NB12_FLAT, _NB12_TORCH_FUSED = "numba fused, one launch over a flat buffer", "torch AdamW fused=True"

for _name, _case, _impl in [
    ("nb14_fused_one_ms", "one tensor", _NB12_FUSED),
    ("nb14_torch_fused_one_ms", "one tensor", _NB12_TORCH_FUSED),
    ("nb14_flat_list_ms", "list", _NB12_FLAT),
    ("nb14_torch_fused_list_ms", "list", _NB12_TORCH_FUSED),
    ("nb14_per_tensor_list_ms", "list", _NB12_FUSED),
]:
    figure(_name)(lambda case=_case, impl=_impl: _nb14_ms(case, impl))

for _name, (_case, _a), (_case_b, _b) in [
    ("nb14_unfused_over_fused_one", ("one tensor", _NB12_UNFUSED), ("one tensor", _NB12_FUSED)),
    ("nb14_unfused_over_foreach_false_one", ("one tensor", _NB12_UNFUSED), ("one tensor", "torch AdamW foreach=False")),
    ("nb14_foreach_true_over_false_one", ("one tensor", "torch AdamW foreach=True"), ("one tensor", "torch AdamW foreach=False")),
    ("nb14_flat_over_torch_fused_list", ("list", _NB12_FLAT), ("list", _NB12_TORCH_FUSED)),
    ("nb14_per_tensor_over_flat_list", ("list", _NB12_FUSED), ("list", _NB12_FLAT)),
]:
    figure(_name)(lambda ca=_case, a=_a, cb=_case_b, b=_b: _nb14_ms(ca, a) / _nb14_ms(cb, b))


@figure("nb14_unfused_list_per_launch_us")
def _nb14_unfused_per_launch() -> float:
    """The unfused step on the list: 8 launches a tensor, its time per launch on average (µs)."""
    return 1e3 * _nb14_ms("list", _NB12_UNFUSED) / (8 * _nb14_row("list")["tensors"])


@figure("nb14_extra_launch_over_nb09")
def _nb14_extra_launch_over_nb09() -> float:
    """Each launch on the list beyond the bytes (as the notebook prints it) against notebook 09's fused launch."""
    extra_us = optimizer_report.launch_cost_us(_nb14_ms("list", _NB12_FUSED), _nb14_ms("list", _NB12_FLAT),
                                              _nb14_row("list")["tensors"])
    return extra_us / _nb09_median("numba fused", 2**10, "host")


@figure("nb14_nb09_three_host_us")
def _nb14_nb09_three_host() -> float:
    return _nb09_median("numba three kernels", 2**10, "host")


@figure("nb14_foreach_false_80b_gbs")
def _nb14_foreach_false_80b_gbs() -> float:
    """torch's foreach=False on one tensor of 2^26, its rate counted at the 80 bytes per element its 8 launches move."""
    return 80 * 2**26 / _nb14_ms("one tensor", "torch AdamW foreach=False") / 1e6


OUTPUTS.update({
    "nb14_unfused_bytes": r"unfused: 8 launches, 16 trips, (\d+) bytes per element",
    "nb14_fused_bytes": r"fused: 1 launch, 2 trips, (\d+) bytes per element",
    "nb14_bytes_ratio": r"the eight kernels move ([\d.]+)x the bytes",
    "nb14_fused_over_torch_one": r"fused=True on one tensor of 2\^26: \w+, ([\d.]+)x its time",
    "nb14_extra_launch_us": r"each launch costs about ([\d.]+) µs",
    "nb14_fused_one_gbs": r"one tensor\s+numba fused \(one launch per tensor\)\s+[\d.]+ ms\s+(\d+)",
    "nb14_average_tensor_us": r"an average tensor's [\d.]+ MB take ([\d.]+) µs",
})


# --- notebook 10 ---------------------------------------------------------------------------
# (results/h200/bytes_in_flight.json, read through the lesson's own model, and the notebook's printed tables)


def _nb10_record():  # noqa: ANN202
    # imported here, not at the top: this block is the only user of the lesson's model
    from helpers.lessons.inflight import model
    from helpers.lessons.inflight.record import BytesInFlight
    from helpers.results import load

    return model, load(BytesInFlight)


def _nb10_same_shape_errors() -> dict[str, float]:
    """Each kernel's miss (%) when the curve's median is replaced by the probe of the kernel's own shape.

    The probe of the same mix, width and bytes in flight with one access per thread and
    8 blocks per SM (``same_in_flight_probe``), times the model's second step (its
    arithmetic share); kernels without such a probe keep the model's own prediction.
    """
    inflight, record = _nb10_record()
    errors = {}
    for k in record.kernels:
        predicted, curve = record.predicted_gbs(k), record.predicted_gbs(k, arithmetic=False)
        probe = inflight_report.same_in_flight_probe(record, k)
        if probe and k.groups_in_flight == 1:
            predicted = probe * predicted / curve
        errors[k.name] = inflight.percent_off(predicted, k.gbs)
    return errors


for _name, _kernel in [("nb10_same_shape_copy_pct", "copy"), ("nb10_same_shape_scale_pct", "scale")]:
    figure(_name)(lambda name=_kernel: _nb10_same_shape_errors()[name])


@figure("nb10_same_shape_hits")
def _nb10_same_shape_hits() -> float:
    return float(sum(abs(e) <= 10 for e in _nb10_same_shape_errors().values()))


def _nb10_probe_groups() -> list[list[tuple[int, float]]]:
    """Resident probes of one mix, width and bytes in flight: (blocks per SM, GB/s) for each configuration."""
    groups: dict[tuple[int, int, int], list[tuple[int, float]]] = {}
    for p in committed("bytes_in_flight")["probes"]:
        if p["grid"] == "resident" and p["gbs"] and p["bitwise_equal"]:
            groups.setdefault((p["reads"], p["width_bytes"], p["bytes_in_flight_per_sm"]), []).append(
                (p["blocks_per_sm"], p["gbs"]))
    return [g for g in groups.values() if len(g) > 1]


@figure("nb10_equal_inflight_spread_pct")
def _nb10_equal_inflight_spread() -> float:
    """The largest spread (fastest over slowest, %) among probes of equal mix, width and bytes in flight."""
    return max(100 * (max(g for _, g in group) / min(g for _, g in group) - 1) for group in _nb10_probe_groups())


def _nb10_full_grid_probe(reads: int, width: int) -> float:
    return next(p["gbs"] for p in committed("bytes_in_flight")["probes"]
                if p["grid"] == "full" and p["reads"] == reads and p["width_bytes"] == width)


def _nb10_kernel_gbs(name: str) -> float:
    return next(k["gbs"] for k in committed("bytes_in_flight")["kernels"] if k["name"] == name)


for _reads, _kernel in ((1, "copy"), (2, "add"), (3, "naive")):
    figure(f"nb10_full_probe_{_reads}to1_gbs")(lambda reads=_reads: _nb10_full_grid_probe(reads, 4))


def _nb10_full_probe_shortfalls() -> list[float]:
    """How far (%) each 4-byte full-grid probe falls below the series kernel of its mix, grid and bytes in flight."""
    return [100 * (1 - _nb10_full_grid_probe(r, 4) / _nb10_kernel_gbs(k)) for r, k in ((1, "copy"), (2, "add"), (3, "naive"))]


for _name, _extreme in [("nb10_full_probe_short_min_pct", min), ("nb10_full_probe_short_max_pct", max)]:
    figure(_name)(lambda extreme=_extreme: extreme(_nb10_full_probe_shortfalls()))


@figure("nb10_full_probes")
def _nb10_full_probes() -> float:
    return float(sum(p["grid"] == "full" for p in committed("bytes_in_flight")["probes"]))


OUTPUTS.update({
    "nb10_l2_ns": r"4 MiB\s+page_local\s+(\d+)",
    "nb10_dram_ns": r"DRAM latency \(page-local, largest buffer\): (\d+) ns",
    "nb10_dram_random_ns": r"1 GiB\s+random\s+(\d+)",
    "nb10_need_kib": r"to reach the datasheet bound \(at 3 reads : 1 write\), [\d,]+ GB/s, each of the \d+ SMs needs (\d+) KiB",
    "nb10_div_over_add": r"one division takes ([\d.]+)x the time of one addition",
    "nb10_model_hits": r"the model predicts (\d+) of \d+ kernels within",
    "nb10_division_measured": r"without it scale_kernel runs ([\d.]+)x as fast",
    "nb10_division_model": r"the model's second step predicts ([\d.]+)x",
    "nb10_fusion_4_byte": r"fused against three kernels,  4-byte: ([\d.]+)x = ",
    "nb10_fusion_16_byte": r"fused against three kernels, 16-byte: ([\d.]+)x = ",
    "nb10_rate_4_byte": r" 4-byte: [\d.]+x = [\d.]+x fewer bytes \(fusion\) x ([\d.]+)x more GB/s",
    "nb10_model_4_byte": r"\(each launch's bytes over its predicted GB/s\),  4-byte: fused ([\d.]+)x",
    "nb10_model_16_byte": r"\(each launch's bytes over its predicted GB/s\), 16-byte: fused ([\d.]+)x",
    "nb10_eager_vs_compile": r"committed sweep at 2\^28: ([\d.]+)x",
})

for _kernel in ("scale", "vec4"):
    figure(f"nb10_{_kernel}_gbs")(lambda name=_kernel: _nb10_kernel_gbs(name))


@figure("nb10_past_2to1_line_pct")
def _nb10_past_2to1_line() -> float:
    """How far the fastest 2:1 series kernel passes the best 2:1 measurement (%)."""
    line = max(p["gbs"] for p in committed("bytes_in_flight")["probes"] if p["reads"] == 2 and p["gbs"])
    return 100 * (max(_nb10_kernel_gbs(k) for k in ("add_vec4", "multiply_vec4")) / line - 1)


# --- notebook 11 ---------------------------------------------------------------------------
# (results/h200/reductions_softmax.json, reductions_attention.json and reductions_attention_ncu.json;
#  the notebook's printed tables and claims)


def _nb11_softmax_ms(rows: int, cols: int, name: str | None = None, prefix: str | None = None) -> list[float]:
    row = next(r for r in committed("reductions_softmax")["rows"] if (r["rows"], r["cols"]) == (rows, cols))
    return [m["median_ms"] for m in row["measured"] if m["median_ms"]
            and (m["name"] == name if name else m["name"].startswith(prefix))]


NB11_SHAPES = ((16384, 4096), (4096, 4096), (4096, 1024))


def _nb11_vector_ms(rows: int, cols: int) -> float:
    """The fastest 16-byte kernel's time at one shape."""
    return min(_nb11_softmax_ms(rows, cols, prefix="numba 16-byte"))


def _nb11_pct_copy(rows: int, cols: int, ms: float) -> float:
    """A time at one shape as a share (%) of the device copy's rate, 8 bytes per element counted."""
    return 100 * rows * cols * 8 / ms / 1e6 / committed("reductions_softmax")["copy_ceiling_gbs"]


figure("nb11_vector_ms_16384x4096")(lambda: _nb11_vector_ms(16384, 4096))
for _rows, _cols in NB11_SHAPES[:2]:
    figure(f"nb11_vector_pct_copy_{_rows}x{_cols}")(lambda r=_rows, c=_cols: _nb11_pct_copy(r, c, _nb11_vector_ms(r, c)))
figure("nb11_best_pct_copy_4096x1024")(lambda: _nb11_pct_copy(4096, 1024, min(_nb11_softmax_ms(4096, 1024, prefix=""))))


def _nb11_vector_over_torch() -> list[float]:
    """torch.softmax's time over the fastest 16-byte kernel's, at each shape."""
    return [_nb11_softmax_ms(r, c, "torch.softmax")[0] / _nb11_vector_ms(r, c) for r, c in NB11_SHAPES]


figure("nb11_vector_over_torch_min")(lambda: min(_nb11_vector_over_torch()))
figure("nb11_vector_over_torch_max")(lambda: max(_nb11_vector_over_torch()))

figure("nb11_pipelined_min_ms_16384")(lambda: min(_nb11_softmax_ms(16384, 4096, prefix="numba fused pipelined")))
figure("nb11_pipelined_max_ms_16384")(lambda: max(_nb11_softmax_ms(16384, 4096, prefix="numba fused pipelined")))
figure("nb11_fused128_ms_16384")(lambda: _nb11_softmax_ms(16384, 4096, "numba fused, 128 threads/row")[0])


@figure("nb11_copy_gbs")
def _nb11_copy_gbs() -> float:
    return committed("reductions_softmax")["copy_ceiling_gbs"]


def _nb11_unfused_bytes_per_element(cols: int) -> float:
    """x read twice, e written once and read twice, out written once; a max and a sum per row written and read."""
    return 24 + 16 / cols


@figure("nb11_bytes_ratio_4096_cols")
def _nb11_bytes_ratio() -> float:
    return _nb11_unfused_bytes_per_element(4096) / 8


@figure("nb11_unfused_real_gbs")
def _nb11_unfused_real_gbs() -> float:
    """The four kernels' own traffic per second at 16384 x 4096 (not the 8 bytes per element the table counts)."""
    return 16384 * 4096 * _nb11_unfused_bytes_per_element(4096) / _nb11_softmax_ms(16384, 4096, "numba unfused (4 kernels)")[0] / 1e6


def _nb11_in_flight() -> dict[str, float]:
    """KiB of loads in flight per SM, by kernel name."""
    # imported here, not at the top: this block is the only user of the lesson's own count
    from helpers import results
    from helpers.lessons.softmax import report
    from helpers.lessons.softmax.record import SoftmaxBench

    return {f.name: f.kib_per_sm for f in report.bytes_in_flight(results.load(SoftmaxBench))}


for _name, _kernel in (("64", "numba fused, 64 threads/row"), ("128", "numba fused, 128 threads/row"),
                       ("256", "numba fused, 256 threads/row"), ("online", "numba online, 256 threads/row"),
                       ("pipelined", "numba fused pipelined, 128 threads, 2 rows/block")):
    figure(f"nb11_in_flight_kib_{_name}")(lambda k=_kernel: _nb11_in_flight()[k])


def _nb11_vector_in_flight() -> list[tuple[float, float]]:
    """(ms, KiB in flight per SM) of every 16-byte shape at 16384 x 4096."""
    in_flight = _nb11_in_flight()
    row = next(r for r in committed("reductions_softmax")["rows"] if (r["rows"], r["cols"]) == (16384, 4096))
    return [(m["median_ms"], in_flight[m["name"]]) for m in row["measured"]
            if m["median_ms"] and m["name"].startswith("numba 16-byte")]


figure("nb11_in_flight_kib_vector_least")(lambda: min(kib for _, kib in _nb11_vector_in_flight()))
figure("nb11_in_flight_kib_vector_most")(lambda: max(kib for _, kib in _nb11_vector_in_flight()))
figure("nb11_vector_slowest_ms_16384x4096")(lambda: max(_nb11_softmax_ms(16384, 4096, prefix="numba 16-byte")))
figure("nb11_in_flight_kib_pipelined64")(lambda: _nb11_in_flight()["numba fused pipelined, 64 threads, 4 rows/block"])
figure("nb11_fused64_ms_16384")(lambda: _nb11_softmax_ms(16384, 4096, "numba fused, 64 threads/row")[0])
figure("nb11_same_size_copy_gbs_4096x1024")(  # the committed sweep's device copy of 4096 x 1024 floats, L2 flushed
    lambda: 8 * 4096 * 1024 / _sweep_row("device copy", "gpu_cold", 4096 * 1024)["median_ms"] / 1e6)
figure("nb11_same_size_copy_gbs_4096x4096")(  # the committed sweep's device copy of 4096 x 4096 floats, L2 flushed
    lambda: 8 * 4096 * 4096 / _sweep_row("device copy", "gpu_cold", 4096 * 4096)["median_ms"] / 1e6)


def _nb11_attention_ms(length: int, name: str) -> float:
    row = next(r for r in committed("reductions_attention")["rows"] if r["length"] == length)
    return next(m["median_ms"] for m in row["measured"] if m["name"] == name)


figure("nb12_unfused_ms")(lambda: _nb11_attention_ms(4096, "numba unfused (S, P in memory)"))


@figure("nb12_causal_tile_ideal_1024")
def _nb12_causal_tile_ideal() -> float:
    """Tiles a causal kernel of 64-row blocks and 64-key tiles computes at L = 1024, against the full kernel's."""
    blocks = 1024 // 64
    return blocks * blocks / (blocks * (blocks + 1) / 2)


for _length in (4096, 1024):
    figure(f"nb12_causal_speedup_{_length}")(
        lambda n=_length: _nb11_attention_ms(n, "numba fused q64/k64/b4/s2") / _nb11_attention_ms(n, "numba fused causal"))


@figure("nb12_fused_over_flop_floor")
def _nb11_fused_over_floor() -> float:
    row = next(r for r in committed("reductions_attention")["rows"] if r["length"] == 4096)
    floor_ms = row["flops"] / committed("reductions_attention")["peak_fp32_flops"] * 1e3
    return _nb11_attention_ms(4096, "numba fused q128/k64/b4/s2") / floor_ms


def _nb11_ncu() -> dict:
    return committed("reductions_attention_ncu")


def _nb11_ncu_fused(field: str) -> float:
    return next(k[field] for k in _nb11_ncu()["kernels"] if k["kernel"] == "flash_attention_kernel")


def _nb11_ncu_tensor_bytes() -> float:
    """One of Q, K, V or O for the profiled shape: heads x L x d float32 (d = 64)."""
    return _nb11_ncu()["heads"] * _nb11_ncu()["length"] * 64 * 4


@figure("nb12_ncu_fused_write_mb")
def _nb11_ncu_write() -> float:
    return _nb11_ncu_fused("dram_write") / 1e6


@figure("nb12_ncu_output_mb")
def _nb11_ncu_output() -> float:
    return _nb11_ncu_tensor_bytes() / 1e6


@figure("nb12_ncu_fused_read_mb")
def _nb11_ncu_read() -> float:
    return _nb11_ncu_fused("dram_read") / 1e6


@figure("nb12_ncu_qkv_mb")
def _nb11_ncu_qkv() -> float:
    return 3 * _nb11_ncu_tensor_bytes() / 1e6


@figure("nb12_ncu_ratio_output_counted")
def _nb11_ncu_ratio_output() -> float:
    """The DRAM-bytes ratio with the fused kernel's whole output counted as written."""
    return _nb11_ncu()["unfused_dram_bytes"] / (_nb11_ncu_fused("dram_read") + _nb11_ncu_tensor_bytes())


@figure("nb12_causal_tile_ideal_4096")
def _nb12_causal_tile_ideal_4096() -> float:
    """Tiles a causal kernel of 64-row blocks and 64-key tiles computes at L = 4096, against the full kernel's."""
    blocks = 4096 // 64
    return blocks * blocks / (blocks * (blocks + 1) / 2)


OUTPUTS.update({
    "nb11_fused_over_torch_big": r"torch\.softmax at 16384 x 4096: yes, ([\d.]+)x its throughput",
    "nb11_fused_over_torch_small": r"torch\.softmax at 4096 x 1024: no, ([\d.]+)x its throughput",
    "nb11_fused_over_unfused_big": r"four Numba kernels at 16384 x 4096: yes, ([\d.]+)x",
    "nb11_pipelined_registers": r"numba fused pipelined, 128 threads, 2 rows/block\s+(\d+) registers",
    "nb11_pipelined_blocks": r"numba fused pipelined, 128 threads, 2 rows/block\s+\d+ registers,\s+(\d+) blocks/SM",
    "nb12_ledger_ratio": r"the ledger's ratio: ([\d.]+)x",
    "nb12_fused_over_unfused_attention": r"unfused Numba pipeline at L = 4096: yes, ([\d.]+)x",
    "nb12_fused_over_naive_4096": r"naive torch fp32 at L = 4096: no, ([\d.]+)x",
    "nb12_fused_over_naive_1024": r"naive torch fp32 at L = 1024: no, ([\d.]+)x",
    "nb12_ncu_ratio": r"\(ncu\): yes, (\d+)x",
    "nb12_flop_floor_ms": r"takes at least ([\d.]+) ms",
    "nb12_byte_floor_ms": r"GB/s takes ([\d.]+) ms",
})


# --- notebook 10: the figures its probe tables used to print (the record keeps them; the report computes them) ---


def _nb10_loaded(reads: int, width: int, kib: int) -> tuple[float, float]:
    """One curve at ``kib`` KiB per SM: its GB/s and the latency (ns) Little's law implies for it."""
    _, record = _nb10_record()
    return next((gbs, latency) for q, gbs, latency in inflight_report.loaded_latencies(record, reads, width)
                if q == kib * 1024)


for _name, (_reads, _width, _kib, _which) in {
    "nb10_latency_1kib_ns": (1, 4, 1, 1), "nb10_latency_192kib_ns": (3, 16, 192, 1),
    "nb10_1to1_24kib_gbs": (1, 4, 24, 0), "nb10_1to1_32kib_gbs": (1, 4, 32, 0),
}.items():
    figure(_name)(lambda r=_reads, w=_width, q=_kib, i=_which: _nb10_loaded(r, w, q)[i])


def _nb10_prediction_off(name: str) -> float:
    """How far (%) the model's prediction for one series kernel lands from its measurement (+: too fast)."""
    inflight, record = _nb10_record()
    k = record.kernel(name)
    return inflight.percent_off(record.predicted_gbs(k), k.gbs)


figure("nb10_error_scale_pct")(lambda: _nb10_prediction_off("scale"))
figure("nb10_error_scale_vec4_pct")(lambda: -_nb10_prediction_off("scale_vec4"))  # quoted as "too slow"


def _nb10_against_probe(name: str) -> float:
    """How far (%) a series kernel lands from the resident probe of its mix, width and bytes in flight (+: faster)."""
    _, record = _nb10_record()
    k = record.kernel(name)
    return 100 * (k.gbs / inflight_report.same_in_flight_probe(record, k) - 1)


for _kernel in ("copy", "scale", "naive", "grid_stride", "streaming", "vec4_resident"):  # quoted as shortfalls
    figure(f"nb10_{'over' if _kernel == 'vec4_resident' else 'short'}_{_kernel}_pct")(
        lambda name=_kernel: -_nb10_against_probe(name))
figure("nb10_over_vec4_pct")(lambda: _nb10_against_probe("vec4"))


# --- notebook 13 ---------------------------------------------------------------------------


def _nb13_best(prefix: str, length: int = 4096) -> dict:
    """The fastest timed entry of the attention record at ``length`` whose name starts with ``prefix``, not causal."""
    row = next(r for r in committed("reductions_attention")["rows"] if r["length"] == length)
    timed = [m for m in row["measured"] if m["name"].startswith(prefix) and "causal" not in m["name"] and m["median_ms"]]
    return min(timed, key=lambda m: m["median_ms"])


def _nb13_flops(length: int = 4096, causal: bool = False) -> float:
    from helpers.lessons.attention.kernels import attention_flops  # the flops the lesson's TFLOP/s count
    row = next(r for r in committed("reductions_attention")["rows"] if r["length"] == length)
    return float(attention_flops(row["batch"] * row["heads"], length, row["head_dim"], causal))


_NB13 = {"onerow": "numba fused q", "tiled": "numba tiled q", "naive": "torch naive fp32", "tf32": "numba TF32 tensor cores w",
         "naive_tf32": "torch naive TF32", "three": "numba 3xTF32 tensor cores w", "efficient": "torch SDPA efficient fp32",
         "bf16": "numba bf16 tensor cores", "flash": "torch SDPA flash bf16", "unfused": "numba unfused (S",
         "unfused_tf32": "numba unfused TF32", "tile_sums": "numba 3xTF32 tile sums w"}
for _key in ("onerow", "tiled", "naive", "tf32", "naive_tf32", "three", "bf16", "flash", "tile_sums", "efficient"):
    figure(f"nb13_{_key}_ms")(lambda p=_NB13[_key]: _nb13_best(p)["median_ms"])
for _key in ("tiled", "tf32", "flash"):
    figure(f"nb13_{_key}_tflops")(lambda p=_NB13[_key]: _nb13_flops() / _nb13_best(p)["median_ms"] / 1e9)
for _key in ("three", "efficient", "tile_sums"):
    figure(f"nb13_{_key}_error")(lambda p=_NB13[_key]: _nb13_best(p)["max_rel_err"])
figure("nb13_three_error_1024")(lambda: _nb13_best(_NB13["three"], 1024)["max_rel_err"])
figure("nb13_tiled_pct_peak")(lambda: 100 * _nb13_flops() / _nb13_best(_NB13["tiled"])["median_ms"] / 1e-3
                              / committed("reductions_attention")["peak_fp32_flops"])
figure("nb13_tiled_pct_sgemm")(lambda: 100 * _nb13_flops() / _nb13_best(_NB13["tiled"])["median_ms"] / 1e-3
                               / committed("reductions_attention")["sgemm_fp32_flops"])
for _key, _over, _under in (("tiled_over_naive", "naive", "tiled"), ("tf32_over_naive_tf32", "naive_tf32", "tf32"),
                            ("three_over_efficient", "efficient", "three"), ("flash_over_bf16", "bf16", "flash"),
                            ("fp32_fusion", "unfused", "tiled"), ("tf32_fusion", "unfused_tf32", "tf32")):
    figure(f"nb13_{_key}")(lambda o=_NB13[_over], u=_NB13[_under]: _nb13_best(o)["median_ms"] / _nb13_best(u)["median_ms"])


figure("nb13_tiled_causal_ms")(lambda: _nb11_attention_ms(4096, "numba tiled causal"))
figure("nb13_tiled_causal_speedup")(lambda: _nb13_best(_NB13["tiled"])["median_ms"]
                                    / _nb11_attention_ms(4096, "numba tiled causal"))
figure("nb13_tiled_causal_tflops")(lambda: _nb13_flops(causal=True) / _nb11_attention_ms(4096, "numba tiled causal") / 1e9)


def _nb13_sp_bytes() -> float:
    """S and P, each written once and read once: 4 passes of 4 bytes per score, at the record's B, H and L = 4096."""
    row = next(r for r in committed("reductions_attention")["rows"] if r["length"] == 4096)
    return 4 * 4 * row["batch"] * row["heads"] * 4096 ** 2


def _nb13_sp_floor_ms() -> float:
    """The time S and P's float32 bytes take at the device copy's rate."""
    return _nb13_sp_bytes() / _nb11_copy_gbs() / 1e6


figure("nb13_sp_floor_bf16_ms")(lambda: _nb13_sp_floor_ms() / 2)  # bf16: half the bytes
figure("nb13_tf32_w4k64_ms")(lambda: _nb11_attention_ms(4096, "numba TF32 tensor cores w4/k64"))
figure("nb13_sp_gb")(lambda: _nb13_sp_bytes() / 1e9)
figure("nb13_copy_gbs")(_nb11_copy_gbs)
figure("nb13_sp_floor_ms")(_nb13_sp_floor_ms)
for _key in ("naive", "naive_tf32"):
    figure(f"nb13_sp_share_{_key}")(lambda p=_NB13[_key]: 100 * _nb13_sp_floor_ms() / _nb13_best(p)["median_ms"])
for _key, _unfused, _fused in (("fp32", "numba unfused fp32", "numba tiled fp32"),
                               ("tf32", "numba unfused TF32", "numba TF32 tensor cores")):
    figure(f"nb13_dram_ratio_{_key}")(lambda u=_unfused, f=_fused: committed("reductions_attention_ncu")["pipelines"][u]
                                      / committed("reductions_attention_ncu")["pipelines"][f])


def _nb13_long(name: str) -> dict:
    return next(m for m in committed("reductions_attention_long")["measured"] if m["name"] == name)


figure("nb13_long_memory_gib")(lambda: committed("reductions_attention_long")["device_memory_bytes"] / 2**30)
figure("nb13_long_sp_gb")(lambda: committed("reductions_attention_long")["unfused_scratch_bytes"] / 1e9)
figure("nb13_long_memory_gb")(lambda: committed("reductions_attention_long")["device_memory_bytes"] / 1e9)
figure("nb13_long_tiled_ms")(lambda: _nb13_long("numba tiled")["median_ms"])
figure("nb13_long_tf32_ms")(lambda: _nb13_long("numba TF32 tensor cores")["median_ms"])
figure("nb13_long_three_error")(lambda: float(_nb13_long("numba 3xTF32 tensor cores")["note"].rsplit(" ", 1)[1]))
figure("nb13_tile_sums_error_1024")(lambda: _nb13_best(_NB13["tile_sums"], 1024)["max_rel_err"])


# --- notebook 11: the figures of the rows its short tables leave out (the plots show them) ---------------

figure("nb11_fused128_gbs_big")(lambda: 16384 * 4096 * 8 / _nb11_softmax_ms(16384, 4096, "numba fused, 128 threads/row")[0] / 1e6)
figure("nb11_fused256_ms_16384")(lambda: _nb11_softmax_ms(16384, 4096, "numba fused, 256 threads/row")[0])
figure("nb11_online_ms_big")(lambda: _nb11_softmax_ms(16384, 4096, "numba online, 256 threads/row")[0])
for _name, _impl in (("fused", "numba fused q128/k64/b4/s2"), ("naive", "torch naive fp32 (TF32 off)"),
                     ("sdpa", "torch SDPA efficient fp32")):
    figure(f"nb12_attention_{_name}_ms")(lambda impl=_impl: _nb11_attention_ms(4096, impl))


def _nb11_attention_tflops(name: str, length: int = 4096) -> float:
    row = next(r for r in committed("reductions_attention")["rows"] if r["length"] == length)
    return row["flops"] / _nb11_attention_ms(length, name) / 1e9


figure("nb12_attention_bf16_tflops")(lambda: _nb11_attention_tflops("torch SDPA flash bf16"))
figure("nb12_fused_pct_peak")(lambda: 100 * 1e12 * _nb11_attention_tflops("numba fused q128/k64/b4/s2")
                              / committed("reductions_attention")["peak_fp32_flops"])


if __name__ == "__main__":
    raise SystemExit(main())
