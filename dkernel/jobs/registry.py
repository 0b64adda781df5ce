"""Registry of job methods: ``method:`` in a spec names one of these, nothing else runs.

A method module (``dkernel/jobs/steps/<name>.py``, found by :data:`METHODS` on the first lookup:
no list of modules to edit) declares its parameter schema, an optional
cross-check against the data's shape, a cost estimate (checked against the job's limits before
any cluster starts) and ``compute(ctx)``: a generator that fits and yields its results as
typed outputs (:mod:`dkernel.jobs.outputs`: groups, the label or score map, metrics, timings),
which the runner writes as they come. A step never writes; it reads back what was written
through ``ctx.store``, a :class:`StoreView`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dkernel.errors import SpecError
from dkernel.registry import Registry
from dkernel.schema.estimator import EstimatorSchema
from dkernel.schema.params import Param

if TYPE_CHECKING:
    from distributed import Client

    from dkernel.io.data import LoadedData
    from dkernel.jobs.outputs import Output
    from dkernel.jobs.spec import JobSpec
    from dkernel.storage.store import ResultsStore


def chunk_rows_param(
    doc: str = "Rows per Dask chunk of the data (default: about 64 MiB of kernel rows).",
) -> Param:
    """The job-only ``chunk_rows`` parameter of the steps that chunk the data themselves."""
    return Param("chunk_rows", "int", default=None, nullable=True, low=16, doc=doc)


@dataclass(frozen=True)
class Cost:
    """Estimated peak memory (bytes, on one process) and disk (bytes) of a method."""

    memory_bytes: float = 0.0
    disk_bytes: float = 0.0
    what: str = ""
    alternative: str = ""


class StoreView:
    """The reading side of the job's results store: what a step may do with it.

    A step yields its outputs and the runner writes them; a step that continues from what it
    wrote (the stored kernel, the ranking scores, MSSC's scratch partitions) reads it back
    here, lazily.
    """

    def __init__(self, store: ResultsStore) -> None:
        self._store = store

    def read_array(self, group: str, name: str) -> Any:
        """A stored array as a lazy Dask array (:meth:`ResultsStore.read_array
        <dkernel.ResultsStore.read_array>`)."""
        return self._store.read_array(group, name)

    def read_scratch(self, name: str, *, after: Any = None) -> Any:
        """A scratch array as a lazy 1-D Dask array (:meth:`ResultsStore.read_scratch
        <dkernel.ResultsStore.read_scratch>`)."""
        return self._store.read_scratch(name, after=after)


@dataclass
class JobContext:
    """Everything a method's ``compute`` reads.

    Attributes
    ----------
    spec : JobSpec
        The validated spec (``spec.limits`` among others).
    params : dict
        The spec's ``params``, defaults filled in.
    data : LoadedData
        The data, checked and preprocessed.
    client : distributed.Client or None
        The job's cluster; None when the job runs on threads of this process
        (:class:`~dkernel.runtime.threads.InProcessScheduler`, Dask's configured scheduler).
    store : StoreView
        What the step's earlier outputs wrote, read back.
    seed : int
        The job's seed (``random_state`` of the estimators).
    progress : bool
        Show progress bars.
    """

    spec: JobSpec
    params: dict[str, Any]
    data: LoadedData
    client: Client | None
    store: StoreView
    seed: int
    progress: bool = True

    def persisted_rows(self, rows: int) -> Any:
        """The data as a float64 Dask array of ``rows``-row chunks, persisted on the cluster."""
        import dask.array as da
        import numpy as np

        X = self.data.X
        if isinstance(X, da.Array):
            Xd = with_own_keys(X.rechunk({0: rows, 1: -1}))
        else:  # name=False: keys of this job's own (see with_own_keys)
            Xd = da.from_array(np.asarray(X, dtype=np.float64), chunks=(rows, -1), name=False)
        return persist(Xd, self.client)


def persist(X: Any, client: Any) -> Any:
    """``X`` persisted on ``client``'s cluster, or in this process's memory (``client`` None:
    Dask's configured scheduler computes it)."""
    if client is None:
        import dask

        return dask.persist(X)[0]
    return client.persist(X)


def with_own_keys(X: Any) -> Any:
    """``X`` (a Dask array) under keys of its own, for persisting.

    A reader's keys hash the file and its options, so two jobs on the same data share them; on
    one scheduler the client of the job before, releasing them as it closes, raced with this
    job's persist of the same keys (``FutureCancelledError: lost dependencies``).
    """
    import uuid

    import numpy as np

    return X.map_blocks(np.asarray, dtype=X.dtype, name=f"dkernel-{uuid.uuid4().hex}")


@dataclass(frozen=True)
class Method:
    """A job method.

    Parameters
    ----------
    name : str
        The value of ``method:``.
    params : tuple of Param
        Schema of ``params:``.
    compute : callable
        ``compute(ctx: JobContext)``: an iterable (a generator) of the step's outputs
        (:data:`dkernel.jobs.outputs.Output`), written by the runner as they come.
    check_data : callable, optional
        ``check_data(params, data: LoadedData) -> None``; raise SpecError/InvalidInputError for
        combinations that cannot work (``n_clusters > n_samples``).
    estimate : callable, optional
        ``estimate(params, n_samples, n_features) -> Cost``.
    needs_raster : bool
        The method needs an image reader (``data.raster`` set).
    description : str
    estimators : tuple of EstimatorSchema
        The estimators whose parameters ``params`` derives from (a test holds every shared
        parameter to its estimator's default, kind and range).
    """

    name: str
    params: tuple[Param, ...]
    compute: Callable[[JobContext], Iterable[Output]]
    check_data: Callable[[dict[str, Any], LoadedData], None] | None = None
    estimate: Callable[[dict[str, Any], int, int], Cost] | None = None
    needs_raster: bool = False
    description: str = ""
    estimators: tuple[EstimatorSchema, ...] = ()


#: The job methods; every module of ``dkernel.jobs.steps`` registers its own on import.
METHODS: Registry[Method] = Registry(
    "method", error=lambda message: SpecError(message, "method"), discover="dkernel.jobs.steps"
)


def register_method(method: Method) -> Method:
    """Add a method to the registry (module import time)."""
    return METHODS.register(method.name, method)


def get_method(name: Any) -> Method:
    """Look a method up by name; unknown names suggest a close one and list the valid ones."""
    return METHODS.lookup(name)
