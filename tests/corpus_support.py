"""The corpus of kernel shapes (tests/corpus/shapes.py), loaded once for every test module that uses it.

The corpus is loaded by path, as ``python -m helpers.lessons.dram corpus`` loads it, so that it
stays a file of kernels written outside the project (it imports nothing from tests/).
"""

from __future__ import annotations

from pathlib import Path

from helpers.lessons.dram.measure import load_shapes

CORPUS = Path(__file__).resolve().parent / "corpus" / "shapes.py"

shapes = load_shapes(str(CORPUS))
