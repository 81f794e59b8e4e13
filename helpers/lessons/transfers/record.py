"""The records of lesson 08 (``transfers.json``, ``two_gpus.json``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from helpers.results import Record


@dataclass
class PipelineOnHost:
    """The pipeline on host arrays (implicit copies) against the same kernels on device arrays."""

    n: int
    median_ms: dict[str, float]
    spread_ms: dict[str, float]


@dataclass(kw_only=True)
class Transfers(Record):
    """GB/s against copy size for each kind of copy, and the pipeline with and without implicit copies."""

    SCHEMA: ClassVar[str] = "transfers"
    VERSION: ClassVar[int] = 2
    sizes_bytes: list[int]
    gbs: dict[str, list[float]]
    repeats: int
    pipeline: PipelineOnHost | None = None


@dataclass(kw_only=True)
class TwoGpus(Record):
    """Every two-GPU figure: the link, peer and staged copies, each GPU's own bandwidths, the split pipeline."""

    SCHEMA: ClassVar[str] = "two_gpus"
    VERSION: ClassVar[int] = 1
    devices: list[str]
    link: dict[str, Any]
    peer_access: dict[str, bool]
    nbytes: int
    peer_copy: dict[str, dict[str, Any]]
    staged_copy: dict[str, dict[str, Any]]
    device_copy_gbs: dict[int, dict[str, Any]] = field(default_factory=dict)
    host_link_pinned_gbs: dict[int, dict[str, float]] = field(default_factory=dict)
    split_pipeline: dict[str, Any] | None = None
