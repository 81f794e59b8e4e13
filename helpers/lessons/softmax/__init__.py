"""Lesson 11: softmax fused through a row reduction (notebook 11_fusing_through_a_reduction)."""

NOTEBOOKS = ("11_fusing_through_a_reduction",)
GPU_STEPS = ("11_softmax",)
RESULTS = ("reductions_softmax",)
