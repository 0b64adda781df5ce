"""Arrays persisted on a job's workers (:mod:`dkernel.runtime.persist`)."""

from __future__ import annotations

import warnings

import dask
import dask.array as da
import numpy as np

from dkernel.runtime.persist import LARGE_GRAPH_SETTING, persist_spread, rows_in_memory


def _where(block: np.ndarray) -> np.ndarray:
    from distributed import get_worker

    return np.array([get_worker().address], dtype=object)


def test_row_chunks_are_dealt_out_to_the_workers_in_turn(client):
    values = np.arange(60.0).reshape(20, 3)
    X = da.from_array(values, chunks=((4, 4, 4, 4, 2, 2), (2, 1)))
    held = persist_spread(X, client)
    assert held.chunks == ((4, 4, 4, 4, 2, 2), (3,))
    np.testing.assert_array_equal(held.compute(), values)
    # a task on one chunk runs where the chunk is
    places = held.map_blocks(_where, dtype=object, chunks=((1,) * 6,), drop_axis=1).compute()
    workers = sorted(client.scheduler_info()["workers"])
    assert list(places) == [workers[i % 2] for i in range(6)]


def _graph_warnings(record) -> list[str]:
    return [str(w.message).split("\n")[0] for w in record if "large graph" in str(w.message)]


def test_rows_in_memory_are_sent_to_the_workers_once(client):
    values = np.random.default_rng(0).normal(size=(4000, 8))  # 256 kB
    with dask.config.set({LARGE_GRAPH_SETTING: "64kB"}), warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        held = rows_in_memory(values, 1000, client)
        assert held.chunks == ((1000,) * 4, (8,))
        for _ in range(2):  # every pass reads the workers' copies: its graph is small
            np.testing.assert_array_equal((held * 2).compute(), values * 2)
        # the graph-embedded array distributed warns about, for contrast
        da.from_array(values, chunks=(1000, -1)).sum().compute()
    assert len(_graph_warnings(w)) == 1


def test_rows_in_memory_without_a_client_are_views():
    values = np.arange(60.0).reshape(20, 3)
    held = rows_in_memory(values, 8, None)
    assert held.chunks == ((8, 8, 4), (3,))
    np.testing.assert_array_equal(held.compute(scheduler="sync"), values)
