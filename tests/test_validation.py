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


def test_take_rows_matches_fancy_indexing_and_keeps_the_order_given():
    import dask.array as da

    from dkernel._validation import take_rows

    X = np.arange(200.0).reshape(100, 2)
    Xd = da.from_array(X, chunks=(7, 2))
    idx = np.array([93, 5, 6, 50, 0, 99, 6])
    for source in (X, Xd):
        np.testing.assert_array_equal(take_rows(source, idx), X[idx])
    assert take_rows(Xd, idx, np.float32).dtype == np.float32
    assert take_rows(Xd, np.array([], dtype=int)).shape == (0, 2)


def test_take_rows_computes_only_the_chunks_that_hold_the_rows():
    import dask
    import dask.array as da

    from dkernel._validation import take_rows

    def chunk(i: int) -> np.ndarray:
        if i not in (0, 5):
            raise AssertionError(f"chunk {i} holds none of the rows")
        return np.full((1000, 3), float(i))

    X = da.concatenate(
        [da.from_delayed(dask.delayed(chunk)(i), (1000, 3), float) for i in range(10)]
    )
    np.testing.assert_array_equal(take_rows(X, np.array([5010, 10]))[:, 0], [5.0, 0.0])
