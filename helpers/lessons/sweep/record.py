"""The records the size sweep writes (``bench_sweep.json``, ``launch_overhead.json``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from helpers.results import Claim, Record


@dataclass
class SweepSettings:
    sizes: list[int]
    repeats: int
    warmup: int
    dtype: str
    block_size: int
    l2_bytes: int | None
    modes: dict[str, str]
    cache_policy: str
    verification: str
    s: float = 0.0


@dataclass
class PipelineTraffic:
    """What the ledger counted for one pipeline (or, for the copy, the model)."""

    launches: int
    trips: int
    bytes_per_element: float
    working_set_per_element: float
    round_trips: list[str]
    counted_by: str


@dataclass
class ImplementationInfo:
    key: str
    device: str  # "gpu" or "cpu"
    traffic: str  # the counted pipeline it shares its memory traffic with
    note: str
    bytes_per_element: float
    working_set_per_element: float
    status: str = "ok"  # "ok", "skipped" or "failed"
    reason: str | None = None
    setup_s: float = 0.0


@dataclass
class Verification:
    implementation: str
    n: int
    passed: bool
    poisoned: bool = True
    error: str | None = None


@dataclass
class Measurement:
    implementation: str
    n: int
    mode: str
    median_ms: float
    iqr_ms: float
    samples_ms: list[float]
    hold_us: float | None = None


@dataclass(kw_only=True)
class Sweep(Record, schema="bench_sweep", version=2):
    """The size sweep of ``out = (a + b) * c / s``: every sample, and what was checked."""

    benchmark: str
    simulated: bool
    note: str
    complete: bool
    settings: SweepSettings
    pipelines: dict[str, PipelineTraffic]
    implementations: dict[str, ImplementationInfo] = field(default_factory=dict)
    verification: list[Verification] = field(default_factory=list)
    measurements: list[Measurement] = field(default_factory=list)
    regimes: dict[str, dict[str, dict[int, str]]] = field(default_factory=dict)
    claims: list[Claim] = field(default_factory=list)
    elapsed_s: float | None = None


@dataclass
class LauncherCost:
    issue_us: float
    with_sync_us: float
    launch_and_wait_us: float
    issue_samples_us: list[float]
    launch_and_wait_samples_us: list[float]


@dataclass(kw_only=True)
class LaunchOverhead(Record, schema="launch_overhead", version=2):
    """Host cost of one launch, per launcher."""

    simulated: bool
    note: str
    n: int = 0
    launches_per_burst: int = 0
    repeats: int = 0
    launchers: dict[str, LauncherCost] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
