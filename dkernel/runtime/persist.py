"""Dask arrays held on the job's workers (or in this process's memory without a cluster)."""

from __future__ import annotations

from typing import Any


def persist(X: Any, client: Any) -> Any:
    """``X`` persisted on ``client``'s cluster, or in this process's memory (``client`` None:
    Dask's configured scheduler computes it)."""
    if client is None:
        import dask

        return dask.persist(X)[0]
    return client.persist(X)


#: ``distributed``'s setting for the size of a graph above which ``Client.persist`` and
#: ``compute`` warn ("Sending large graph ... Consider loading the data with Dask directly").
LARGE_GRAPH_SETTING = "distributed.admin.large-graph-warning-threshold"


def graphs_may_carry(nbytes: int) -> Any:
    """A context in which ``distributed`` sends graphs up to ``nbytes`` beyond its threshold
    (:data:`LARGE_GRAPH_SETTING`, 10 MB by default) without its "Sending large graph ...
    Consider loading the data with Dask directly" warning: for graphs that carry in-memory
    data on purpose (the warning's advice does not apply to data already read whole)."""
    import dask
    from dask.utils import parse_bytes

    threshold = parse_bytes(dask.config.get(LARGE_GRAPH_SETTING)) + int(nbytes)
    return dask.config.set({LARGE_GRAPH_SETTING: threshold})


def rows_in_memory(X: Any, rows: int | tuple[int, ...] | str, client: Any) -> Any:
    """In-memory ``X`` (rows along its first axis) as a Dask array of ``rows``-row chunks
    under keys of its own (``rows`` a tuple: those chunks; ``'auto'``: Dask's size), sent to
    ``client``'s workers once (``client`` None: chunks that are views of ``X``).

    A Dask array made by ``da.from_array`` carries its data in its graph: computed on a
    ``distributed`` cluster it is sent again with every computation (each pass of an
    iterative method), and ``distributed`` warns of the graph's size each time. Persisted,
    it is sent once, through the scheduler, which keeps each chunk's data so that a chunk
    lost with its worker is made again (a scatter would lose it); ``distributed``'s warning
    is not raised for that one deliberate send, whose size is the data's. Tasks computed
    from persisted chunks are not root tasks, which the scheduler would start a few at a
    time: for a wide result per chunk use ``dkernel.runtime.shared.shared_rows``.
    """
    import dask.array as da

    Xd = da.from_array(X, chunks=(rows,) + (-1,) * (X.ndim - 1), name=False)
    if client is None:
        return Xd
    with graphs_may_carry(X.nbytes):
        return client.persist(Xd)


def persist_spread(X: Any, client: Any) -> Any:
    """``X`` (a Dask array) persisted on ``client``'s workers with its row chunks dealt out in
    turn (chunk i on worker i mod W; another worker only if that one is gone).

    Every later pass over a persisted array runs where its chunks are, so the placement of
    the persist decides each pass's balance. Left to the scheduler, a persist of quick reads
    lands where workers happen to be free first: 12 of an MSSC scene's 16 strips on one of 2
    workers, and the mean-shift pass then ran at 1.23× instead of near 2×.
    """
    import dask.array as da

    workers = sorted(client.scheduler_info()["workers"]) if client is not None else []
    n = int(X.numblocks[0])
    if len(workers) < 2 or n < 2:
        return persist(X, client)
    if any(k > 1 for k in X.numblocks[1:]):
        X = X.rechunk({axis: -1 for axis in range(1, X.ndim)})
    blocks: list[Any] = [None] * n
    for j, worker in enumerate(workers):
        mine = list(range(j, n, len(workers)))
        held = client.persist(
            [X.blocks[i] for i in mine], workers=[worker], allow_other_workers=True
        )
        for i, block in zip(mine, held, strict=True):
            blocks[i] = block
    return da.concatenate(blocks, axis=0)


def with_own_keys(X: Any) -> Any:
    """``X`` (a Dask array) under keys of its own, for persisting.

    A reader's keys hash the file and its options, so two jobs on the same data share them; on
    one scheduler the client of the job before, releasing them as it closes, raced with this
    job's persist of the same keys (``FutureCancelledError: lost dependencies``).
    """
    import uuid

    import numpy as np

    return X.map_blocks(np.asarray, dtype=X.dtype, name=f"dkernel-{uuid.uuid4().hex}")
