"""Objects every worker holds, read by tasks by name (:mod:`dkernel.runtime.shared`)."""

from __future__ import annotations

import pickle

import dask
import numpy as np

from dkernel.runtime.shared import SHARED_PREFIX, Shared, release_shared, share


def _total(handle: Shared) -> float:
    return float(handle.get().sum())


def _shared_on(dask_worker) -> list[str]:
    return sorted(n for n in dask_worker.plugins if n.startswith(SHARED_PREFIX))


def test_without_a_client_the_handle_holds_the_object():
    obj = np.arange(10.0)
    with dask.config.set(scheduler="threads"):  # no distributed client: Dask's threads
        handle = share(obj, "numbers")
    assert handle.get() is obj and not handle.on_workers
    assert handle.name.startswith(SHARED_PREFIX + "numbers-")
    assert pickle.loads(pickle.dumps(handle)).get().sum() == 45.0


def test_every_worker_holds_it_and_tasks_carry_only_its_name(client):
    # the session's cluster may hold objects that estimators of earlier tests shared
    release_shared(client)
    obj = np.arange(2.0**20)  # 8 MiB
    handle = share(obj, "numbers")
    try:
        assert handle.on_workers and len(pickle.dumps(handle)) < 1_000
        workers = sorted(client.scheduler_info()["workers"])
        assert len(workers) == 2
        totals = [client.submit(_total, handle, workers=[w], pure=False).result() for w in workers]
        assert totals == [float(obj.sum())] * 2
        assert all(names == [handle.name] for names in client.run(_shared_on).values())
    finally:
        release_shared(client)
    assert all(names == [] for names in client.run(_shared_on).values())
