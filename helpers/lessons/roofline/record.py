"""The record of notebook 07's benchmark (``roofline.json``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from helpers.results import Claim, Record


@dataclass
class Timed:
    """One kernel at one size: checked, then timed (GPU time, median of ``repeats``)."""

    median_ms: float | None = None
    iqr_ms: float | None = None
    repeats: int | None = None
    gbs: float | None = None
    bitwise_equal: bool | None = None
    registers: int | None = None
    error: str | None = None


@dataclass
class RooflineRun:
    """Every variant, the copy and the 3-read/1-write streaming kernels at one size."""

    copy: Timed
    variants: dict[str, Timed] = field(default_factory=dict)
    stream3: Timed | None = None
    torch_compile: Timed | None = None
    stream3_torch_compile: Timed | None = None

    def best_streaming_gbs(self) -> float | None:
        """The series' *best measurement* for this read/write mix: the faster 3:1 streaming kernel."""
        rates = [t.gbs for t in (self.stream3, self.stream3_torch_compile) if t is not None and t.gbs]
        return max(rates) if rates else None

    def fastest_variant(self) -> str | None:
        timed = {k: v.median_ms for k, v in self.variants.items() if v.median_ms is not None and v.bitwise_equal}
        return min(timed, key=timed.__getitem__) if timed else None

    def percent_of_best(self, entry: Timed) -> float | None:
        best = self.best_streaming_gbs()
        return None if best is None or entry.gbs is None else 100 * entry.gbs / best


@dataclass(kw_only=True)
class Roofline(Record, schema="roofline", version=2):
    """Notebook 07's run: each fused variant against torch.compile and the 3:1 streaming kernels."""

    expression: str
    dtype: str
    s: float
    bytes_per_element: int
    sizes: list[int]
    runs: dict[int, RooflineRun]
    best_variant: str | None = None
    claims: list[Claim] = field(default_factory=list)
