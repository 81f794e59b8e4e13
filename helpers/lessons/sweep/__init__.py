"""Lesson 05: the size sweep, n = 2^10 to 2^28, Numba against its peers (notebook 05_trips_against_runtime)."""

NOTEBOOKS = ("05_trips_against_runtime",)
GPU_STEPS = ("05_sweep",)
RESULTS = ("bench_sweep", "launch_overhead")
