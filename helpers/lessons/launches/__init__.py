"""Lesson 09: launch cost: CUDA graphs, and the 2 x 2 of launches and bytes (notebook 09_launches_cost_too)."""

NOTEBOOKS = ("09_launches_cost_too",)
GPU_STEPS = ("09_launches",)
RESULTS = ("launches",)
