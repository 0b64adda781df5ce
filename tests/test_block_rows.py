"""Rows per block for a memory budget (``dkernel._budget``), against a search for the answer."""

from __future__ import annotations

import numpy as np
import pytest

from dkernel import _budget
from dkernel._budget import rows_for_budget


def _largest(fits) -> int:
    """The largest r >= 0 with fits(r), for a predicate that holds up to some r and no further."""
    lo, hi = 0, 1
    while fits(hi):
        lo, hi = hi, 2 * hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo


def _reference(budget, n_columns, itemsize, low=1, high=None):
    if n_columns is None:
        rows = _largest(lambda r: r * r * itemsize <= budget)
    else:
        rows = _largest(lambda r: r * max(1, n_columns) * itemsize <= budget)
    if high is not None:
        rows = min(rows, high)
    return max(low, rows)


BUDGETS = [
    _budget.SWEEP_BLOCK_BYTES,
    _budget.REDUCED_BLOCK_BYTES,
    _budget.SCRATCH_BLOCK_BYTES,
    _budget.KERNEL_BLOCK_BYTES,
    _budget.CHUNK_BYTES,
    _budget.STRIP_PIXELS,
    1,
    10,
    12_345_678,
]


@pytest.mark.parametrize("budget", BUDGETS)
@pytest.mark.parametrize("itemsize", [1, 2, 4, 8, 16])
def test_rows_match_a_search(budget, itemsize):
    rng = np.random.default_rng(budget % 1000 + itemsize)
    columns = [None, 0, 1, 2, 3, 7, 1000, 4096, 10**6, 10**9]
    columns += [int(c) for c in rng.integers(1, 10**7, 40)]
    for c in columns:
        for low, high in [(1, None), (16, 65536), (256, 2**20), (64, 10_000), (1, 5)]:
            got = rows_for_budget(budget, c, itemsize, low=low, high=high)
            assert type(got) is int
            assert got == _reference(budget, c, itemsize, low, high), (c, low, high)


def test_named_budgets_are_pinned():
    # the block sizes shape the BLAS calls and so the last bits of results: a change here
    # changes every stored result computed with it
    assert _budget.SWEEP_BLOCK_BYTES == 16 * 2**20
    assert _budget.REDUCED_BLOCK_BYTES == 4 * 2**20
    assert _budget.SCRATCH_BLOCK_BYTES == 32 * 2**20
    assert _budget.KERNEL_BLOCK_BYTES == 64 * 2**20
    assert _budget.CHUNK_BYTES == 128 * 2**20
    assert _budget.STRIP_PIXELS == 2**18


def test_low_wins_over_high():
    assert rows_for_budget(100, 10**6, 8, low=16, high=4) == 16
