"""The lessons' kernels under both compilers, numba-cuda and numba-cuda-mlir, in one run on a GPU.

    python scripts/compilers.py [--out FOLDER] [--notebooks 01 02 03]

A process can import one compiler (see :mod:`helpers.backend`), so each compiler
runs in a subprocess of its own (``--one numba-cuda`` or ``--one numba-cuda-mlir``)
and the two answers are merged into one :class:`Compilers` record:

* **kernels**: every lesson kernel this series ships, launched at awkward sizes on
  fresh random inputs and checked as its lesson checks it -- bitwise against NumPy
  where the lesson promises identical arithmetic, within the lesson's tolerance
  elsewhere -- or the error that stopped it, named;
* **timings**: the three-kernel pipeline and the fused kernel at n = 2^10, 2^20, 2^28
  (CUDA events, medians of 30 after a warm-up);
* **notebooks**: lessons' code cells run in order in a plain interpreter, each cell
  marked ``NBVAL_CHECK_OUTPUT`` compared with the committed output.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

import helpers  # first: it chooses the backend and the compiler (HELPERS_COMPILER) before numba loads
from numba import cuda

from helpers.lessons.attention import kernels as attention
from helpers import is_simulator, pipeline
from helpers.lessons.optimizer import kernels as optim
from helpers.lessons.softmax import kernels as softmax
from helpers.backend import COMPILER, COMPILER_ENV, MLIR, NUMBA_CUDA
from helpers.checks import poisoned, random_inputs
from helpers.lessons.fuser.fuser import fuse
from helpers.results import Record, load, save
from helpers.sizes import BLOCK_SIZE, blocks_for
from helpers.timing import time_gpu
from helpers.lessons.inflight import kernels as inflight
from helpers.lessons.launches import kernels as launches
from helpers.lessons.roofline import kernels

sys.path.insert(0, str(Path(__file__).resolve().parent))
from regenerate import regenerate  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SIZES = (2**10, 2**20, 2**28)
CHECK_N = 1027  # not a multiple of the block, nor of four


@dataclass
class KernelCheck:
    """One lesson kernel under one compiler."""

    lesson: str
    kernel: str
    runs: bool
    verdict: str  # "bitwise", "within 1e-05", or the failure
    detail: str = ""


@dataclass
class CellCheck:
    """One checked notebook cell under one compiler."""

    notebook: str
    cell: int
    same_as_committed: bool
    detail: str = ""


@dataclass
class CompilerRun:
    """Everything one compiler did in its subprocess."""

    compiler: str
    version: str
    kernels: list[KernelCheck] = field(default_factory=list)
    timings_ms: dict[str, dict[str, float]] = field(default_factory=dict)  # pipeline -> str(n) -> median
    cells: list[CellCheck] = field(default_factory=list)
    error: str | None = None


@dataclass(kw_only=True)
class Compilers(Record):
    """numba-cuda and numba-cuda-mlir side by side."""

    SCHEMA = "compilers"
    VERSION = 1
    runs: list[CompilerRun]


# --- the checks, run inside one compiler's process ------------------------------------------


def _inputs(n: int, count: int = 3) -> list[np.ndarray]:
    return list(random_inputs(n, count))


def _bitwise(got: np.ndarray, want: np.ndarray) -> tuple[str, str]:
    if got.shape == want.shape and np.array_equal(got.view(np.uint32), want.astype(np.float32).view(np.uint32)):
        return "bitwise", ""
    bad = int(np.flatnonzero(got.ravel() != want.astype(np.float32).ravel())[0])
    return "differs", f"element {bad}: {got.ravel()[bad]!r}, NumPy {want.ravel()[bad]!r}"


def _close(got: np.ndarray, want: np.ndarray, tol: float, *, of_largest: bool = False) -> tuple[str, str]:
    """Within ``tol`` of float64 NumPy, element by element (or against the largest value, as lesson 11's attention)."""
    scale = np.max(np.abs(want)) if of_largest else np.maximum(np.abs(want), 1e-30)
    error = float(np.max(np.abs(got - want) / scale))
    return (f"within {tol:g}", f"max relative error {error:.1e}") if error <= tol else ("differs", f"{error:.1e}")


def elementwise_cases() -> list[tuple[str, str, Callable[[], tuple[str, str]]]]:
    """Lessons 01, 03, 06, 07, 09 and 10: the pipeline, the fused kernel, the fuser's, the roofline variants,
    an argument-count kernel and the 16-byte three kernels."""
    a, b, c = _inputs(CHECK_N)
    want = pipeline.reference(a, b, c, 1.7)
    dev = [cuda.to_device(x) for x in (a, b, c)]

    def run(launch: Callable[..., None]) -> Callable[[], tuple[str, str]]:
        def check() -> tuple[str, str]:
            out = poisoned(CHECK_N)
            launch(*dev, np.float32(1.7), out)
            return _bitwise(out.copy_to_host(), want)
        return check

    three = run(lambda a, b, c, s, out: pipeline.run_three_kernels(a, b, c, float(s), poisoned(CHECK_N),
                                                                   poisoned(CHECK_N), out))
    fused = fuse(lambda a, b, c, s: (a + b) * c / s, scalars="s", name="fused_by_fuser")
    cases = [("01", "three kernels", three), ("03", "fused", run(lambda *x: pipeline.run_fused(*x[:3], float(x[3]), x[4]))),
             ("06", "fuser", run(lambda a, b, c, s, out: fused[blocks_for(CHECK_N), BLOCK_SIZE](a, b, c, s, out)))]
    ten = run(kernels.llvmlite_only(lambda a, b, c, s, out: inflight.run_three_vec4(  # roofline's load4
        a, b, c, float(s), poisoned(CHECK_N), poisoned(CHECK_N), out)))
    return cases + [("07", name, run(launch)) for name, launch in kernels.VARIANTS.items()] + [
        ("09", "args3 (x0 = x1 + x2)", lambda: _args3(a, b)), ("10", "three kernels, 16-byte", ten)]


def _args3(a: np.ndarray, b: np.ndarray) -> tuple[str, str]:
    out = poisoned(CHECK_N)
    launches.args3[blocks_for(CHECK_N), BLOCK_SIZE](out, cuda.to_device(a), cuda.to_device(b))
    return _bitwise(out.copy_to_host(), a + b)


def chain_cases() -> list[tuple[str, str, Callable[[], tuple[str, str]]]]:
    """Lesson 10's dependent chains of one operation, each against the host's float32 chain."""

    def chain(op: str) -> tuple[str, str]:
        kernel, s = inflight.CHAINS[op]
        out = poisoned(1)
        kernel[1, 1](cuda.to_device(np.ones(1, np.float32)), np.float32(s), 100, out)
        return _bitwise(out.copy_to_host(), np.array([inflight.chain_reference(op, 1.0, s, 100)]))

    return [("10", f"{op} chain", lambda op=op: chain(op)) for op in inflight.CHAINS]


def reduction_cases() -> list[tuple[str, str, Callable[[], tuple[str, str]]]]:
    """Lessons 11 and 12: softmax, attention and AdamW, within their lessons' tolerances."""

    x = np.random.default_rng().standard_normal((9, 77)).astype(np.float32)
    q, k, v = (np.random.default_rng().standard_normal((2, 77, 64)).astype(np.float32) for _ in range(3))

    def soft(name: str) -> Callable[[], tuple[str, str]]:
        def check() -> tuple[str, str]:
            dx, out = cuda.to_device(x), poisoned(x.size).reshape(x.shape)
            extra = (poisoned(9), poisoned(x.size).reshape(x.shape), poisoned(9)) if name == "unfused" else ()
            getattr(softmax, f"run_{name}")(dx, *extra, out)
            return _close(out.copy_to_host(), softmax.reference(x), 1e-5)
        return check

    def attend(causal: bool) -> tuple[str, str]:
        out = poisoned(q.size).reshape(q.shape)
        attention.run_fused(*(cuda.to_device(t) for t in (q, k, v)), out, causal=causal)
        return _close(out.copy_to_host(), attention.reference(q, k, v, causal), 1e-4, of_largest=True)

    def adamw() -> tuple[str, str]:
        p, g, m, w = _inputs(CHECK_N, 4)
        dev = [cuda.to_device(t) for t in (p, g, m, np.abs(w))]
        optim.run_fused(*dev, optim.AdamW(), 3)
        return _close(dev[0].copy_to_host(), optim.reference(p, g, m, np.abs(w), optim.AdamW(), 3)[0], 1e-5)

    cases = [("11", f"softmax {name}", soft(name)) for name in ("unfused", "fused", "online", "pipelined")]
    return cases + [("12", "attention fused", lambda: attend(False)), ("12", "attention fused causal", lambda: attend(True)),
                    ("14", "adamw fused", adamw)]


def check_kernels() -> list[KernelCheck]:
    checks = []
    for maker in (chain_cases, elementwise_cases, reduction_cases):
        try:
            cases = maker()
        except Exception as exc:  # an import or a module-level kernel the compiler refuses
            checks.append(KernelCheck("-", maker.__name__, False, "does not import", _short(exc)))
            continue
        for lesson, name, case in cases:
            try:
                verdict, detail = case()
                checks.append(KernelCheck(lesson, name, True, verdict, detail))
            except Exception as exc:
                checks.append(KernelCheck(lesson, name, False, type(exc).__name__, _short(exc)))
    return checks


def _short(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:300]}"


def time_pipelines() -> dict[str, dict[str, float]]:
    found: dict[str, dict[str, float]] = {"three kernels": {}, "fused": {}}
    for n in SIZES:
        a, b, c = (cuda.to_device(x) for x in _inputs(n))
        t1, t2, out = (cuda.device_array(n, np.float32) for _ in range(3))
        runs = {"three kernels": lambda: pipeline.run_three_kernels(a, b, c, 1.7, t1, t2, out),
                "fused": lambda: pipeline.run_fused(a, b, c, 1.7, out)}
        for name, run in runs.items():
            timing = time_gpu(run, label=name, repeats=30)
            found[name][str(n)] = timing.median_ms if timing else float("nan")
        del a, b, c, t1, t2, out
    return found


def run_notebook(path: Path) -> list[CellCheck]:
    """Run a lesson's code cells in order; compare each checked cell's printed text with the committed one."""
    import matplotlib

    matplotlib.use("Agg")
    cells = json.loads(path.read_text())["cells"]
    space: dict[str, Any] = {"__name__": "__main__"}
    checks = []
    for i, cell in enumerate(cells):
        source = "".join(cell["source"])
        if cell["cell_type"] != "code" or not source.strip():
            continue
        printed = io.StringIO()
        try:
            with contextlib.redirect_stdout(printed):
                exec(compile(source, f"<{path.name} cell {i}>", "exec"), space)
        except Exception as exc:
            checks.append(CellCheck(path.name, i, False, _short(exc)))
            break
        if "NBVAL_CHECK_OUTPUT" in source:
            committed = "".join("".join(o.get("text", "")) for o in cell.get("outputs", []) if o.get("name") == "stdout")
            same = printed.getvalue() == committed
            checks.append(CellCheck(path.name, i, same, "" if same else printed.getvalue()[-300:]))
    return checks


PARTS = ("kernels", "timings", "notebooks")


def one(notebooks: list[str], report: Callable[[CompilerRun], None], parts: tuple[str, ...] = PARTS) -> CompilerRun:
    """This process's compiler: the ``parts`` asked for, of its kernels, timings and notebooks (reported after each)."""
    name = MLIR if COMPILER[0] else NUMBA_CUDA
    version = COMPILER[0].split()[-1] if COMPILER[0] else _numba_cuda_version()
    run = CompilerRun(name, version)
    if is_simulator():
        run.error = "needs a GPU"
        return run
    if "kernels" in parts:
        run.kernels = check_kernels()
        report(run)
    if "timings" in parts:
        run.timings_ms = time_pipelines()
        report(run)
    for number in notebooks if "notebooks" in parts else ():
        for path in sorted((ROOT / "notebooks").glob(f"{number}_*.ipynb")):
            run.cells += run_notebook(path)
            report(run)
    return run


def _numba_cuda_version() -> str:
    from importlib import metadata

    return metadata.version("numba-cuda")


# --- the two processes, merged ----------------------------------------------------------------


def in_subprocess(compiler: str, notebooks: list[str], timeout: float, parts: tuple[str, ...] = PARTS) -> CompilerRun:
    """One compiler's run in a process of its own (what it reported last, if it ran out of time)."""
    env = dict(os.environ, **{COMPILER_ENV: "mlir" if compiler == MLIR else ""})
    command = [sys.executable, str(Path(__file__).resolve()), "--one", "--parts", ",".join(parts), *notebooks]
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
        stdout, error = done.stdout, (f"exit {done.returncode}: " + " ".join(done.stderr.split()[-60:])
                                      if done.returncode else None)
    except subprocess.TimeoutExpired as late:
        stdout = late.stdout.decode() if isinstance(late.stdout, bytes) else (late.stdout or "")
        error = f"stopped after {timeout:g} s"
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    if not lines:
        return CompilerRun(compiler, "?", error=error or "reported nothing")
    data = json.loads(lines[-1])
    return CompilerRun(compiler, data["version"], [KernelCheck(**k) for k in data["kernels"]], data["timings_ms"],
                       [CellCheck(**c) for c in data["cells"]], data["error"] or error)


def with_timings(timed: list[CompilerRun], folder: str | None) -> Compilers:
    """The record in ``folder`` with each compiler's timings replaced by the ones just measured."""
    record = load(Compilers, folder)
    by_name = {run.compiler: run for run in timed}
    for run in record.runs:
        if run.compiler in by_name:
            run.timings_ms = by_name[run.compiler].timings_ms
            run.error = run.error or by_name[run.compiler].error
    return record


def table(record: Compilers) -> str:
    """Kernels, then timings, one row each, the compilers side by side."""
    runs = record.runs
    head = "kernel".ljust(34) + "".join(f"{r.compiler} {r.version}".ljust(30) for r in runs)
    rows = [head]
    names = [(k.lesson, k.kernel) for k in runs[0].kernels] if runs and runs[0].kernels else []
    for lesson, name in names:
        cells = [next((f"{k.verdict} {k.detail}"[:28] for k in r.kernels if k.kernel == name), "-") for r in runs]
        rows.append(f"{lesson} {name}"[:33].ljust(34) + "".join(c.ljust(30) for c in cells))
    for pipeline_name in ("three kernels", "fused"):
        for n in SIZES:
            cells = [f"{r.timings_ms.get(pipeline_name, {}).get(str(n), float('nan')):.4f} ms" for r in runs]
            rows.append(f"{pipeline_name} n=2^{int(np.log2(n))}".ljust(34) + "".join(c.ljust(30) for c in cells))
    for r in runs:
        same = sum(c.same_as_committed for c in r.cells)
        rows.append(f"{r.compiler}: {same} of {len(r.cells)} checked notebook cells as committed"
                    + (f"; error: {r.error[:200]}" if r.error else ""))
    return "\n".join(rows)


DOC = ROOT / "docs" / "compilers.md"
BEGIN, END = "<!-- begin: python scripts/compilers.py --doc -->", "<!-- end: python scripts/compilers.py --doc -->"


def markdown(record: Compilers) -> str:
    """The record as the tables of ``docs/compilers.md``: kernels, timings, lessons' checked cells."""
    runs = record.runs
    head = "| lesson | kernel | " + " | ".join(f"{r.compiler} {r.version}" for r in runs) + " |"
    rows, reasons = [head, "|" + "---|" * (2 + len(runs))], []

    def cell(k: KernelCheck) -> str:
        if k.runs:
            return k.verdict + (f" ({k.detail})" if k.detail else "")
        reasons.append(k.detail) if k.detail not in reasons else None
        return f"does not run [{reasons.index(k.detail) + 1}]"

    for check in runs[0].kernels:
        cells = [next((cell(k) for k in r.kernels if k.kernel == check.kernel), "-").replace("|", "/") for r in runs]
        rows.append(f"| {check.lesson} | {check.kernel} | " + " | ".join(cells) + " |")
    rows += [""] + [f"[{i}] {reason}" + ("  " if i < len(reasons) else "") for i, reason in enumerate(reasons, 1)]
    rows += ["", "| median GPU time (CUDA events, 30 runs) | " + " | ".join(r.compiler for r in runs) + " |",
             "|" + "---|" * (1 + len(runs))]
    for name in ("three kernels", "fused"):
        for n in SIZES:
            times = [r.timings_ms.get(name, {}).get(str(n), float("nan")) for r in runs]
            rows.append(f"| {name}, n = 2^{int(np.log2(n))} | " + " | ".join(f"{t:.4f} ms" for t in times) + " |")
    rows.append("")
    total = max(len(r.cells) for r in runs)
    for r in runs:
        same, unreached = sum(c.same_as_committed for c in r.cells), total - len(r.cells)
        rows.append(f"- {r.compiler}: {same} of {total} checked cells of lessons "
                    f"{', '.join(sorted({c.notebook[:2] for c in r.cells}))} print what is committed"
                    + (f" ({unreached} not reached: a cell that raises stops its lesson)." if unreached else "."))
    p = record.provenance
    if p is not None:
        rows += ["", f"Measured on an {p.device} (driver CUDA {p.cuda_driver}), {p.date[:10]}, Python {p.python}, "
                 f"numba {p.versions.get('numba')}, numpy {p.versions.get('numpy')}; the compilers' versions head "
                 "the first table."]
    return "\n".join(rows)


def doc_text(record: Compilers, text: str) -> str:
    """``text`` (the doc) with its generated block replaced by the record's tables."""
    before, rest = text.split(BEGIN)
    _, after = rest.split(END)
    return f"{before}{BEGIN}\n{markdown(record)}\n{END}{after}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python scripts/compilers.py", description=__doc__.split("\n")[0])
    parser.add_argument("--out", help="folder for compilers.json (default: results/<device>/)")
    parser.add_argument("--one", action="store_true", help="run this process's compiler only and print JSON")
    parser.add_argument("--timeout", type=float, default=280, help="seconds each compiler's process may take")
    parser.add_argument("--parts", default=",".join(PARTS),
                        help="what to run, of kernels,timings,notebooks (timings alone are added to the record in --out: "
                             "time them when nothing else uses the GPU)")
    parser.add_argument("notebooks", nargs="*", default=["01", "02", "03"], help="lesson numbers to run as cells")
    parser.add_argument("--doc", action="store_true",
                        help="rewrite docs/compilers.md's tables from the record in --out (no GPU needed); with "
                             "--check, only say whether they are out of date")
    parser.add_argument("--check", action="store_true", help="with --doc: write nothing, fail if the doc is stale")
    args = parser.parse_args(argv)
    if args.doc:
        record = load(Compilers, args.out)
        return regenerate(DOC, lambda text: doc_text(record, text), ["--check"] if args.check else [],
                          f"{DOC.relative_to(ROOT) if DOC.is_relative_to(ROOT) else DOC} is out of date: "
                          f"run python scripts/compilers.py --doc "
                          f"--out {args.out or 'results/<device>'}")
    parts = tuple(p for p in args.parts.split(",") if p)
    if not parts or set(parts) - set(PARTS):
        parser.error(f"--parts takes some of {','.join(PARTS)}, got {args.parts!r}")
    if args.one:
        import dataclasses

        stdout = sys.stdout

        def report(run: CompilerRun) -> None:
            print(json.dumps(dataclasses.asdict(run)), file=stdout, flush=True)

        with contextlib.redirect_stdout(sys.stderr):  # the lessons' own printing stays out of the JSON
            report(one(args.notebooks, report, parts))
        return 0
    started = time.time()
    runs = [in_subprocess(c, args.notebooks, args.timeout, parts) for c in (NUMBA_CUDA, MLIR)]
    record = Compilers(runs=runs) if parts != ("timings",) else with_timings(runs, args.out)
    path = save(record, args.out)
    print(table(record))
    print(f"wrote {path} in {time.time() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
