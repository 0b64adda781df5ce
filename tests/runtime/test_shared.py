"""Objects every worker holds, read by tasks by name (:mod:`dkernel.runtime.shared`)."""

from __future__ import annotations

import pickle
import warnings

import dask
import numpy as np

from dkernel.runtime.persist import LARGE_GRAPH_SETTING
from dkernel.runtime.shared import SHARED_PREFIX, Shared, release_shared, share, shared_rows


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


def _rows_on_workers(client) -> list[str]:
    return [n for n in client.run_on_scheduler(_plugins) if n.startswith(SHARED_PREFIX + "rows-")]


def _plugins(dask_scheduler) -> list[str]:
    return list(dask_scheduler.worker_plugins)


def test_shared_rows_are_sent_once_as_root_tasks_and_released(client):
    values = np.random.default_rng(0).normal(size=(4000, 8))  # 256 kB
    with dask.config.set({LARGE_GRAPH_SETTING: "64kB"}), warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with shared_rows(values, 1000) as rows:
            assert rows.chunks == ((1000,) * 4, (8,))
            assert len(_rows_on_workers(client)) == 1
            # every chunk's task has no input (the rows are read on the worker, by name); the
            # only keys with one are the aliases naming the fused tasks
            doubled = rows * 2
            graph = dict(doubled.__dask_optimize__(doubled.dask, doubled.__dask_keys__()))
            assert {type(t).__name__ for t in graph.values() if t.dependencies} == {"Alias"}
            for _ in range(2):
                np.testing.assert_array_equal((rows * 2).compute(), values * 2)
        assert _rows_on_workers(client) == []
    assert not [m for m in w if "large graph" in str(m.message)]


def test_shared_rows_without_a_client_are_views():
    values = np.arange(60.0).reshape(20, 3)
    with dask.config.set(scheduler="threads"), shared_rows(values, 8) as rows:
        assert rows.chunks == ((8, 8, 4), (3,))
        np.testing.assert_array_equal(rows.compute(), values)


def test_an_error_in_the_body_is_the_one_raised_and_the_rows_are_released(client):
    values = np.ones((100, 2))
    try:
        with shared_rows(values, 50) as rows:
            assert len(_rows_on_workers(client)) == 1
            raise KeyError(rows.shape)
    except KeyError as error:
        assert error.args == ((100, 2),)
    assert _rows_on_workers(client) == []


def test_unique_names_skip_hashing_the_object():
    obj = np.arange(10.0)
    with dask.config.set(scheduler="threads"):
        same = share(obj, "numbers").name, share(obj, "numbers").name
        unique = share(obj, "numbers", unique=True).name, share(obj, "numbers", unique=True).name
    assert same[0] == same[1]
    assert unique[0] != unique[1] and all(n.startswith(SHARED_PREFIX + "numbers-") for n in unique)
