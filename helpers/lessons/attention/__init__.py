"""Lesson 12: FlashAttention-style attention: S and P never reach memory (notebook 12_attention_without_the_score_matrix)."""

NOTEBOOKS = ("12_attention_without_the_score_matrix",)
GPU_STEPS = ("12_attention",)
RESULTS = ("reductions_attention", "reductions_attention_ncu")
