"""take_rows: rows of NumPy and Dask arrays; delayed_array; few_distinct_rows."""

import dask.array as da
import numpy as np
import pytest

from dkernel.rows import DISTINCT_PROBE_ROWS, few_distinct_rows


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


def test_chunk_tasks_are_one_layer_and_have_their_chunk_as_only_input():
    import dask
    import dask.array as da

    from dkernel.rows import chunk_tasks

    X = da.from_array(np.arange(60.0).reshape(30, 2), chunks=(7, 1))
    scale = np.array([10.0])
    with dask.config.set(scheduler="sync"):  # no distributed client: the handle holds it
        parts = chunk_tasks(X, lambda b, k, s: b[:k] * s, [4, 0, 2], [(1,), (2,), (3,)], (scale,))
    graph = parts[0].__dask_graph__()
    # the rechunk and the source are X's; one layer of picks, whatever the number of chunks
    assert len(graph.layers) == len(X.rechunk({1: -1}).__dask_graph__().layers) + 1
    # the shared objects are no graph keys (on every worker, or here in this process)
    from dask.core import get_dependencies

    tasks = {k: v for k, v in dict(graph).items() if k in {p.key for p in parts}}
    assert len(tasks) == 3 and all(len(get_dependencies(dict(graph), k)) == 1 for k in tasks)
    got = dask.compute(*parts, scheduler="sync")
    full = np.arange(60.0).reshape(30, 2)
    np.testing.assert_array_equal(got[0], full[28:29] * 10)
    np.testing.assert_array_equal(got[1], full[0:2] * 10)
    np.testing.assert_array_equal(got[2], full[14:17] * 10)


def test_tree_sum_adds_pairwise_in_a_fixed_order():
    import dask

    from dkernel.rows import tree_sum

    def add(a, b):
        return f"({a}+{b})"

    for n in (1, 2, 5, 8):
        parts = [dask.delayed(str)(i) for i in range(n)]
        # the reference: the obvious loop over levels
        expected = [str(i) for i in range(n)]
        while len(expected) > 1:
            nxt = [add(expected[i], expected[i + 1]) for i in range(0, len(expected) - 1, 2)]
            expected = nxt + ([expected[-1]] if len(expected) % 2 else [])
        got = dask.compute(tree_sum(parts, add), scheduler="sync")[0]
        assert got == expected[0], n


def _distinct_reference(X):
    """np.unique's distinct rows, counts and first occurrences, in order of appearance."""
    points, first, counts = np.unique(X, axis=0, return_index=True, return_counts=True)
    order = np.argsort(first)
    return points[order], counts[order], first[order]


@pytest.mark.parametrize("chunks", [None, 1000, 4096, 25_000])
def test_few_distinct_rows_match_numpy_unique_in_any_chunking(chunks):
    rng = np.random.default_rng(1)
    X = np.clip(np.rint(rng.normal(3, 1.0, (25_000, 3))), 1, 5)
    found = few_distinct_rows(X if chunks is None else da.from_array(X, chunks=(chunks, 3)), 500)
    points, counts, first = _distinct_reference(X)
    np.testing.assert_array_equal(found.points, points)
    np.testing.assert_array_equal(found.counts, counts)
    np.testing.assert_array_equal(found.first, first)


def test_few_distinct_rows_give_up_above_the_limit_with_nan_and_on_continuous_data():
    rng = np.random.default_rng(2)
    X = np.rint(rng.normal(0, 3, (30_000, 2)))  # a few hundred distinct rows
    assert few_distinct_rows(X, 1000) is not None
    assert few_distinct_rows(X, 20) is None
    # repeated rows at first, many distinct values after the probed head
    late = np.vstack([np.ones((DISTINCT_PROBE_ROWS, 2)), rng.normal(size=(5000, 2))])
    assert few_distinct_rows(da.from_array(late, chunks=(4000, 2)), 1000) is None
    holed = X.copy()
    holed[-1, 0] = np.nan
    assert few_distinct_rows(da.from_array(holed, chunks=(7000, 2)), 1000) is None
    assert few_distinct_rows(rng.normal(size=(30_000, 4)), 5000) is None


def test_holds_nan_finds_a_nan_outside_the_sample_and_searches_dask_input_once():
    import dask

    from dkernel import rows

    X = np.zeros((3000, 2))
    X[2718, 1] = np.nan
    sample = X[:100]
    assert rows.holds_nan(X, sample) and not rows.holds_nan(X[:100])
    assert not rows.holds_nan(np.arange(6).reshape(3, 2))  # integers hold no NaN
    lazy = da.from_array(X, chunks=(500, 2))
    assert rows.holds_nan(lazy, sample)  # one pass finds what the sample missed
    calls = []

    def count(dsk, keys, **kw):
        calls.append(1)
        return dask.get(dsk, keys, **kw)

    with dask.config.set(scheduler=count):
        assert rows.holds_nan(lazy, sample)  # remembered by the array's name: no second pass
        assert not rows.holds_nan(da.from_array(np.zeros((40, 2)), chunks=10))
    assert len(calls) == 1
    # a NaN in the sample is enough: nothing is computed
    with dask.config.set(scheduler=count):
        assert rows.holds_nan(da.from_array(X, chunks=(700, 2)), X[2700:2800])
    assert len(calls) == 1
