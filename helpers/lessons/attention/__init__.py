"""Lesson 12 (notebook 12_attention_without_the_score_matrix): FlashAttention-style attention, S and P never in memory; and lesson 13 (13_instruction_efficiency): register tiling and tensor cores."""

NOTEBOOKS = ("12_attention_without_the_score_matrix", "13_instruction_efficiency")
GPU_STEPS = ("12_attention",)
RESULTS = ("reductions_attention", "reductions_attention_ncu", "reductions_attention_long")
