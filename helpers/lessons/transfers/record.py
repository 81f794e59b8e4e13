"""The records of lesson 08 (``transfers.json``, ``two_gpus.json``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from helpers.results import Record


@dataclass
class PipelineOnHost:
    """The pipeline on host arrays (implicit copies) against the same kernels on device arrays."""

    n: int
    median_ms: dict[str, float]
    spread_ms: dict[str, float]


@dataclass(kw_only=True)
class Transfers(Record, schema="transfers", version=2):
    """GB/s against copy size for each kind of copy, and the pipeline with and without implicit copies."""

    sizes_bytes: list[int]
    gbs: dict[str, list[float]]
    repeats: int
    pipeline: PipelineOnHost | None = None


@dataclass(kw_only=True)
class TwoGpus(Record, schema="two_gpus", version=1):
    """Every two-GPU figure: the link, peer and staged copies, each GPU's own bandwidths, the split pipeline."""

    devices: list[str]
    link: dict[str, Any]
    peer_access: dict[str, bool]
    nbytes: int
    peer_copy: dict[str, dict[str, Any]]
    staged_copy: dict[str, dict[str, Any]]
    device_copy_gbs: dict[int, dict[str, Any]] = field(default_factory=dict)
    host_link_pinned_gbs: dict[int, dict[str, float]] = field(default_factory=dict)
    split_pipeline: dict[str, Any] | None = None
