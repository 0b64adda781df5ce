"""What a job step yields, and the one writer of it: groups, maps beside the store, metrics.

A step's ``compute(ctx)`` (:class:`dkernel.jobs.types.Method`) is a generator of the typed
outputs (:data:`dkernel.jobs.types.Output`, re-exported here); :func:`write_outputs` (called by the runner) writes each as it comes, so a step
that continues from what it wrote (the stored kernel, the scores) reads it back through
``ctx.store`` (:class:`~dkernel.jobs.types.StoreView`). A resumed store keeps the groups
already written (:meth:`~dkernel.storage.store.ResultsStore.write`).

Every method run on an image reader (geotiff, zarr-raster, demo-landsat, npy-raster,
hyperspectral scenes) puts its result back on the image grid (:class:`LabelMap`,
:class:`ScoreMap`): the ``(y, x)`` label map and the valid mask in the store (``/map``; MSSC
keeps them in ``/mssc``, :class:`MapFiles`) with the source's CRS and transform, and, as the
job's parameters ask, files beside the store named after it (``<stem>.labels.tif``,
``<stem>.quicklook.png``, ...): one registry entry a kind, with its writer, in
:mod:`dkernel.jobs.map_files` (re-exported here). Their paths are recorded in the group's
attributes, relative to the store.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from dkernel._lazy import deferred
from dkernel.jobs.map_files import (  # noqa: F401  (re-exported: where they were)
    RASTER_OUTPUT_PARAMS,
    SEGMENT_FORMATS,
    SIDE_FILES,
    SideFile,
    _held_if_small,
    check_raster_outputs,
    check_side_outputs,
    prefetch_map_writers,
    register_side_file,
    requested_side_paths,
    side_paths,
    write_map_files,
)
from dkernel.jobs.types import (  # noqa: F401  (re-exported: the step modules' imports)
    Group,
    GroupAttrs,
    JobContext,
    LabelMap,
    MapFiles,
    Metrics,
    Output,
    ScoreMap,
    Scratch,
    Timing,
)

if TYPE_CHECKING:
    import xarray as xr

    from dkernel.storage.store import ResultsStore

# imported when outputs are written: the job steps and `dkernel validate` import this module
# for the parameters and checks above the writer, without Dask or scikit-learn
da = deferred("dask.array")
clustering_scores, scores_of_contingency = deferred(
    "dkernel.metrics", "clustering_scores", "scores_of_contingency"
)
chunked_contingency_table = deferred("dkernel.rows", "chunked_contingency_table")
metrics_dataset, model_order_dataset = deferred(
    "dkernel.storage.layout", "metrics_dataset", "model_order_dataset"
)

logger = logging.getLogger(__name__)
xr = deferred("xarray")


def missing_model_variables(model: Any) -> dict[str, Any]:
    """``missing_mean`` and ``missing_covariance``: the missing-value model of a deep
    estimator (``missing_model_``), which its ``from_results`` restores to fill new samples'
    NaN as the training samples were (the ``ddc`` and ``dkae`` jobs' ``/network`` groups)."""
    missing = model.missing_model_
    dims = ("missing_feature", "missing_feature_2")[: missing.covariance.ndim]
    return {
        "missing_mean": xr.Variable(("missing_feature",), missing.mean),
        "missing_covariance": xr.Variable(dims, missing.covariance),
    }


def model_order_outputs(estimator: Any) -> list[Output]:
    """The ``/model_order`` group of a fitted estimator that chose its number of clusters
    (``n_clusters='auto'``: ``model_order_`` is a :class:`~dkernel.model_order.ModelOrder`),
    its summary logged; nothing when it was given one (``model_order_`` None or absent).

    A step yields these before its :class:`LabelMap` / :class:`MapFiles`, so that the
    quick-look draws the evidence beside the map.
    """
    order = getattr(estimator, "model_order_", None)
    if order is None:
        return []
    logger.info(f"number of clusters: {order.summary()}")
    return [Group("model_order", model_order_dataset(order))]


# ------------------------------------------------------------------------------------------
# the writer
# ------------------------------------------------------------------------------------------


def write_outputs(outputs: Iterable[Output], store: ResultsStore, ctx: JobContext) -> None:
    """Write a step's outputs to ``store`` as they come: the one place where a job's groups,
    maps, map files, metrics and timings are written, for every method.

    ``ctx`` gives the data (the image of the maps, the ground truth of the metrics), the
    params (which map files), the cluster and the progress switch. Scratch arrays are
    removed once the outputs are exhausted.

    Raises
    ------
    TypeError
        For an output that is not one of :data:`Output`.
    StoreError
        A map file's path is a link, a directory, a FIFO or a file the store's job did not
        write.
    """
    writer = _Writer(store, ctx)
    for output in outputs:
        write = _WRITERS.get(type(output))
        if write is None:
            raise TypeError(
                f"method {ctx.method!r} yielded a {type(output).__name__}; a step yields "
                "Group, GroupAttrs, LabelMap, MapFiles, ScoreMap, Metrics, Scratch or Timing "
                "(dkernel.jobs.outputs)."
            )
        write(writer, output)
    if writer.scratch:
        store.clear_scratch()


class _Writer:
    """The store and the context of one step's outputs."""

    def __init__(self, store: ResultsStore, ctx: JobContext) -> None:
        self.store, self.ctx = store, ctx
        self.scratch = False
        #: the ``/model_order`` dataset written (drawn in the quick-look); None: none
        self.model_order: xr.Dataset | None = None

    def group(self, out: Group) -> None:
        if out.name == "model_order":
            self.model_order = out.dataset
        if not out.lazy:
            self.store.write(out.name, out.dataset)
            return
        from dkernel.runtime import compute_parts
        from dkernel.runtime.progress import local_progress_bar

        if self.ctx.client is None:  # written by dask's local scheduler as it goes
            with local_progress_bar(self.ctx.progress):
                self.store.write(out.name, out.dataset)
            return
        # one future per chunk, each forgotten once written: the workers' memory stays flat
        parts, finish = self.store.write_parts(out.name, out.dataset)
        compute_parts(parts, self.ctx.client, show=self.ctx.progress, what=f"writing /{out.name}")
        finish()

    def group_attrs(self, out: GroupAttrs) -> None:
        self.store.update_group_attrs(out.group, **out.attrs)

    def label_map(self, out: LabelMap) -> None:
        image = self.ctx.data.raster
        if image is None:
            return
        from dkernel.io.raster import image_strips, labels_on_grid, strip_counts
        from dkernel.storage.geo import map_dataset

        t = time.perf_counter()
        # onto the grid one row strip per task, written by the workers chunk by chunk; the
        # files are made from the stored map, window by window
        grid = labels_on_grid(out.labels, image, strip_counts(image, self.ctx.data.X))
        self.group(Group("map", map_dataset(grid, image_strips(image)[1], image), lazy=True))
        stored = self.store.read_array("map", "labels")
        self.store.record_timing("map_write", time.perf_counter() - t)
        n_classes = int(stored.max().compute()) + 1
        self.map_files(MapFiles("map", f"{out.title}: {n_classes} clusters"), n_classes)

    def map_files(self, out: MapFiles, n_classes: int | None = None) -> None:
        if self.ctx.data.raster is None:
            return
        label_map = self.store.read_array(out.group, "labels")
        values = {}
        for name in out.values:
            stored = self.store.read_array(out.group, name)
            if stored.ndim == 2:
                values[name] = stored
            else:
                values.update({f"{name}_{i + 1}": stored[i] for i in range(stored.shape[0])})
        files = write_map_files(
            self.store,
            self.ctx,
            label_map,
            title=out.title,
            n_classes=n_classes,
            look=out,
            values=values,
            model_order=self.model_order,
        )
        self.store.update_group_attrs(out.group, **files)

    def score_map(self, out: ScoreMap) -> None:
        image = self.ctx.data.raster
        if image is None:
            return
        from dkernel.io.raster import image_strips, labels_on_grid, strip_counts
        from dkernel.storage.geo import score_map_dataset

        counts = strip_counts(image, self.ctx.data.X)
        maps = [
            labels_on_grid(out.scores[:, j], image, counts, nodata=np.nan, dtype=np.float32)
            for j in range(len(out.seeds))
        ]
        grid = score_map_dataset(da.stack(maps), image_strips(image)[1], image, out.seeds)
        self.group(Group("map", grid, lazy=True))

    def metrics(self, out: Metrics) -> None:
        if self.ctx.data.y is None:
            return
        y, labels = self.ctx.data.y, out.labels
        if isinstance(y, da.Array) or isinstance(labels, da.Array):
            # labels read back from the store: scored chunk by chunk, never gathered
            scores = scores_of_contingency(chunked_contingency_table(y, labels))
        else:
            scores = clustering_scores(np.asarray(y), np.asarray(labels))
        self.store.write("metrics", metrics_dataset(scores))
        logger.info(", ".join(f"{k.upper()} {v:.3f}" for k, v in scores.items()))

    def scratch_array(self, out: Scratch) -> None:
        from dkernel.runtime import compute_parts

        self.scratch = True
        compute_parts(
            self.store.write_scratch(out.name, out.array),
            self.ctx.client,
            show=self.ctx.progress,
            what=out.what,
        )

    def timing(self, out: Timing) -> None:
        self.store.record_timing(out.phase, out.seconds)


_WRITERS: dict[type, Callable[[_Writer, Any], None]] = {
    Group: _Writer.group,
    GroupAttrs: _Writer.group_attrs,
    LabelMap: _Writer.label_map,
    MapFiles: _Writer.map_files,
    ScoreMap: _Writer.score_map,
    Metrics: _Writer.metrics,
    Scratch: _Writer.scratch_array,
    Timing: _Writer.timing,
}
