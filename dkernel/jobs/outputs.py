"""What a job step yields, and the one writer of it: groups, maps beside the store, metrics.

A step's ``compute(ctx)`` (:class:`dkernel.jobs.types.Method`) is a generator of the typed
outputs (:data:`dkernel.jobs.types.Output`, re-exported here); :func:`write_outputs` (called by the runner) writes each as it comes, so a step
that continues from what it wrote (the stored kernel, the scores) reads it back through
``ctx.store`` (:class:`~dkernel.jobs.types.StoreView`). A resumed store keeps the groups
already written (:meth:`~dkernel.storage.store.ResultsStore.write`).

Every method run on an image reader (geotiff, zarr-raster, demo-landsat, npy-raster,
hyperspectral scenes) puts its result back on the image grid (:class:`LabelMap`,
:class:`ScoreMap`): the ``(y, x)`` label map and the valid mask in the store (``/map``; MSSC
keeps them in ``/mssc``, :class:`MapFiles`) with the source's CRS and transform, and, as
:data:`RASTER_OUTPUT_PARAMS` ask, files beside the store named after it: ``<stem>.labels.tif``
(Cloud-Optimized label GeoTIFF with a colour map; uint8 with nodata 255, or uint16/65535 beyond
254 classes, where the store has -1), ``<stem>.labels.classes.csv`` (class table: pixels,
share, colour and band means per class), ``<stem>.quicklook.png`` and ``<stem>.segments.gpkg``
(polygons of connected label regions, or ``.fgb``). Their paths are recorded in the group's
attributes, relative to the store.

The files beside the store are written as the store is (:mod:`dkernel.storage.side_files`):
each in a private temporary folder, then moved into place, never through a link; a path
holding a link, a directory, a FIFO or a file that the store's job did not write (the store's
``side_files`` attribute) is refused, before any cluster starts by :func:`check_side_outputs`
and again when the file is written. Temporaries of a killed run are removed by the next run.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from threading import Thread
from typing import TYPE_CHECKING, Any

import numpy as np

from dkernel._lazy import deferred
from dkernel.errors import InvalidInputError
from dkernel.jobs.types import (  # noqa: F401  (re-exported: the step modules' imports)
    Group,
    JobContext,
    LabelMap,
    MapFiles,
    Metrics,
    Output,
    ScoreMap,
    Scratch,
    Timing,
)
from dkernel.schema.params import Param
from dkernel.storage.side_files import (
    SIDE_FILES_ATTR,
    check_remote_side_files,
    check_side_file,
    recorded_side_files,
    remove_stale_temps,
    side_file,
    side_file_key,
    side_file_record,
    staged_remote_side_files,
)

if TYPE_CHECKING:
    import xarray as xr

    from dkernel.storage.store import ResultsStore

# imported when outputs are written: the job steps and `dkernel validate` import this module
# for the parameters and checks above the writer, without Dask or scikit-learn
da = deferred("dask.array")
as_numpy = deferred("dkernel._validation", "as_numpy")
clustering_scores = deferred("dkernel.metrics", "clustering_scores")
metrics_dataset, model_order_dataset = deferred(
    "dkernel.storage.layout", "metrics_dataset", "model_order_dataset"
)

logger = logging.getLogger(__name__)


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


#: Vector formats of the segments layer (file suffixes).
SEGMENT_FORMATS = ("gpkg", "fgb")

#: The files beside a store, by kind: the suffix after the store's stem and, for messages,
#: what the file is.
SIDE_FILES = {
    "label_geotiff": ("labels.tif", "label GeoTIFF"),
    "class_table_csv": ("labels.classes.csv", "class table"),
    "values_geotiff": ("values.tif", "float maps GeoTIFF"),
    "quicklook_png": ("quicklook.png", "quick-look PNG"),
    "segments": ("segments.{format}", "segments layer"),
}

#: Job-only parameters of every method that can run on an image reader (ignored for tables).
RASTER_OUTPUT_PARAMS = (
    Param(
        "write_geotiff",
        "bool",
        default=True,
        doc="Image readers: write <store>.labels.tif (COG) and <store>.classes.csv beside the store.",
    ),
    Param(
        "write_png",
        "bool",
        default=True,
        doc="Image readers: write <store>.quicklook.png beside the store.",
    ),
    Param(
        "segments",
        "str",
        default=None,
        nullable=True,
        choices=SEGMENT_FORMATS,
        doc=(
            "Georeferenced image readers: write <store>.segments.<format>, polygons of connected "
            "label regions with class, area and mean bands ('gpkg': GeoPackage, 'fgb': "
            "FlatGeobuf; null: none)."
        ),
    ),
    Param(
        "min_segment_pixels",
        "int",
        default=0,
        low=0,
        doc="segments: merge regions smaller than this into their longest-border neighbour.",
    ),
)


def check_raster_outputs(params: dict[str, Any], data: Any) -> None:
    """Refuse map outputs the data cannot give (before any cluster starts)."""
    if not params.get("segments"):
        return
    if data.raster is None:
        raise InvalidInputError(
            "params.segments needs an image reader (geotiff, zarr-raster, demo-landsat); this "
            "reader gives a table, so there are no regions to draw. Remove params.segments."
        )
    if data.raster.rio.crs is None:
        raise InvalidInputError(
            "params.segments needs a georeferenced image, and this one has no CRS (e.g. an "
            "npy-raster), so polygons could not be placed on a map. Read a GeoTIFF or a Zarr "
            "cube with a CRS, or remove params.segments."
        )


def side_paths(store_path: Path, segments: str = "gpkg") -> dict[str, Path]:
    """The files written beside a store, by kind (:data:`SIDE_FILES`)."""
    stem = store_path.name[:-5] if store_path.name.endswith(".zarr") else store_path.name
    return {
        kind: store_path.parent / f"{stem}.{suffix.format(format=segments)}"
        for kind, (suffix, _) in SIDE_FILES.items()
    }


def requested_side_paths(
    store_path: Path, params: dict[str, Any], *, values: bool = False
) -> dict[str, Path]:
    """The files beside the store that ``params`` ask for (:data:`RASTER_OUTPUT_PARAMS`);
    ``values``: the step has float maps (:class:`MapFiles`)."""
    paths = side_paths(Path(store_path), params.get("segments") or "gpkg")
    wanted = {
        "label_geotiff": params.get("write_geotiff", False),
        "class_table_csv": params.get("write_geotiff", False),
        "values_geotiff": values and params.get("write_geotiff", False),
        "quicklook_png": params.get("write_png", False),
        "segments": bool(params.get("segments")),
    }
    return {kind: path for kind, path in paths.items() if wanted[kind]}


def check_side_outputs(
    output: str | Path,
    params: dict[str, Any],
    data: Any = None,
    storage_options: dict | None = None,
) -> None:
    """Refuse the files beside the store ``output`` that could not be written safely.

    For the runner, before any cluster starts (``output`` is the final store path): each file
    ``params`` ask for must be absent, or a regular file that the store at ``output``
    recorded as its job's (:func:`dkernel.storage.side_files.recorded_side_files`; what
    ``--overwrite`` or ``--resume`` then replaces). Table readers (``data.raster`` None)
    write no such files. The scratch folder is checked with the store
    (:func:`dkernel.storage.store.check_target`). Beside a store on an object store
    (``storage_options`` reach it), an object that the store did not record is refused
    (:func:`dkernel.storage.side_files.check_remote_side_files`).

    Raises
    ------
    StoreError
        Naming the path (a link, a directory, a FIFO, a file of someone else) and the fix.
    """
    if data is not None and getattr(data, "raster", None) is None:
        return
    from dkernel.storage.remote import is_remote

    if is_remote(output):
        stem = str(output).rpartition("/")[2]
        names = [p.name for p in requested_side_paths(Path(stem), params).values()]
        check_remote_side_files(str(output), storage_options, names)
        return
    store = Path(output)
    owned = recorded_side_files(store)
    for kind, path in requested_side_paths(store, params).items():
        check_side_file(
            path,
            replace=side_file_key(path) in owned,
            root=store.parent,
            what=SIDE_FILES[kind][1],
        )


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
                "Group, LabelMap, MapFiles, ScoreMap, Metrics, Scratch or Timing "
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
        from dkernel.runtime import compute_with_progress
        from dkernel.runtime.progress import local_progress_bar

        if self.ctx.client is None:  # written by dask's local scheduler as it goes
            with local_progress_bar(self.ctx.progress):
                self.store.write(out.name, out.dataset)
            return

        compute_with_progress(
            self.store.write(out.name, out.dataset, compute=False),
            self.ctx.client,
            show=self.ctx.progress,
        )

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
        scores = clustering_scores(np.asarray(self.ctx.data.y), as_numpy(out.labels))
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
    LabelMap: _Writer.label_map,
    MapFiles: _Writer.map_files,
    ScoreMap: _Writer.score_map,
    Metrics: _Writer.metrics,
    Scratch: _Writer.scratch_array,
    Timing: _Writer.timing,
}


def write_map_files(
    store: ResultsStore,
    ctx: JobContext,
    label_map: Any,
    *,
    title: str,
    n_classes: int | None = None,
    look: MapFiles | None = None,
    values: dict[str, Any] | None = None,
    model_order: xr.Dataset | None = None,
) -> dict[str, str]:
    """Write the files ``ctx.params`` asks for from a ``(y, x)`` label map (-1: no label).

    ``n_classes`` (largest label + 1), when known, saves the COG writer a pass over the map.
    ``look``: the quick-look's panels and class names; ``values``: float ``(y, x)`` maps by
    band name for ``<stem>.values.tif`` (see :class:`MapFiles`); ``model_order``: the
    ``/model_order`` dataset, drawn in the quick-look as score against k (None: no panel).

    Every file is checked first (:func:`check_side_outputs`'s rules; the temporaries of a
    killed run removed), then claimed in the store's ``side_files`` attribute, then written
    through :func:`dkernel.storage.side_files.side_file`.

    Returns the written files as group attributes (paths relative to the store).

    Raises
    ------
    StoreError
        A file's path is a link, a directory, a FIFO or a file the store's job did not write.
    """
    t = time.perf_counter()
    maps = _Maps(
        label_map, title, n_classes, look or MapFiles("", title), values or {}, model_order
    )
    if store.remote:
        written = _write_remote_map_files(store, ctx, maps)
    else:
        paths = requested_side_paths(store.path, ctx.params, values=bool(maps.values))
        replace = _claim_side_files(store, paths)
        written = _write_files(paths, replace, store.path.parent, store.relative, ctx, maps)
    if written:
        store.record_timing("map_files", time.perf_counter() - t)
        files = [written[k] for k in SIDE_FILES if k in written]
        logger.info("map files (beside the store): " + ", ".join(Path(f).name for f in files))
    return written


@dataclass(frozen=True)
class _Maps:
    """What the map files are made of."""

    labels: Any
    title: str
    n_classes: int | None
    look: MapFiles
    values: dict[str, Any]
    model_order: xr.Dataset | None = None


def _write_remote_map_files(store: ResultsStore, ctx: JobContext, maps: _Maps) -> dict[str, Any]:
    """:func:`write_map_files` for a store on an object store, through a local staging
    folder (:func:`dkernel.storage.side_files.staged_remote_side_files`)."""
    stem = store.path.rpartition("/")[2]
    values = bool(maps.values)
    names = [p.name for p in requested_side_paths(Path(stem), ctx.params, values=values).values()]
    with staged_remote_side_files(store, names) as folder:
        paths = requested_side_paths(folder / stem, ctx.params, values=values)
        return _write_files(
            paths,
            dict.fromkeys(paths, False),
            folder,
            lambda file: f"../{Path(file).name}",
            ctx,
            maps,
        )


def _write_files(
    paths: dict[str, Path],
    replace: dict[str, bool],
    root: Path,
    relative: Callable[[Any], str],
    ctx: JobContext,
    maps: _Maps,
) -> dict[str, Any]:
    """Write the requested files at ``paths`` (see :func:`write_map_files`); the written
    files as group attributes (``relative`` to the store)."""
    label_map = maps.labels

    def target(kind: str) -> dict[str, Any]:
        return {"replace": replace[kind], "root": root, "what": SIDE_FILES[kind][1]}

    written: dict[str, Any] = {}
    label_map, image = _held_if_small(label_map, ctx.data.raster)
    quicklook = None
    if "quicklook_png" in paths:
        # prepared first (a few reads and percentiles), then drawn by the helper process (on
        # a thread here when there is none) while the GeoTIFFs and the segments are written
        from dkernel.io.quicklook import draw_in_helper
        from dkernel.io.raster import quicklook_plan

        look = quicklook_plan(
            image,
            label_map,
            title=maps.title,
            panels=maps.look.panels,
            class_names=maps.look.class_names,
            model_order=maps.model_order,
        )

        def draw() -> None:
            with side_file(paths["quicklook_png"], **target("quicklook_png")) as out:
                draw_in_helper(out, look)

        pool = ThreadPoolExecutor(1, thread_name_prefix="dkernel-quicklook")
        quicklook = pool.submit(draw)
        pool.shutdown(wait=False)
    try:
        if "label_geotiff" in paths:
            from dkernel.io.cog import write_class_table, write_label_cog

            cog = write_label_cog(
                paths["label_geotiff"],
                label_map,
                image,
                n_classes=maps.n_classes,
                class_table=False,
                replace=replace["label_geotiff"],
                root=root,
            )
            written["label_geotiff"] = relative(cog.path)
            written["label_geotiff_nodata"] = cog.nodata
            table = write_class_table(
                paths["class_table_csv"],
                label_map,
                image,
                n_classes=cog.n_classes,
                replace=replace["class_table_csv"],
                root=root,
            )
            written["class_table_csv"] = relative(table)
        if "values_geotiff" in paths:
            from dkernel.io.cog import write_float_cog

            values = write_float_cog(
                paths["values_geotiff"],
                maps.values,
                image,
                replace=replace["values_geotiff"],
                root=root,
            )
            written["values_geotiff"] = relative(values)
        if "segments" in paths:
            from dkernel.io.vector import write_segments

            with side_file(paths["segments"], **target("segments")) as out:
                min_pixels = int(ctx.params.get("min_segment_pixels", 0))
                write_segments(out, label_map, image, min_segment_pixels=min_pixels)
            written["segments"] = relative(paths["segments"])
    finally:
        # never left drawing after this returns or raises (a failed job writes nothing more)
        if quicklook is not None:
            wait([quicklook])
    if quicklook is not None:
        quicklook.result()  # its error, if any, is the job's
        written["quicklook_png"] = relative(paths["quicklook_png"])
    return written


def _held_if_small(label_map: Any, image: xr.DataArray | None) -> tuple[Any, Any]:
    """The label map and the image in memory when together they are at most
    ``HELD_MAP_BYTES`` (8 MiB): every file is then made from there, not read again from the
    store and the source (the demo's files: two reads instead of ten passes of Dask, 0.12 s).
    Larger ones stay lazy, and each file reads them strip by strip (the same files, byte for
    byte), so the map files' memory does not grow with the scene."""
    from dkernel._budget import HELD_MAP_BYTES
    from dkernel._validation import is_dask_array

    lazy_labels = is_dask_array(label_map)
    lazy_image = image is not None and image.chunks is not None
    image_bytes = image.nbytes if image is not None and lazy_image else 0
    held = (label_map.nbytes if lazy_labels else 0) + image_bytes
    if held > HELD_MAP_BYTES:
        return label_map, image
    if lazy_labels:
        label_map = label_map.compute()
    if image is not None and lazy_image:
        image = image.compute()
    return label_map, image


def prefetch_map_writers(ctx: JobContext) -> None:
    """Start the helper process (:mod:`dkernel._helper`) and have it import the plotting
    library while the job computes, when the job will draw a quick-look: matplotlib's import
    (0.5 s) and drawing then run on a core the job leaves idle, not on the job's interpreter
    lock. Without a helper, the import runs on a background thread of this process. (The
    ``dkernel`` command starts it earlier, before its own imports.)"""
    if ctx.data.raster is None or not ctx.params.get("write_png", False):
        return
    from dkernel.io.quicklook import prefetch_plotting

    if not prefetch_plotting():
        Thread(target=_import_plotting, name="dkernel-prefetch", daemon=True).start()


def _import_plotting() -> None:
    try:
        from dkernel.io.quicklook import import_plotting

        import_plotting()
    except Exception:  # noqa: BLE001  (the drawing imports it again and reports a failure)
        pass


def _claim_side_files(store: ResultsStore, paths: dict[str, Path]) -> dict[str, bool]:
    """Check the files beside the store (the temporaries of a killed run removed: this job
    holds the store's lease), then claim them in the store's ``side_files`` attribute before
    they are written, so that the files of a run killed while writing stay its own. Returns,
    by kind, whether the file replaces one of this store's."""
    root = store.path.parent
    owned = recorded_side_files(store.path)
    replace = {}
    for kind, path in paths.items():
        remove_stale_temps(path)
        replace[kind] = side_file_key(path) in owned
        check_side_file(path, replace=replace[kind], root=root, what=SIDE_FILES[kind][1])
    if paths:
        claimed = owned | {side_file_key(path) for path in paths.values()}
        store.update_attrs(**{SIDE_FILES_ATTR: side_file_record(store.path, claimed)})
    return replace
