"""Lesson 02: the seed's claims: FP32 lanes, the pipes' load, what torch launches (notebooks 02_the_arithmetic_is_not_the_cost, 03_one_fused_kernel)."""

NOTEBOOKS = ("02_the_arithmetic_is_not_the_cost", "03_one_fused_kernel")
GPU_STEPS = ("02_arithmetic",)
RESULTS = ("seed_claims", "fma_sweep")
