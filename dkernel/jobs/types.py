"""The types a job step is made of: :class:`Method` (what ``method:`` names), its
:class:`Cost` estimate, the :class:`JobContext` its ``compute`` reads, the :class:`StoreView`
of the store it writes, and the typed outputs it yields (:data:`Output`).

Imports no spec, no registry and no writer: the spec (:mod:`dkernel.jobs.spec`), the registry
(:mod:`dkernel.jobs.registry`) and the writer (:mod:`dkernel.jobs.outputs`) import these.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dkernel.schema.estimator import EstimatorSchema
from dkernel.schema.params import Param

if TYPE_CHECKING:
    import xarray as xr
    from distributed import Client

    from dkernel.io.data import LoadedData
    from dkernel.storage.checkpoint import StoreCheckpoint
    from dkernel.storage.store import ResultsStore


# ------------------------------------------------------------------------------------------
# what a step yields
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Group:
    """A store group: ``dataset`` (built by ``dkernel.storage.layout``) written to ``/name``.

    ``lazy``: the dataset holds Dask arrays that the job's workers compute and write chunk by
    chunk, with progress (a resumed store writes only the chunks it misses); otherwise it is
    written at once from memory.
    """

    name: str
    dataset: xr.Dataset
    lazy: bool = False


@dataclass(frozen=True)
class LabelMap:
    """One label per sample (NumPy or Dask), put back on the image grid for image readers:
    ``/map`` and the map files beside the store; ignored for table readers.

    ``title`` names the method in the quick-look's title (``<title>: <k> clusters``).
    """

    labels: Any
    title: str


@dataclass(frozen=True)
class MapFiles:
    """The map files beside the store from a ``(y, x)`` label map the step stored itself
    (variable ``labels`` of ``/group``); their paths go to that group's attributes.

    ``values``: float variables of the group, ``(y, x)`` or ``(component, y, x)``, also
    written as one float32 COG ``<stem>.values.tif`` (a band per map, named in its
    description) when ``write_geotiff`` is on. ``panels`` and ``class_names``: the
    quick-look's image panels and legend (``dkernel.io.raster.write_quicklook``).
    """

    group: str
    title: str
    values: tuple[str, ...] = ()
    panels: tuple[tuple[str, Any], ...] = ()
    class_names: tuple[str, ...] = ()


@dataclass(frozen=True)
class ScoreMap:
    """Ranking scores ``(n_samples, n_seeds)``, one column per seed named in ``seeds``, put on
    the image grid (``/map``) for image readers; ignored for table readers."""

    scores: Any
    seeds: list[str]


@dataclass(frozen=True)
class Metrics:
    """Clustering labels scored against the reader's ground truth (``/metrics``: ACC, NMI,
    ARI), when the reader gives one."""

    labels: Any


@dataclass(frozen=True)
class Scratch:
    """A 1-D Dask array written to the scratch array ``name`` beside the store, one task per
    chunk (``what`` names the pass in progress lines); read it back with
    ``ctx.store.read_scratch(name)``. The scratch arrays go when the step ends."""

    name: str
    array: Any
    what: str


@dataclass(frozen=True)
class GroupAttrs:
    """Attributes merged into the written group ``/group``: what a step learns from a lazy
    group once it is written (a summary of its chunks), without holding it."""

    group: str
    attrs: dict[str, Any]


@dataclass(frozen=True)
class Timing:
    """The wall time of one phase (root attribute ``timings``)."""

    phase: str
    seconds: float

    @classmethod
    def since(cls, phase: str, start: float) -> Timing:
        """The phase that began at ``start`` (a ``time.perf_counter()`` value) ends now."""
        return cls(phase, time.perf_counter() - start)


#: Anything a step's ``compute`` may yield.
Output = Group | GroupAttrs | LabelMap | MapFiles | ScoreMap | Metrics | Scratch | Timing


# ------------------------------------------------------------------------------------------
# what a step is
# ------------------------------------------------------------------------------------------


def chunk_rows_param(
    doc: str = "Rows per Dask chunk of the data (default: about 64 MiB of kernel rows).",
) -> Param:
    """The job-only ``chunk_rows`` parameter of the steps that chunk the data themselves."""
    return Param("chunk_rows", "int", default=None, nullable=True, low=16, doc=doc)


def refuse_missing_values(method: str, kernel: str, X: Any, choices: Iterable[str]) -> None:
    """Refuse NaN in in-memory ``X`` for a job whose ``kernel`` does not model them (those of
    ``dkernel.kernels.input_policy.MISSING_VALUE_KERNELS`` do: PCKID, or the expected squared
    distances of the rbf and k-NN kernels), naming those among the job's kernel ``choices``."""
    import numpy as np

    n_nan = int(np.isnan(np.asarray(X)).sum())
    if not n_nan:
        return
    from dkernel.errors import InvalidInputError
    from dkernel.kernels.input_policy import MISSING_VALUE_KERNELS

    if kernel not in MISSING_VALUE_KERNELS:
        usable = [k for k in choices if k in MISSING_VALUE_KERNELS]
        raise InvalidInputError(
            f"{method} with kernel: {kernel} does not handle missing values ({n_nan} NaN "
            f"found); use kernel: {' or '.join(usable)}, which model them, or impute them."
        )


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
    here, lazily. The one thing a step writes itself is a training checkpoint (:meth:`checkpoint`),
    saved by the model it fits after every epoch, while it trains.
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

    def checkpoint(self, name: str) -> StoreCheckpoint:
        """The training checkpoint ``name`` in the store (:class:`StoreCheckpoint
        <dkernel.storage.checkpoint.StoreCheckpoint>`), for a model's ``checkpoint``
        parameter: a job resumed with ``--resume`` continues the training from its last save;
        the store removes it when it is marked complete."""
        return self._store.checkpoint(name)


@dataclass
class JobContext:
    """Everything a method's ``compute`` reads.

    Attributes
    ----------
    method : str
        The method's name (``method:`` of the spec).
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
    limits : dict
        The spec's ``limits`` (``max_memory``, ``max_disk``), already capped where the job runs.
    """

    method: str
    params: dict[str, Any]
    data: LoadedData
    client: Client | None
    store: StoreView
    seed: int
    progress: bool = True
    limits: dict[str, Any] = field(default_factory=dict)

    def row_chunks(self, rows: int, *, persist: bool) -> Any:
        """The data as a float64 Dask array of ``rows``-row chunks.

        In-memory data are always persisted on the cluster (sent once, not with every
        task: ``dkernel.runtime.persist.rows_in_memory``). Data a reader keeps in a store (a
        Dask array) are persisted only with ``persist``: a method that reads every row a few
        times (the spectral embedding, kernel k-means) leaves them where they are stored and
        each pass reads its chunks again, so that memory per worker stays flat as the table
        grows (issue 56); a method that reads them many times over (a network's epochs)
        persists them.
        """
        import dask.array as da
        import numpy as np

        from dkernel.runtime.persist import persist as persist_on
        from dkernel.runtime.persist import rows_in_memory, with_own_keys

        X = self.data.X
        if not isinstance(X, da.Array):
            return rows_in_memory(np.asarray(X, dtype=np.float64), rows, self.client)
        Xd = X.rechunk({0: rows, 1: -1}).astype(np.float64)
        if not persist:
            return Xd
        return persist_on(with_own_keys(Xd), self.client)


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
    handles_missing : bool or str
        The method models missing values (NaN) itself: True, or only with ``params.kernel``
        set to this kernel's name; False (default): NaN is refused before any cluster starts.
    example : mapping
        A small job that runs in seconds, ``{"data": ..., "params": ...}``: the suites that
        run every method (a real cluster, a remote store) run it. ``data`` without a file
        (``{"reader": "npy-raster"}``) is given the suites' own synthetic image or pair.
    bad_data : mapping
        ``params`` for the bad-data cases (a NaN, an infinity, a single row) on a small table
        or image: each must be refused with a clear message.
    """

    name: str
    params: tuple[Param, ...]
    compute: Callable[[JobContext], Iterable[Output]]
    check_data: Callable[[dict[str, Any], LoadedData], None] | None = None
    estimate: Callable[[dict[str, Any], int, int], Cost] | None = None
    needs_raster: bool = False
    description: str = ""
    estimators: tuple[EstimatorSchema, ...] = ()
    handles_missing: bool | str = False
    example: Mapping[str, Any] = field(default_factory=dict)
    bad_data: Mapping[str, Any] = field(default_factory=dict)

    def allows_missing(self, params: Mapping[str, Any]) -> bool:
        """Whether the method models NaN as missing with these ``params``."""
        needs = self.handles_missing
        return needs is True or (isinstance(needs, str) and params.get("kernel") == needs)
