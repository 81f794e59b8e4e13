"""Lesson 14: a fused AdamW step (notebook 14_a_fused_optimizer_step)."""

NOTEBOOKS = ("14_a_fused_optimizer_step",)
GPU_STEPS = ("14_optimizer",)
RESULTS = ("reductions_adamw",)
