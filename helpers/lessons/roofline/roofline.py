"""The names notebook 07 reads as ``roofline.<name>`` (``from helpers.lessons.roofline import roofline``);
each is defined in the module it is imported from here."""

from helpers.device import resident_blocks_per_sm

from .evidence import evidence_line, ptx_evidence
from .kernels import (CUDA_C_SOURCE, VARIANT_INFO, VARIANTS, MisalignedArray, grid_stride_kernel, ilp4_kernel,
                      linked_cuda_c_kernel, streaming_kernel, vec4_kernel)
from .measure import benchmark
from .record import Roofline
from .report import plot_roofline

__all__ = ["CUDA_C_SOURCE", "MisalignedArray", "Roofline", "VARIANTS", "VARIANT_INFO", "benchmark", "evidence_line",
           "grid_stride_kernel", "ilp4_kernel", "linked_cuda_c_kernel", "plot_roofline", "ptx_evidence",
           "resident_blocks_per_sm", "streaming_kernel", "vec4_kernel"]
