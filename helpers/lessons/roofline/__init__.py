"""Lesson 07: the fused kernel's variants toward the memory roofline, and the ceiling per read/write mix (notebook 07_the_last_fifteen_percent)."""

NOTEBOOKS = ("07_the_last_fifteen_percent",)
GPU_STEPS = ("07_roofline",)
RESULTS = ("roofline",)
