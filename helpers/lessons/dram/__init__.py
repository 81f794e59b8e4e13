"""Lesson 04: Nsight Compute's DRAM bytes beside the ledger's count (notebook 04_counting_the_trips)."""

NOTEBOOKS = ("04_counting_the_trips",)
GPU_STEPS = ("04_dram", "04_dram_corpus")
RESULTS = ("ncu_dram", "ncu_corpus")
