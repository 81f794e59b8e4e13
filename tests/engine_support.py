"""Follow every thread of a launch one by one: the reference the block-range count is tested against.

The same engine as the ledger's count (:mod:`helpers.counting.ptx.machine`), in the
exact value domain, over chunks of whole blocks instead of block ranges.  Slow, and
only the tests use it (tests/test_ptx.py, tests/test_corpus.py).
"""

from __future__ import annotations

from math import prod
from typing import Sequence

import numpy as np

from helpers.counting.ptx.machine import ElementCounts, Machine, dims3, distinct_counts, specials
from helpers.counting.ptx.parse import parse
from helpers.counting.ptx.values import Ranged
from helpers.counting.record import LaunchArgs

CHUNK = 1 << 17  # threads followed at once


class Exact(Ranged):
    """Every value known, lane by lane: one block's range whose lanes may be in any blocks (``blocks``)."""

    def __init__(self, blocks: np.ndarray) -> None:
        super().__init__(blocks.size, 0, 0)
        self.blocks = blocks

    def block(self, lanes: np.ndarray) -> np.ndarray:
        return self.blocks[lanes]


def emulate_threads(ptx: str, launch: LaunchArgs, grid: Sequence[int], block: Sequence[int],
                    kernel: str) -> ElementCounts:
    """The count of :func:`helpers.counting.ptx.machine.emulate`, following every thread with exact values."""
    g, b = dims3(grid), dims3(block)
    program = parse(ptx)
    threads, per_block = prod(g) * prod(b), prod(b)
    chunk = max(per_block, (CHUNK // per_block) * per_block)  # whole blocks per chunk
    total = ElementCounts()
    for first in range(0, threads, chunk):
        flat = np.arange(first, min(first + chunk, threads), dtype=np.int64)
        blocks = flat // per_block
        domain = Exact(blocks)
        ctaid = [domain.lift(v) for v in (blocks % g[0], (blocks // g[0]) % g[1], blocks // (g[0] * g[1]))]
        machine = Machine(program, launch, kernel, domain, specials(domain, flat % per_block, ctaid, g, b))
        total.add(distinct_counts(machine.run(), len(launch.args)))
    return total
