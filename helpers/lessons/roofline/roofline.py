"""Notebook 07's names in one namespace, as the notebook and the lessons that build on it import them.

``from helpers.lessons.roofline import roofline`` gives the variants and their kernels
(:mod:`.kernels`), their compiled evidence (:mod:`.evidence`), the benchmark and its claims
(:mod:`.measure`), its record (:mod:`.record`) and its figure (:mod:`.report`), and the
occupancy arithmetic the variants' grids use (:mod:`helpers.device`).  New code imports
each name from the module that defines it.
"""

from __future__ import annotations

from helpers.device import registers_per_thread, resident_blocks_per_sm

from . import kernels
from .evidence import Evidence, evidence_line, ptx_evidence
from .kernels import (
    CUDA_C_SOURCE,
    DEFAULT_BEST,
    SCALAR_FALLBACK,
    VARIANT_INFO,
    VARIANTS,
    VECTOR_BYTES,
    MisalignedArray,
    Variant,
    best_fused,
    best_variant_name,
    grid_stride_kernel,
    ilp4_kernel,
    linked_cuda_c_kernel,
    load4,
    load4_cs,
    require_aligned,
    resident_grid,
    run_linked_cuda_c,
    run_naive,
    run_stream3,
    store4,
    store4_cs,
    stream3_kernel,
    streaming_kernel,
    vec4_kernel,
    vec4_streaming_kernel,
)
from .measure import BENCH_SIZES, CHECK_SIZES, benchmark, summarize
from .record import Roofline, RooflineRun, Timed
from .report import NEAR_BEST_PERCENT, plot_roofline

