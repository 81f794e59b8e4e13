"""What the compiler made of each roofline variant: its PTX, its widest loads and stores, its registers.

Compiled once per compute capability with the real compiler and cached, so the same evidence shows on any machine.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numba_cuda
from numba import cuda
from numba.core import types

from helpers.backend import is_simulator
from helpers.counting.other_backend import COMPILER, OtherBackendError, run_under
from helpers.counting.ptx import access_bytes, cache_dir, cached
from helpers.validate import kernel_function

from . import kernels
from .kernels import CUDA_C_SOURCE, VARIANT_INFO, stream3_kernel

_LOAD_STORE_RE = re.compile(r"^\s*(?:@%p\d+\s+)?((?:ld|st)\.(?:global|local)?[\w.]*|(?:ld|st)\.v\d[\w.]*)\s", re.M)
_CALL_RE = re.compile(r"\bcall(?:\.uni)?\b")


@dataclass(frozen=True)
class Evidence:
    """What the compiler made of one variant (PTX for cc ``cc``)."""

    name: str
    ptx: str
    opcodes: dict[str, int]  # global/local load and store opcodes -> how many in the PTX
    calls: int  # call instructions in the unlinked PTX (the linked variant's; LTO should inline it)
    registers: int | None  # ptxas's count through nvJitLink with LTO (as cuda.jit links), when available
    linked_ptx: str | None = None  # the CUDA C function's PTX (NVRTC), for the linked variant

    @property
    def widest_load_bytes(self) -> int:
        return max((access_bytes(op) for op in self._all_opcodes() if op.startswith("ld.")), default=0)

    @property
    def widest_store_bytes(self) -> int:
        return max((access_bytes(op) for op in self._all_opcodes() if op.startswith("st.")), default=0)

    def _all_opcodes(self) -> list[str]:
        extra = list(_opcode_counts(self.linked_ptx)) if self.linked_ptx else []
        return list(self.opcodes) + extra

    def vector_opcodes(self) -> list[str]:
        """The distinct 16-byte global opcodes, in this kernel or the function it links."""
        return sorted({op for op in self._all_opcodes() if ".v4." in op and ".param" not in op})


def _opcode_counts(ptx: str) -> dict[str, int]:
    body = ptx[ptx.find("{", max(ptx.find(".entry"), ptx.find(".func"))):]
    counts: dict[str, int] = {}
    for op in _LOAD_STORE_RE.findall(body):
        if op.startswith(("ld.param", "st.param")):
            continue
        counts[op] = counts.get(op, 0) + 1
    return dict(sorted(counts.items()))


def _source_fingerprint() -> str:
    """What the cached evidence depends on: the kernels' source, this module, the CUDA C, numba-cuda's version."""
    digest = hashlib.sha256()
    for path in (Path(kernels.__file__), Path(__file__), CUDA_C_SOURCE):
        digest.update(path.read_bytes())
    digest.update(str(getattr(numba_cuda, "__version__", "")).encode())
    return digest.hexdigest()[:24]


def cuda_c_ptx(cc: tuple[int, int] = (9, 0)) -> str:
    """PTX of :data:`CUDA_C_SOURCE` from NVRTC (no GPU or driver needed)."""
    return _nvrtc(cc, lto=False).decode().rstrip("\x00")


def _nvrtc(cc: tuple[int, int], lto: bool) -> bytes:
    """:data:`CUDA_C_SOURCE` compiled by NVRTC: its PTX, or with ``lto`` its LTO-IR (what numba-cuda links)."""
    from cuda.bindings import nvrtc  # optional: without NVRTC only the linked variant's evidence is missing

    source = CUDA_C_SOURCE.read_bytes()
    err, program = nvrtc.nvrtcCreateProgram(source, CUDA_C_SOURCE.name.encode(), 0, [], [])
    _nvrtc_ok(nvrtc, err, "create")
    options = [f"--gpu-architecture={'sm' if lto else 'compute'}_{cc[0]}{cc[1]}".encode(),
               b"--relocatable-device-code=true"] + ([b"-dlto"] if lto else [])
    (err,) = nvrtc.nvrtcCompileProgram(program, len(options), options)
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        _, size = nvrtc.nvrtcGetProgramLogSize(program)
        log = b" " * size
        nvrtc.nvrtcGetProgramLog(program, log)
        raise RuntimeError(f"NVRTC could not compile {CUDA_C_SOURCE.name}: {log.decode(errors='replace')}")
    get_size, get = ((nvrtc.nvrtcGetLTOIRSize, nvrtc.nvrtcGetLTOIR) if lto
                     else (nvrtc.nvrtcGetPTXSize, nvrtc.nvrtcGetPTX))
    err, size = get_size(program)
    _nvrtc_ok(nvrtc, err, "size")
    buffer = b" " * size
    (err,) = get(program, buffer)
    _nvrtc_ok(nvrtc, err, "get the output")
    nvrtc.nvrtcDestroyProgram(program)
    return buffer


def _nvrtc_ok(nvrtc: Any, err: Any, step: str) -> None:
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise RuntimeError(f"NVRTC failed at {step}: {err}")


def _ptxas_registers(function: Any, signature: tuple[Any, ...], linked: list[bytes], cc: tuple[int, int]) -> int | None:
    """ptxas's register count for the kernel ``function``, its LTO-IR (and ``linked``'s) linked by nvJitLink with
    link-time optimization, as ``cuda.jit`` links a kernel by default where nvJitLink is installed (numba-cuda's
    ``cuda.jit`` docstring, its ``lto`` option); no GPU needed.

    The compiled evidence is read where there is no GPU (the simulator), so it cannot ask a
    compiled kernel as :func:`helpers.device.registers_per_thread` does.
    """
    kernel_name = function.__name__
    try:
        from cuda.bindings import nvjitlink  # optional: without it the count is missing, not the evidence

        lto, _ = cuda.compile(function, signature, device=False, abi="numba", output="ltoir", cc=cc)
        lto_parts = [lto, *linked]
        options = [f"-arch=sm_{cc[0]}{cc[1]}", "-lto", "-verbose"]
        handle = nvjitlink.create(len(options), options)
        for k, data in enumerate(lto_parts):
            nvjitlink.add_data(handle, nvjitlink.InputType.LTOIR, data, len(data), f"part{k}.ltoir")
        nvjitlink.complete(handle)
        size = nvjitlink.get_info_log_size(handle)
        log = bytearray(size)
        nvjitlink.get_info_log(handle, log)
        nvjitlink.destroy(handle)
    except Exception:  # nvJitLink is optional: the count is extra evidence, not a requirement
        return None
    text = log.decode(errors="replace")
    for block in re.split(r"Function properties for ", text)[1:]:
        name = block.split("'")[1] if "'" in block else block.split(":")[0]
        m = re.search(r"used (\d+) registers", block, re.I)
        if m and kernel_name in name:
            return int(m.group(1))
    return None


def _compile_all(cc: tuple[int, int]) -> dict[str, dict[str, Any]]:
    """Compile every variant (and the ceiling probe) with the real compiler; needs no GPU."""
    array = types.Array(types.float32, 1, "C")
    signature = (array, array, array, types.float32, array)
    try:
        linked: str | None = cuda_c_ptx(cc)
    except Exception:  # NVRTC missing: the linked variant's evidence is then incomplete
        linked = None
    try:
        linked_lto = [_nvrtc(cc, lto=True)]
    except Exception:  # likewise: then only its register count is missing
        linked_lto = []
    compiled = {name: v.kernel for name, v in VARIANT_INFO.items()}
    compiled["stream3"] = stream3_kernel
    out: dict[str, dict[str, Any]] = {}
    for name, kernel in compiled.items():
        function = kernel_function(kernel)
        ptx, _ = cuda.compile_ptx(function, signature, cc=cc)
        is_linked = name == "linked_cuda_c"
        if is_linked and not linked_lto:
            registers = None  # its CUDA C function would be missing from the link
        else:
            registers = _ptxas_registers(function, signature, linked_lto if is_linked else [], cc)
        out[name] = {
            "ptx": ptx,
            "registers": registers,
            "linked_ptx": linked if is_linked else None,
        }
    return out


def compile_request(request: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """:func:`_compile_all` for ``request["cc"]`` (run with the real compiler by ``other_backend``)."""
    return _compile_all(tuple(request["cc"]))


def _compile_here_or_there(cc: tuple[int, int]) -> str:
    """:func:`_compile_all` as JSON, in a subprocess with the real compiler when this process runs the simulator."""
    if not is_simulator():
        return json.dumps(_compile_all(cc))
    try:
        return json.dumps(run_under(COMPILER, "helpers.lessons.roofline.evidence:compile_request", {"cc": list(cc)}))
    except OtherBackendError as exc:
        raise RuntimeError(f"compiling the roofline kernels to PTX failed: {exc}") from exc


@lru_cache(maxsize=4)
def _compiled(cc: tuple[int, int]) -> dict[str, dict[str, Any]]:
    path = Path(cache_dir()) / f"roofline-{_source_fingerprint()}-sm{cc[0]}{cc[1]}.json"
    return json.loads(cached(path, lambda: _compile_here_or_there(cc)))  # type: ignore[no-any-return]


def ptx_evidence(name: str, cc: tuple[int, int] = (9, 0)) -> Evidence:
    """The compiled evidence for one variant (or ``"stream3"``), for compute capability ``cc``.

    Fixed at cc (9, 0) by default so the answer is the same on a GPU and in the simulator.
    """
    compiled = _compiled(tuple(cc))
    if name not in compiled:
        raise KeyError(f"no variant named {name!r}; choose from {', '.join(compiled)}")
    entry = compiled[name]
    return Evidence(
        name=name,
        ptx=entry["ptx"],
        opcodes=_opcode_counts(entry["ptx"]),
        calls=len(_CALL_RE.findall(entry["ptx"])),
        registers=entry["registers"],
        linked_ptx=entry["linked_ptx"],
    )


def evidence_line(name: str, cc: tuple[int, int] = (9, 0)) -> str:
    """One backend-independent line: the widest load and store and the vector opcodes."""
    ev = ptx_evidence(name, cc)
    vector = ", ".join(ev.vector_opcodes()) or "none"
    where = " (in the linked CUDA C)" if ev.linked_ptx and ev.vector_opcodes() else ""
    return (f"{name:15s} widest load {ev.widest_load_bytes:2d} B, widest store {ev.widest_store_bytes:2d} B; "
            f"16-byte opcodes: {vector}{where}")
