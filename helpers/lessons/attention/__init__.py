"""Lesson 11: FlashAttention-style attention: S and P never reach memory (notebook 11_fusing_through_a_reduction)."""

NOTEBOOKS = ("11_fusing_through_a_reduction",)
GPU_STEPS = ("11_attention",)
RESULTS = ("reductions_attention", "reductions_attention_ncu")
