"""Lesson 08: host-device copies, and two GPUs (notebook 08_one_order_out)."""

NOTEBOOKS = ("08_one_order_out",)
GPU_STEPS = ("08_transfers", "08_two_gpus")
RESULTS = ("transfers",)
