"""A tiny fuser: turn a Python expression over arrays into ONE ``@cuda.jit`` kernel.

This is a teaching device, not a compiler.  It does by hand, in a few dozen lines,
the first thing ``torch.compile`` automates: it *traces* a function by calling it
with stand-in objects, records the elementwise operations as an expression tree,
and prints one kernel that loads each input once, keeps every intermediate in a
register (a local variable), and stores the result once::

    kernel = fuse(lambda a, b, c, s: (a + b) * c / s, scalars=("s",))
    print(kernel.source)
    kernel[blocks_for(n), BLOCK_SIZE](a, b, c, s, out)

The kernel takes the function's parameters in order, then ``out``, and checks its arguments
before each launch.  Supported: ``+ - * /`` between arrays and scalar parameters, and unary ``-``;
anything else (powers, comparisons, ``math``, literal constants, reductions) raises :class:`FuseError`.
"""

from __future__ import annotations

import inspect
import keyword
import linecache
import re
from typing import Any, Callable, Iterable

import numpy as np

from helpers.pipeline import scalar_for
from helpers.validate import check_elementwise, check_no_aliasing

RESERVED_KERNEL_NAMES = frozenset({"cuda"})
"""Names the generated source needs for itself (``cuda.grid``): a kernel so named would hide them."""


class FuseError(TypeError):
    """The function cannot be fused into one elementwise kernel; the message says why."""


class Node:
    """A traced value: an input (``op == "input"``) or an operation on other nodes."""

    def __init__(self, op: str, args: tuple["Node", ...] = (), name: str = "", scalar: bool = False) -> None:
        self.op, self.args, self.name, self.scalar = op, args, name, scalar

    def key(self) -> tuple:
        """Structural identity: equal keys compute equal values (used to share work)."""
        return (self.op, self.name, tuple(a.key() for a in self.args))

    # the operations the fuser understands
    def _binary(self, op: str, other: Any, reflected: bool = False) -> "Node":
        if not isinstance(other, Node):
            raise FuseError(
                f"the constant {other!r} in `{op}`: pass constants as scalar parameters "
                "(e.g. `lambda x, k: x * k` with scalars=('k',)) so that their dtype "
                "matches the arrays'"
            )
        left, right = (other, self) if reflected else (self, other)
        return Node(op, (left, right))

    def __add__(self, other: Any) -> "Node": return self._binary("+", other)
    def __radd__(self, other: Any) -> "Node": return self._binary("+", other, True)
    def __sub__(self, other: Any) -> "Node": return self._binary("-", other)
    def __rsub__(self, other: Any) -> "Node": return self._binary("-", other, True)
    def __mul__(self, other: Any) -> "Node": return self._binary("*", other)
    def __rmul__(self, other: Any) -> "Node": return self._binary("*", other, True)
    def __truediv__(self, other: Any) -> "Node": return self._binary("/", other)
    def __rtruediv__(self, other: Any) -> "Node": return self._binary("/", other, True)
    def __neg__(self) -> "Node": return Node("neg", (self,))

    # everything else fails loudly
    def _unsupported(self, what: str) -> Any:
        raise FuseError(f"{what} is not supported by the tiny fuser (only + - * / and unary -)")

    def __pow__(self, other: Any) -> Any: return self._unsupported("`**`")
    __rpow__ = __pow__
    def __floordiv__(self, other: Any) -> Any: return self._unsupported("`//`")
    __rfloordiv__ = __floordiv__
    def __mod__(self, other: Any) -> Any: return self._unsupported("`%`")
    __rmod__ = __mod__
    def __matmul__(self, other: Any) -> Any: return self._unsupported("`@` (not elementwise)")
    __rmatmul__ = __matmul__
    def __abs__(self) -> Any: return self._unsupported("abs()")
    def __lt__(self, other: Any) -> Any: return self._unsupported("a comparison")
    __le__ = __gt__ = __ge__ = __eq__ = __ne__ = __lt__  # type: ignore[assignment]
    def __bool__(self) -> bool: return self._unsupported("branching on a traced value (`if`, `and`, `or`)")
    def __float__(self) -> float: return self._unsupported("a `math` function (or float())")
    def __index__(self) -> int: return self._unsupported("using a traced value as an integer")
    def __iter__(self) -> Any:
        raise FuseError("max(), sum() or a loop over an array is a reduction: every element must be "
                        "read before any result exists, so it cannot be one elementwise pass")
    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        return self._unsupported(f"the NumPy function np.{ufunc.__name__} (or a NumPy constant)")
    def __getitem__(self, index: Any) -> Any:
        return self._unsupported("indexing (the fused kernel does the indexing itself)")


def _parameters(fn: Callable[..., Any]) -> list[str]:
    if not callable(fn):
        raise FuseError(f"fuse() needs a function, got {type(fn).__name__}")
    names = []
    for p in inspect.signature(fn).parameters.values():
        if p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            raise FuseError(f"parameter `{p}`: use plain positional parameters only")
        if p.name in ("out", "i", "cuda") or p.name.startswith("t") and p.name[1:].isdigit():
            raise FuseError(f"parameter name `{p.name}` is reserved by the generated kernel; rename it")
        names.append(p.name)
    if not names:
        raise FuseError("the function takes no parameters: there is nothing to fuse")
    clashes = [n for n in names if n.endswith("_i") and n[:-2] in names]
    if clashes:
        raise FuseError(f"parameter name `{clashes[0]}` clashes with the register of `{clashes[0][:-2]}`; rename it")
    return names


def scalar_names(scalars: Iterable[str] | str) -> list[str]:
    """The scalar parameter names: a tuple of names, or one string of names (``"s"`` or ``"s, k"``)."""
    if isinstance(scalars, str):
        # One string is read as names separated by commas or spaces, never letter by letter.
        names: list[Any] = [n for n in re.split(r"[\s,]+", scalars) if n]
    else:
        try:
            names = list(scalars)
        except TypeError:
            raise FuseError(f"scalars must be a tuple of parameter names such as ('s',), got {scalars!r}") from None
    for n in names:
        if not isinstance(n, str) or not n.isidentifier():
            raise FuseError(f"scalars must be parameter names such as ('s', 'k'); {n!r} is not a name")
    return names


def check_kernel_name(name: Any) -> str:
    """``name`` if it can name the generated kernel; else :class:`FuseError` saying why."""
    if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name):
        raise FuseError(f"kernel name {name!r} is not a Python identifier")
    if name in RESERVED_KERNEL_NAMES:
        raise FuseError(f"kernel name {name!r} is taken: the generated kernel calls `cuda.grid`, "
                        "and a kernel named `cuda` would hide the module; choose another name")
    return name


def _trace(fn: Callable[..., Any], scalars: list[str]) -> tuple[list[str], Node]:
    """Call ``fn`` with stand-in values: its parameter names and the expression it returns."""
    params = _parameters(fn)
    unknown = set(scalars) - set(params)
    if unknown:
        raise FuseError(f"scalars {sorted(unknown)} are not parameters of the function {params}")
    inputs = [Node("input", name=p, scalar=p in scalars) for p in params]
    result = fn(*inputs)
    if not isinstance(result, Node):
        raise FuseError(f"the function must return one expression of its parameters, got {type(result).__name__}")
    return params, result


def divisor_scalars(node: Node) -> set[str]:
    """The scalar parameters the expression divides by (``s`` in ``a / s`` or ``a / -s``): they must not be 0."""
    found = set()
    if node.op == "/":
        divisor = node.args[1]
        while divisor.op == "neg":
            divisor = divisor.args[0]
        if divisor.op == "input" and divisor.scalar:
            found.add(divisor.name)
    for arg in node.args:
        found |= divisor_scalars(arg)
    return found


def generate_source(fn: Callable[..., Any], scalars: Iterable[str] | str = (), name: str = "fused") -> str:
    """Trace ``fn`` with stand-in values and return the source of one elementwise kernel."""
    check_kernel_name(name)
    params, result = _trace(fn, scalar_names(scalars))
    return _emit(params, result, name)


def _emit(params: list[str], result: Node, name: str) -> str:
    """The kernel's source: each array loaded once, each intermediate in a register, one store."""
    loads: list[str] = []  # each array read once, into a register
    steps: list[str] = []  # each intermediate computed once, into a register
    seen: dict[tuple, str] = {}

    def emit(node: Node) -> str:
        """Emit the code computing ``node`` (children first) and return its register name."""
        key = node.key()
        if key in seen:
            return seen[key]
        if node.op == "input":
            register = node.name
            if not node.scalar:
                register = f"{node.name}_i"
                loads.append(f"{register} = {node.name}[i]")
        else:
            operands = [emit(arg) for arg in node.args]
            register = f"t{len(steps) + 1}"
            expr = f"-{operands[0]}" if node.op == "neg" else f" {node.op} ".join(operands)
            steps.append(f"{register} = {expr}")
        seen[key] = register
        return register

    final = emit(result)
    if not loads:
        raise FuseError("the expression reads no array (only scalar parameters): nothing to launch over")
    arguments = ", ".join(params + ["out"])
    body = loads + steps + [f"out[i] = {final}"]
    lines = [
        f"def {name}({arguments}):",
        "    i = cuda.grid(1)",
        "    if i < out.size:",
        *(f"        {line}" for line in body),
    ]
    return "\n".join(lines) + "\n"


_generated = 0


def compile_source(source: str, name: str = "fused") -> Any:
    """``exec`` generated source and return it as a ``@cuda.jit`` kernel, registered with :mod:`linecache`
    so that ``inspect.getsource`` (and Numba's errors) can show it."""
    from numba import cuda

    global _generated
    _generated += 1
    filename = f"<fuser-{_generated}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace: dict[str, Any] = {"cuda": cuda}
    exec(compile(source, filename, "exec"), namespace)
    kernel = cuda.jit(namespace[name])
    kernel.source = source
    return kernel


class FusedKernel:
    """A kernel made by :func:`fuse`: launch it as ``kernel[blocks, threads](*arguments, out)``.

    Each launch checks its arguments first: 1-D device arrays of one length and float dtype, finite
    scalars (cast to the arrays' dtype), ``out`` apart from the inputs or exactly one of them (in place
    is safe elementwise).  Any other attribute (``py_func``, ``inspect_asm`` ...) is the ``@cuda.jit`` kernel's.
    """

    def __init__(self, kernel: Any, source: str, parameters: list[str], scalars: Iterable[str],
                 name: str = "fused", nonzero: Iterable[str] = ()) -> None:
        self.kernel, self.source, self.name = kernel, source, name
        self.parameters, self.scalars = list(parameters), frozenset(scalars)
        self.nonzero = frozenset(nonzero)  # the scalars the expression divides by

    def __getattr__(self, attribute: str) -> Any:
        if attribute == "kernel":  # not set yet (copying, unpickling): no recursion
            raise AttributeError(attribute)
        return getattr(self.kernel, attribute)

    def __getitem__(self, launch_config: Any) -> "FusedLaunch":
        return FusedLaunch(self, launch_config)

    def __repr__(self) -> str:
        return f"<fused kernel {self.name}({', '.join(self.parameters + ['out'])})>"

    def checked_arguments(self, args: tuple[Any, ...], launch_config: Any = None) -> list[Any]:
        """The launch arguments, scalars cast to the arrays' dtype; raises naming the first problem.

        Given the launch's ``[blocks, threads]``, it also checks that they cover every element.
        """
        expected = self.parameters + ["out"]
        if len(args) != len(expected):
            raise TypeError(f"this kernel takes {len(expected)} arguments ({', '.join(expected)}), "
                            f"got {len(args)}")
        named = dict(zip(expected, args))
        arrays = {k: v for k, v in named.items() if k not in self.scalars}
        n = check_elementwise(arrays)
        check_no_aliasing({k: v for k, v in arrays.items() if k != "out"}, {"out": named["out"]}, in_place=True)
        if launch_config is not None:
            check_launch_covers(launch_config, n)
        dtype = named["out"].dtype
        return [scalar_for(k, v, dtype, nonzero=k in self.nonzero) if k in self.scalars else v
                for k, v in named.items()]


def _x(dimension: Any) -> int | None:
    """The x extent of a launch dimension (an int or a tuple), or None if it is neither."""
    if isinstance(dimension, tuple) and dimension:
        dimension = dimension[0]
    if isinstance(dimension, (int, np.integer)) and not isinstance(dimension, bool):
        return int(dimension)
    return None


def check_launch_covers(launch_config: Any, n: int) -> None:
    """Raise ``ValueError`` if ``[blocks, threads]`` start fewer threads along x than there are elements
    (one element per thread: an element past the last thread would silently keep its old value)."""
    if not isinstance(launch_config, tuple) or len(launch_config) < 2:
        return  # Numba itself refuses a launch without [blocks, threads]
    blocks, threads = _x(launch_config[0]), _x(launch_config[1])
    if blocks is None or threads is None or blocks * threads >= n:
        return
    raise ValueError(
        f"the launch [{blocks}, {threads}] starts {blocks * threads} threads along x, one per element, but the "
        f"arrays hold n = {n}: {n - blocks * threads} elements would never be written. "
        f"Launch enough blocks: kernel[blocks_for(n, {threads}), {threads}](...)."
    )


class FusedLaunch:
    """``kernel[blocks, threads]``: checks the arguments, then launches the kernel once."""

    def __init__(self, fused: FusedKernel, launch_config: Any) -> None:
        self.fused, self.launch_config = fused, launch_config

    def __call__(self, *args: Any) -> None:
        arguments = self.fused.checked_arguments(args, self.launch_config)
        self.fused.kernel[self.launch_config](*arguments)


def fuse(fn: Callable[..., Any], scalars: Iterable[str] | str = (), name: str = "fused") -> FusedKernel:
    """One checked ``@cuda.jit`` kernel computing ``fn`` elementwise; its source is ``kernel.source``.

    ``scalars`` names the parameters that are numbers: a tuple such as ``("s", "k")``, or one string (``"s, k"``).
    """
    check_kernel_name(name)
    names = scalar_names(scalars)
    params, result = _trace(fn, names)
    source = _emit(params, result, name)
    return FusedKernel(compile_source(source, name), source, params, names, name, nonzero=divisor_scalars(result))
