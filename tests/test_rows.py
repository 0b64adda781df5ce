"""take_rows: rows of NumPy and Dask arrays; delayed_array."""

import numpy as np


def test_take_rows_matches_fancy_indexing_and_keeps_the_order_given():
    import dask.array as da

    from dkernel.rows import take_rows

    X = np.arange(200.0).reshape(100, 2)
    Xd = da.from_array(X, chunks=(7, 2))
    idx = np.array([93, 5, 6, 50, 0, 99, 6])
    for source in (X, Xd, da.from_array(X, chunks=(7, 1)), da.from_array(X[:, 0], chunks=9)):
        if source.ndim == 1:
            np.testing.assert_array_equal(take_rows(source, idx), X[idx, 0])
            continue
        np.testing.assert_array_equal(take_rows(source, idx), X[idx])
    assert take_rows(Xd, idx, np.float32).dtype == np.float32
    assert take_rows(Xd, np.array([], dtype=int)).shape == (0, 2)


def test_take_rows_computes_only_the_chunks_that_hold_the_rows():
    import dask
    import dask.array as da

    from dkernel.rows import take_rows

    def chunk(i: int) -> np.ndarray:
        if i not in (0, 5):
            raise AssertionError(f"chunk {i} holds none of the rows")
        return np.full((1000, 3), float(i))

    X = da.concatenate(
        [da.from_delayed(dask.delayed(chunk)(i), (1000, 3), float) for i in range(10)]
    )
    np.testing.assert_array_equal(take_rows(X, np.array([5010, 10]))[:, 0], [5.0, 0.0])


def test_delayed_array_joins_the_blocks_and_leaves_numpy_alone():
    import dask
    import dask.array as da
    from dask.delayed import Delayed

    from dkernel.rows import delayed_array

    x = np.arange(60.0).reshape(3, 4, 5)
    d = delayed_array(da.from_array(x, chunks=(2, 3, 2)))
    assert isinstance(d, Delayed)
    np.testing.assert_array_equal(dask.compute(d, scheduler="sync")[0], x)
    assert delayed_array(x) is x
