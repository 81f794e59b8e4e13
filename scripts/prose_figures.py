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


@figure("best_3to1_gbs")
def _best_3to1() -> float:
    return ceiling.best_measured("3:1").gbs


@figure("best_3to1_pct_bound")
def _best_3to1_pct() -> float:
    return 100 * ceiling.best_measured("3:1").gbs / ceiling.bound_gbs()


@figure("best_1to1_gbs")
def _best_1to1() -> float:
    return ceiling.best_measured("1:1").gbs


@figure("best_1to1_pct_bound")
def _best_1to1_pct() -> float:
    return 100 * ceiling.best_measured("1:1").gbs / ceiling.bound_gbs()


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


@figure("speedup_loop_2_28")
def _speedup_loop() -> float:
    return _sweep_speedup("loop")


@figure("speedup_cold_2_28")
def _speedup_cold() -> float:
    return _sweep_speedup("gpu_cold")



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


@figure("seed_fma_max")
def _seed_fma_max() -> float:
    return max(_seed_kernels("fma_pipe_pct"))


@figure("seed_issue_max")
def _seed_issue_max() -> float:
    return max(_seed_kernels("issue_active_pct"))


@figure("seed_dram_busy_min")
def _seed_dram_min() -> float:
    return min(_seed_kernels("dram_throughput_pct"))


@figure("seed_dram_busy_max")
def _seed_dram_max() -> float:
    return max(_seed_kernels("dram_throughput_pct"))


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


@figure("nb02_add_over_floor")
def _nb02_add_over_floor() -> float:
    return _inflight_floor_ratio("add")


@figure("nb02_scale_over_floor")
def _nb02_scale_over_floor() -> float:
    return _inflight_floor_ratio("scale")


@figure("nb02_copy_kernel_over_floor")
def _nb02_copy_over_floor() -> float:
    return _inflight_floor_ratio("copy")


@figure("nb02_add_pct_bound")
def _nb02_add_pct() -> float:
    return 100 * _inflight_kernel("add")["gbs"] / ceiling.bound_gbs()


@figure("nb02_multiply_pct_bound")
def _nb02_multiply_pct() -> float:
    return 100 * _inflight_kernel("multiply")["gbs"] / ceiling.bound_gbs()


@figure("nb02_scale_pct_bound")
def _nb02_scale_pct() -> float:
    return 100 * _inflight_kernel("scale")["gbs"] / ceiling.bound_gbs()


@figure("nb02_copy_kernel_pct_bound")
def _nb02_copy_kernel_pct() -> float:
    return 100 * _inflight_kernel("copy")["gbs"] / ceiling.bound_gbs()


@figure("nb02_add_dram_busy")
def _nb02_add_dram_busy() -> float:
    return next(k["dram_throughput_pct"] for k in _seed()["kernels"] if k["kernel"] == "add_kernel")


# --- notebook 03 ---------------------------------------------------------------------
# The timing prints only on a GPU; the prose quotes the committed H200 run of the same two pipelines at the
# same size (bytes_in_flight.json "pipelines": three kernels and fused, 4-byte and 16-byte accesses, GPU time).


def _inflight_pipeline(name: str) -> dict:
    return next(p for p in committed("bytes_in_flight")["pipelines"] if p["name"] == name)


def _inflight_pipeline_gbs(name: str) -> float:
    p = _inflight_pipeline(name)
    return p["bytes_per_element"] * p["n"] / (p["median_ms"] * 1e-3) / 1e9


@figure("nb03_speedup")
def _nb03_speedup() -> float:
    return _inflight_pipeline("three kernels, 4-byte")["median_ms"] / _inflight_pipeline("fused, 4-byte")["median_ms"]


@figure("nb03_speedup_16byte")
def _nb03_speedup_16() -> float:
    return _inflight_pipeline("three kernels, 16-byte")["median_ms"] / _inflight_pipeline("fused, 16-byte")["median_ms"]


@figure("nb03_three_us")
def _nb03_three_us() -> float:
    return 1e3 * _inflight_pipeline("three kernels, 4-byte")["median_ms"]


@figure("nb03_fused_us")
def _nb03_fused_us() -> float:
    return 1e3 * _inflight_pipeline("fused, 4-byte")["median_ms"]


@figure("nb03_three_gbs")
def _nb03_three_gbs() -> float:
    return _inflight_pipeline_gbs("three kernels, 4-byte")


@figure("nb03_fused_gbs")
def _nb03_fused_gbs() -> float:
    return _inflight_pipeline_gbs("fused, 4-byte")


@figure("nb03_eager_max_abs_diff")
def _nb03_eager_diff() -> float:
    return float(_seed()["compile"]["max_abs_diff_eager_vs_numpy"])


# --- notebook 04 ---------------------------------------------------------------------
# ncu_dram.json (both pipelines at five sizes, L2 flushed "all" or kept "none") and ncu_corpus.json (2^26, L2 kept).


def _ncu_launches(mode: str) -> list[dict]:
    return committed("ncu_dram")["modes"][mode]["launches"]


def _flushed_write_shortfalls_mb(from_n: int = 2**24) -> list[float]:
    """Counted minus ncu-measured DRAM writes per launch, L2 flushed before each kernel, arrays of at least from_n."""
    return [(r["ledger_bytes_written"] - r["ncu_dram_bytes_written"]) / 1e6 for r in _ncu_launches("all")
            if r["n"] >= from_n]


@figure("nb04_fused_2_22_kept_mb")
def _nb04_fused_2_22_kept() -> float:
    r = next(r for r in _ncu_launches("none") if r["n"] == 2**22 and r["kernel"] == "fused_kernel")
    return (r["ncu_dram_bytes_read"] + r["ncu_dram_bytes_written"]) / 1e6


@figure("nb04_flushed_write_short_min_mb")
def _nb04_short_min() -> float:
    return min(_flushed_write_shortfalls_mb())


@figure("nb04_flushed_write_short_max_mb")
def _nb04_short_max() -> float:
    return max(_flushed_write_shortfalls_mb())


@figure("nb04_flushed_write_short_2_28_max_pct")
def _nb04_short_2_28_pct() -> float:
    return max(100 * (r["ledger_bytes_written"] - r["ncu_dram_bytes_written"]) / r["ledger_bytes_written"]
               for r in _ncu_launches("all") if r["n"] == 2**28)


@figure("nb04_add_2_24_flushed_write_short_mb")
def _nb04_add_2_24_short() -> float:
    r = next(r for r in _ncu_launches("all") if r["n"] == 2**24 and r["kernel"] == "add_kernel")
    return (r["ledger_bytes_written"] - r["ncu_dram_bytes_written"]) / 1e6


def _agreement_worst(mode: str) -> float:
    return committed("ncu_dram")["agreement_check"]["by_cache_policy"][mode]["worst"]["ratio"]


@figure("nb04_flushed_worst_short_pct")
def _nb04_flushed_worst() -> float:
    return 100 * (1 - _agreement_worst("all"))


@figure("nb04_kept_worst_short_pct")
def _nb04_kept_worst() -> float:
    return 100 * (1 - _agreement_worst("none"))


def _corpus_launch(kernel: str) -> dict:
    return next(r for r in committed("ncu_corpus")["launches"] if r["kernel"] == kernel)


@figure("nb04_three_point_ratio")
def _nb04_three_point() -> float:
    return _corpus_launch("three_point_interior")["ratio"]


@figure("nb04_five_point_ratio")
def _nb04_five_point() -> float:
    return _corpus_launch("five_point_interior")["ratio"]


@figure("nb04_block_max_ratio")
def _nb04_block_max() -> float:
    return _corpus_launch("block_max")["ratio"]


@figure("nb04_block_max_extra_write_mb")
def _nb04_block_max_extra() -> float:
    r = _corpus_launch("block_max")
    return (r["ncu_dram_bytes_written"] - r["ledger_bytes_written"]) / 1e6

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


@figure("nb05_fused_loop_2_12_min_us")
def _nb05_fused_2_12_min() -> float:
    return 1e3 * min(_sweep_row("numba fused", "loop", 2**12)["samples_ms"])


@figure("nb05_fused_loop_2_12_max_us")
def _nb05_fused_2_12_max() -> float:
    return 1e3 * max(_sweep_row("numba fused", "loop", 2**12)["samples_ms"])


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
    "nb05_best_loop_up_to": r"Python loop: numba fused \(best\) is slower .* \(by up to (\d+\.\d+)x\)",
    "nb05_best_gpu_up_to": r"L2 warm: numba fused \(best\) is slower .* \(by up to (\d+\.\d+)x\)",
    "nb05_add_issue_us": r"numba add, lazy @cuda\.jit\s+([\d.]+) µs",
    "nb05_fused_issue_us": r"numba fused, lazy @cuda\.jit\s+([\d.]+) µs",
    "nb05_cupy_issue_us": r"cupy ElementwiseKernel \(add\)\s+([\d.]+) µs",
    "nb05_torch_issue_us": r"torch\.add\(out=\)\s+([\d.]+) µs",
    "nb05_explicit_add_us": r"explicit signature, add: issue ([+-]\d+\.\d+) µs",
    "nb05_explicit_fused_us": r"explicit signature, fused: issue ([+-]\d+\.\d+) µs",
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


# --- notebook 08 ---------------------------------------------------------------------------
# (the notebook's own run, and the committed results/h200/transfers.json a simulator reads)


def _nb08_committed_prediction() -> tuple[float, float]:
    """Notebook 08's prediction of the three kernels on host arrays, from the committed sweep, and the measurement."""
    record = committed("transfers")
    pipeline = record["pipeline"]
    h2d, d2h = record["gbs"]["host->device (pageable)"][-1], record["gbs"]["device->host (pageable)"][-1]
    copies_ms = (32 * pipeline["n"] / h2d + 32 * pipeline["n"] / d2h) / 1e6  # 32 B/elem each way (the ledger)
    return (copies_ms + pipeline["median_ms"]["three kernels, on device"],
            pipeline["median_ms"]["three kernels, host arrays"])


@figure("nb08_committed_predicted_ms")
def _nb08_predicted() -> float:
    return _nb08_committed_prediction()[0]


@figure("nb08_committed_measured_ms")
def _nb08_measured() -> float:
    return _nb08_committed_prediction()[1]


OUTPUTS.update({
    "nb08_host_slowdown": r"host arrays make the three kernels (\d+)x slower",
    "nb08_pinned_ratio": r"is (\d+)x the pinned host->device",
    "nb08_pageable_ratio": r"is (\d+)x the pageable host->device",
    "nb08_copy_pct_bound": r"the device copy reaches (\d+)% of",
    "nb08_pinned_h2d_gbs": r"host->device \(pinned\)\s+([\d.]+) GB/s",
    "nb08_predicted_ms": r"predicted (\d+\.\d+) ms, measured",
    "nb08_measured_ms": r"measured (\d+\.\d+) ms for the three kernels",
    "nb08_nvlink_times_fused": r"t1 alone over NVLink 4 \(H200\): [\d.]+ ms, (\d+\.\d+)x",
    "nb08_pcie_times_fused": r"t1 alone over PCIe Gen5 x16: [\d.]+ ms, (\d+\.\d+)x",
})


if __name__ == "__main__":
    raise SystemExit(main())
