"""Arrays persisted on a job's workers (:mod:`dkernel.runtime.persist`)."""

from __future__ import annotations

import dask.array as da
import numpy as np

from dkernel.runtime.persist import persist_spread


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
