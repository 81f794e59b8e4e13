"""Lesson 06: a small fuser of elementwise expressions, against torch.compile (notebook 06_drawing_the_boundary)."""

NOTEBOOKS = ("06_drawing_the_boundary",)
GPU_STEPS = ("06_fuser",)
RESULTS = ("fuser_vs_torch_compile",)
