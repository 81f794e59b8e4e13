"""Lesson 12: a fused AdamW step (notebook 12_a_fused_optimizer_step)."""

NOTEBOOKS = ("12_a_fused_optimizer_step",)
GPU_STEPS = ("12_optimizer",)
RESULTS = ("reductions_adamw",)
