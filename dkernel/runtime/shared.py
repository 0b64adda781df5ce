"""Objects every worker holds, read by tasks without being one of their inputs.

A per-chunk task that takes a shared model (mean shift's trajectories, a fitted scorer) as
an input key has two inputs: its chunk, and the model, held by whichever worker computed it.
When those two are on different workers the scheduler may run the task on either, and it
weighs the transfer against the workers' queues: on a fast network it often moves the chunk
to the model (``distributed.scheduler.decide_worker``). Replicating the model does not help:
every worker then holds an input, so every worker is a candidate. :func:`share` puts the
object on every worker once, as a worker plugin (workers that join later get it too), and
returns a :class:`Shared` handle that tasks carry instead; the task's only input is then its
chunk, and it runs where the chunk is.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
from dask.base import tokenize

from dkernel.runtime.progress import active_client

#: Prefix of the worker-plugin names of shared objects (:func:`release_shared`).
SHARED_PREFIX = "dkernel-shared-"


class Shared:
    """A handle to an object: :meth:`get` returns it, in this process or on a worker.

    Pickled (in a task sent to a worker) it carries only its name when the object was put
    on the workers; otherwise it carries the object.
    """

    def __init__(self, name: str, obj: Any, *, on_workers: bool) -> None:
        self.name = name
        self._obj = obj
        self.on_workers = on_workers

    def get(self) -> Any:
        if self._obj is not None:
            return self._obj
        from distributed import get_worker

        return get_worker().plugins[self.name].obj  # type: ignore[attr-defined]

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        if self.on_workers:
            state["_obj"] = None
        return state

    def __dask_tokenize__(self) -> str:
        return self.name


def resolved(x: Any) -> Any:
    """The object behind a :class:`Shared` handle; anything else as it is."""
    return x.get() if isinstance(x, Shared) else x


def with_shared(func: Any) -> Any:
    """``func`` called with the objects behind any :class:`Shared` handles among its
    arguments (for ``map_blocks`` and ``dask.delayed``; task names stay ``func``'s)."""
    return _WithShared(func)


class _WithShared:
    def __init__(self, func: Any) -> None:
        self.func = func
        self.__name__ = getattr(func, "__name__", type(func).__name__)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        args = tuple(resolved(a) for a in args)
        return self.func(*args, **{k: resolved(v) for k, v in kwargs.items()})

    def __dask_tokenize__(self) -> Any:
        return ("with-shared", tokenize(self.func))


def _plugin_type() -> type:
    """The worker plugin that holds a shared object, made on first use: ``distributed`` is
    imported only where a client exists (a small job runs on threads without it). It is
    this module's ``SharedObject``, which is how the workers unpickle it."""
    made = globals().get("SharedObject")
    if made is not None:
        return made
    from distributed import WorkerPlugin

    class SharedObject(WorkerPlugin):
        """Holds an object on every worker, for tasks that read it by name."""

        def __init__(self, obj: Any) -> None:
            self.obj = obj

        def teardown(self, worker: Any) -> None:
            self.obj = None

    SharedObject.__qualname__ = "SharedObject"
    globals()["SharedObject"] = SharedObject
    return SharedObject


def __getattr__(name: str) -> Any:
    if name == "SharedObject":
        return _plugin_type()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def share(obj: Any, what: str = "object", *, unique: bool = False) -> Shared:
    """``obj`` on every worker of the active ``distributed`` client, or in this process when
    there is none (Dask's local schedulers share memory). Costs one copy per worker, sent
    once; release with :func:`release_shared`.

    The handle's name is ``what`` and a hash of ``obj`` (the same object shared twice is one
    plugin); ``unique=True`` names it ``what`` and a random suffix instead, for an object
    shared once whose hash would cost a pass over it (about 1 s per GB of rows).
    """
    suffix = uuid.uuid4().hex if unique else tokenize(obj)
    name = f"{SHARED_PREFIX}{what}-{suffix}"
    client = active_client()
    if client is None:
        return Shared(name, obj, on_workers=False)
    client.register_plugin(_plugin_type()(obj), name=name)
    return Shared(name, obj, on_workers=True)


def unshare(handle: Shared) -> None:
    """Remove the object behind ``handle`` from the workers :func:`share` put it on (nothing
    when it stayed in this process or the client is gone)."""
    if not handle.on_workers:
        return
    client = active_client()
    if client is not None and handle.name in client.run_on_scheduler(_shared_names):
        client.unregister_worker_plugin(handle.name)


@contextmanager
def shared_rows(X: np.ndarray, rows: int | tuple[int, ...]) -> Iterator[Any]:
    """In-memory ``X`` (2-D) as a Dask array of ``rows``-row chunks (a tuple: those chunks,
    to pair with another array's) whose tasks read ``X`` from every worker (:func:`share`,
    sent once), for as long as the context lasts; without a ``distributed`` client, chunks
    that are views of ``X``.

    A ``da.from_array`` carries ``X`` in its graph, which a ``distributed`` cluster is sent
    again with every computation (each pass of an iterative method, with ``distributed``'s
    large-graph warning above 10 MB). Persisted as row chunks it is sent once, but then
    the tasks computed from it are no longer root tasks, which the scheduler starts a few at a
    time per worker: it starts them all, and a wide result per chunk (a feature map) fills
    the workers' memory. Here each chunk is a task with no inputs, fused with what is
    computed from it, so it stays a root task. The price: a copy of ``X`` on every worker,
    and a chunk read where any worker is free (``dkernel.runtime.persist.rows_in_memory``
    keeps each chunk on one worker, for passes that should run where their chunk is).
    """
    import dask.array as da

    client = active_client()
    if client is None:
        yield da.from_array(X, chunks=(rows, -1))
        return
    chunks = da.core.normalize_chunks((rows, -1), X.shape)
    bounds = np.cumsum((0, *chunks[0]))
    handle = share(X, "rows", unique=True)
    try:
        index = da.from_array(np.arange(len(chunks[0])), chunks=1, inline_array=True)
        yield da.blockwise(
            with_shared(_row_block),
            "ij",
            index,
            "i",
            whole=handle,
            bounds=bounds,
            new_axes={"j": X.shape[1]},
            adjust_chunks={"i": chunks[0]},
            dtype=X.dtype,
            meta=np.empty((0, 0), dtype=X.dtype),
        )
    except BaseException:
        # the fit's own error is the one to see, not a failed clean-up after it (a client
        # that died mid-fit); a job's cluster releases what is left when it closes
        with contextlib.suppress(Exception):
            unshare(handle)
        raise
    unshare(handle)


def _row_block(index: np.ndarray, whole: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    i = int(index[0])
    return whole[bounds[i] : bounds[i + 1]]


def release_shared(client: Any) -> None:
    """Remove every object :func:`share` put on ``client``'s workers."""
    names = client.run_on_scheduler(_shared_names)
    for name in names:
        client.unregister_worker_plugin(name)


def _shared_names(dask_scheduler: Any) -> list[str]:
    return [n for n in dask_scheduler.worker_plugins if n.startswith(SHARED_PREFIX)]
