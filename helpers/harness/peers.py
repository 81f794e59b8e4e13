"""The implementations the lessons compare the chapter's kernels with, each built one way.

A *peer* is a factory: ``factory(pool)`` prepares what it needs once (an import, a
compilation) and returns a builder; ``builder(n)`` is the :class:`~helpers.harness.campaign.Case`
that computes ``out = (a + b) * c / s`` on the pool's first n elements.  A factory that cannot
run here raises :class:`Unavailable`; :func:`prepare` notes why and goes on.  ``torch.compile``
is configured here alone (:data:`TORCH_COMPILE`, :func:`torch_compile`).
"""

from __future__ import annotations

import gc
import importlib
import importlib.util
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from numba import cuda

from helpers.backend import is_simulator
from helpers.checks import random_inputs
from helpers.ledger import Ledger
from helpers.pipeline import launch_fused, launch_three
from helpers.timing import library_copy
from helpers.validate import kernel_function

from .campaign import DTYPE, Builder, Case, Pool
from .device_checks import poison_on_device

Factory = Callable[[Pool], Builder]


class Unavailable(RuntimeError):
    """This implementation cannot run here: a library is not installed, or it needs a GPU (this is the simulator)."""


def require_gpu(what: str) -> None:
    """Raise :class:`Unavailable` in the simulator, saying that ``what`` needs a GPU."""
    if is_simulator():
        raise Unavailable(f"{what} needs a GPU (this is the simulator)")


def require_gpu_module(name: str) -> Any:
    """The module ``name`` for work on the GPU, or :class:`Unavailable` saying why not."""
    require_gpu(name)
    if importlib.util.find_spec(name) is None:
        raise Unavailable(f"{name} is not installed")
    try:
        return importlib.import_module(name)
    except Exception as error:  # a broken install is reported, not fatal
        raise Unavailable(f"{name} failed to import: {error}") from None


TORCH_COMPILE: dict[str, Any] = {"dynamic": True}
"""How the series compiles with torch.compile: one compilation serves every size (``dynamic=True``)."""


def torch_compile_options(mode: str | None = None, dynamic: bool | None = None) -> dict[str, Any]:
    """:data:`TORCH_COMPILE`, with ``mode`` and, where a measurement needs one compilation per size, ``dynamic``."""
    options = dict(TORCH_COMPILE)
    if dynamic is not None:
        options["dynamic"] = dynamic
    if mode:
        options["mode"] = mode
    return options


def describe_torch_compile(mode: str | None = None, dynamic: bool | None = None) -> str:
    """How :func:`torch_compile` compiles, as code: ``torch.compile(dynamic=True, mode='reduce-overhead')``."""
    return "torch.compile(" + ", ".join(f"{k}={v!r}" for k, v in torch_compile_options(mode, dynamic).items()) + ")"


@dataclass(frozen=True)
class Compiled:
    """A function compiled by torch.compile, and how (:func:`describe_torch_compile`)."""

    function: Callable[..., Any]
    description: str

    def __call__(self, *args: Any) -> Any:
        return self.function(*args)


def torch_compile(function: Callable[..., Any], mode: str | None = None, dynamic: bool | None = None) -> Compiled:
    """``function`` compiled by torch.compile with the series' options (:func:`torch_compile_options`)."""
    torch = require_gpu_module("torch")
    options = torch_compile_options(mode, dynamic)
    if not options["dynamic"]:  # one compilation per size: let every size of a sweep have its own
        torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, 64)
    return Compiled(torch.compile(function, **options), describe_torch_compile(mode, dynamic))


def numba_three(pool: Pool, launch: Callable[..., None] = launch_three) -> Builder:
    """The chapter's three kernels (add, multiply, scale), or ``launch(a, b, c, s, t1, t2, out)``."""
    def case(n: int) -> Case:
        a, b, c, t1, t2, out = pool.views(n)
        return Case(lambda: launch(a, b, c, pool.s, t1, t2, out), lambda: out, lambda: poison_on_device(t1, t2, out))

    return case


def numba_fused(pool: Pool, launch: Callable[..., None] = launch_fused) -> Builder:
    """One fused launch: the chapter's kernel, or ``launch(a, b, c, s, out)`` (notebook 07's best variant, say)."""
    def case(n: int) -> Case:
        a, b, c, _, _, out = pool.views(n)
        return Case(lambda: launch(a, b, c, pool.s, out), lambda: out, lambda: poison_on_device(out))

    return case


def numba_graph(pool: Pool, capture: Callable[..., Any], *, three: bool = False,
                launch: Callable[..., None] | None = None, replay_on: Any = None) -> Builder:
    """The three kernels, the fused kernel, or ``launch(a, b, c, s, out)`` (which takes no stream: its
    default-stream launches are adopted) recorded once per size by ``capture`` (the lesson 09 graphs'),
    replayed on ``replay_on`` or the graph's stream.  In the simulator the capture checks, then refuses.
    """
    name = "three kernels" if three else "fused"

    def pipeline(n: int) -> Callable[[Any], None]:
        a, b, c, t1, t2, out = pool.views(n)
        if three:
            return lambda stream: launch_three(a, b, c, pool.s, t1, t2, out, stream)
        if launch is not None:
            return lambda stream: launch(a, b, c, pool.s, out)
        return lambda stream: launch_fused(a, b, c, pool.s, out, stream)

    if is_simulator():
        capture(pipeline(min(pool.n_max, 300)), name=name, adopt_default_stream=launch is not None)
        raise Unavailable("CUDA graphs need a GPU")  # the capture above says so in more words

    def case(n: int) -> Case:
        _, _, _, t1, t2, out = pool.views(n)
        graph = capture(pipeline(n), name=name, adopt_default_stream=launch is not None)
        poison = (lambda: poison_on_device(t1, t2, out)) if three else (lambda: poison_on_device(out))
        stream = graph.stream if replay_on is None else replay_on
        return Case(lambda: graph.replay(stream), lambda: out, poison, stream=stream, close=graph.close)

    return case


def explicit_signature(kernel: Any, signature: str) -> Any:
    """The same Python kernel compiled eagerly for one ``signature`` (no type dispatch at launch)."""
    return cuda.jit(signature)(kernel_function(kernel))


def count_pipelines(count: Callable[[Callable[[Any], None], str], Ledger] | None = None,
                    n: int = 1000) -> dict[str, Ledger]:
    """The ledger's count of the two Numba pipelines, ``"three kernels"`` and ``"fused"``, at n elements.

    ``count(pipeline, name)`` counts ``pipeline(stream)``'s launches (the ones a graph records, say);
    by default a :class:`~helpers.ledger.Ledger` watches them made on the default stream.
    """
    a, b, c = (cuda.to_device(x) for x in random_inputs(n, dtype=DTYPE))
    t1, t2, out = (cuda.device_array(n, DTYPE) for _ in range(3))
    s = DTYPE(2.0)
    pipelines = {"three kernels": lambda stream: launch_three(a, b, c, s, t1, t2, out, stream),
                 "fused": lambda stream: launch_fused(a, b, c, s, out, stream)}
    return {name: (count or _count_directly)(pipeline, name) for name, pipeline in pipelines.items()}


def _count_directly(pipeline: Callable[[Any], None], name: str) -> Ledger:
    with Ledger(name) as ledger:
        pipeline(None)
    return ledger


def cupy_elementwise(pool: Pool) -> Builder:
    """CuPy's ``ElementwiseKernel`` of the expression: one generated kernel, one launch."""
    cupy = require_gpu_module("cupy")
    kernel = cupy.ElementwiseKernel("float32 a, float32 b, float32 c, float32 s", "float32 out",
                                    "out = (a + b) * c / s", "abc_fused")
    full = [cupy.asarray(x) for x in (pool.a, pool.b, pool.c, pool.out)]

    def case(n: int) -> Case:
        a, b, c, out = (x[:n] for x in full)
        answer = pool.out[:n]
        return Case(lambda: kernel(a, b, c, pool.s, out), lambda: answer, lambda: poison_on_device(answer))

    return case


def _tensors(torch: Any, pool: Pool) -> list[Any]:
    return [torch.as_tensor(x, device="cuda") for x in (pool.a, pool.b, pool.c, pool.t1, pool.t2, pool.out)]


def torch_eager(pool: Pool) -> Builder:
    """``torch.add``, ``torch.mul`` and ``torch.div`` with ``out=``: three launches, intermediates in memory."""
    torch = require_gpu_module("torch")
    full = _tensors(torch, pool)

    def case(n: int) -> Case:
        a, b, c, t1, t2, out = (x[:n] for x in full)
        views, s = pool.views(n), float(pool.s)

        def run() -> None:
            torch.add(a, b, out=t1)
            torch.mul(t1, c, out=t2)
            torch.div(t2, s, out=out)

        return Case(run, lambda: out, lambda: poison_on_device(*views[3:]))

    return case


@dataclass
class _Outputs:
    """A library's own output arrays: the last one, and where the poisoned one was."""

    last: list[Any] = field(default_factory=list)
    poisoned_at: int | None = None

    def poison(self) -> None:
        # Fill the last output with NaN and hand it back to PyTorch's caching allocator, which
        # gives the same block to the next call of the same size: then the check reads a poisoned one.
        if self.last:
            tensor = self.last.pop()
            tensor.fill_(float("nan"))
            self.poisoned_at = tensor.data_ptr()

    def same_buffer(self) -> bool:
        return bool(self.last) and self.last[0].data_ptr() == self.poisoned_at


def torch_compiled(pool: Pool, mode: str | None = None, *, static: bool = False, dynamic: bool | None = None,
                   expression: Callable[[Any, Any, Any], Any] | None = None) -> Builder:
    """torch.compile of ``(a + b) * c / s`` (``s`` baked in, as a graph bakes it in) or of ``expression(a, b, c)``.

    ``mode="reduce-overhead"`` replays torch's own CUDA graphs, copying each input not marked ``static`` in first.
    """
    torch = require_gpu_module("torch")
    full = _tensors(torch, pool)[:3]
    s = float(pool.s)
    expression = expression or (lambda a, b, c: (a + b) * c / s)

    def views(n: int) -> list[Any]:
        parts = [x[:n] for x in full]
        if static:  # the views keep their addresses from call to call: no copy into torch's own buffers
            for part in parts:
                torch._dynamo.mark_static_address(part, guard=False)
        return parts

    # Free what earlier stages left for the garbage collector now: a CUDA object destroyed while
    # torch records a graph of its own would break that recording.
    gc.collect()
    cuda.synchronize()
    compiled = torch_compile(expression, mode, dynamic)
    step = torch.compiler.cudagraph_mark_step_begin if mode == "reduce-overhead" else (lambda: None)
    started = time.perf_counter()
    for _ in range(3):  # reduce-overhead records its graph on a later call than the first
        step()
        compiled(*views(1000))
    torch.cuda.synchronize()
    print(f"{compiled.description}: ready in {time.perf_counter() - started:.1f} s", file=sys.stderr)

    def case(n: int) -> Case:
        a, b, c = views(n)
        outputs = _Outputs()

        def run() -> None:
            step()
            outputs.last[:] = [compiled(a, b, c)]

        return Case(run, lambda: outputs.last[0], outputs.poison, same_buffer=outputs.same_buffer)

    return case


def numpy_host(pool: Pool) -> Builder:
    """``(a + b) * c / s`` in NumPy on the host (each call writes a fresh array: nothing to poison)."""
    def case(n: int) -> Case:
        a, b, c = (x[:n] for x in pool.host)
        last: list[Any] = []

        def run() -> None:
            last[:] = [(a + b) * c / pool.s]

        return Case(run, lambda: last[0], last.clear, poisoned=False)

    return case


def device_copy(pool: Pool) -> Builder:
    """A device-to-device copy of ``a`` into ``out`` (a library's copy kernel): the 1:1 read/write mix."""
    def case(n: int) -> Case:
        a, _, _, _, _, out = pool.views(n)
        copy, _method = library_copy(a, out)
        return Case(copy, lambda: out, lambda: poison_on_device(out), expected=a)

    return case


def release_memory() -> None:
    """Hand the GPU memory PyTorch and CuPy keep cached back to the device (where they were imported)."""
    for name, release in (("torch", lambda m: m.cuda.empty_cache()),
                          ("cupy", lambda m: m.get_default_memory_pool().free_all_blocks())):
        if name in sys.modules:
            release(sys.modules[name])


@dataclass
class Prepared:
    """What :func:`prepare` made of the factories: builders, and why the others cannot run here."""

    builders: dict[str, Builder]
    absent: dict[str, str]
    seconds: dict[str, float]  # how long each factory took (imports, compilation)


def prepare(factories: Mapping[str, Factory], pool: Pool, *, say: bool = True) -> Prepared:
    """Call every factory on ``pool``; one that cannot run here is noted with its reason, not fatal."""
    done = Prepared({}, {}, {})
    for label, factory in factories.items():
        started = time.perf_counter()
        try:
            done.builders[label] = factory(pool)
        except Unavailable as why:
            done.absent[label] = str(why)
        except Exception as error:  # a peer that cannot be set up is reported, not fatal
            done.absent[label] = f"setup failed: {type(error).__name__}: {error}"
        done.seconds[label] = round(time.perf_counter() - started, 3)
        if label in done.absent and say:
            print(f"{label}: {done.absent[label]}", file=sys.stderr)
    return done
