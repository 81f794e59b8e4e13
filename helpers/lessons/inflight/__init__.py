"""Lesson 10: bytes in flight: the latency-bandwidth model (notebook 10_bytes_in_flight)."""

NOTEBOOKS = ("10_bytes_in_flight",)
GPU_STEPS = ("10_inflight",)
RESULTS = ("bytes_in_flight",)
