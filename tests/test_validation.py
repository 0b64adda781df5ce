"""Shared validation helpers."""

import numpy as np

from dkernel._validation import aligned


def _unaligned_copy(a: np.ndarray) -> np.ndarray:
    buf = np.empty(a.nbytes + a.itemsize, dtype=np.uint8)
    out = buf[1 : 1 + a.nbytes].view(a.dtype).reshape(a.shape)
    out[...] = a
    return out


def test_aligned_restores_blas_rounding_for_arrays_at_odd_offsets():
    # what dask.distributed can hand back: the same values at an odd byte offset
    F = np.random.default_rng(0).normal(size=(4, 200)) * 1e3
    G = _unaligned_copy(F)
    assert not G.flags.aligned  # NumPy multiplies it with its own loop, which may round
    H = aligned(G)
    assert H.flags.aligned and np.array_equal(F @ F.T, H @ H.T)


def test_aligned_passes_aligned_arrays_and_non_arrays_through():
    F = np.ones((3, 2))
    assert aligned(F) is F
    assert aligned([1, 2]) == [1, 2]
