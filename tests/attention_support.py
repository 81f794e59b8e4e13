"""Inputs and an error measure for the attention tests (tests/test_attention.py, tests/test_attention_tiled.py)."""

from __future__ import annotations

import numpy as np


def inputs(heads: int, length: int, d: int, seed: int | None = None) -> list[np.ndarray]:
    """Q, K and V: three (heads, length, d) float32 arrays of standard normals drawn from ``seed`` (None: fresh
    ones each call)."""
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((heads, length, d)).astype(np.float32) for _ in range(3)]


def relative_error(got: np.ndarray, want: np.ndarray) -> float:
    """The largest difference between ``got`` and ``want``, over the largest magnitude in ``want``."""
    return float(np.max(np.abs(got - want)) / np.max(np.abs(want)))
