"""Writers shared by job methods: clustering metrics, and the map outputs of raster jobs.

Every method run on an image reader (geotiff, zarr-raster, demo-landsat, npy-raster,
hyperspectral scenes) puts its result back on the image grid: the ``(y, x)`` label map and
the valid mask in the store (``/map``; MSSC keeps them in ``/mssc``) with the source's CRS
and transform, and, as :data:`RASTER_OUTPUT_PARAMS` ask, files beside the store named after
it: ``<stem>.labels.tif`` (Cloud-Optimized label GeoTIFF with a colour map; uint8 with nodata
255, or uint16/65535 beyond 254 classes, where the store has -1), ``<stem>.labels.classes.csv``
(class table: pixels, share, colour and band means per class), ``<stem>.quicklook.png`` and ``<stem>.segments.gpkg``
(polygons of connected label regions, or ``.fgb``). Their paths are recorded in the group's attributes,
relative to the store.

The files beside the store are written as the store is (:mod:`dkernel.storage.side_files`):
each in a private temporary folder, then moved into place, never through a link; a path
holding a link, a directory, a FIFO or a file that the store's job did not write (the store's
``side_files`` attribute) is refused, before any cluster starts by :func:`check_side_outputs`
and again when the file is written. Temporaries of a killed run are removed by the next run.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import dask.array as da
import numpy as np
import xarray as xr

from dkernel.errors import InvalidInputError
from dkernel.jobs.registry import JobContext
from dkernel.metrics import clustering_scores
from dkernel.schema.params import Param
from dkernel.storage.layout import metrics_dataset
from dkernel.storage.side_files import (
    SIDE_FILES_ATTR,
    check_side_file,
    recorded_side_files,
    remove_stale_temps,
    side_file,
    side_file_key,
    side_file_record,
)

logger = logging.getLogger(__name__)

#: Vector formats of the segments layer (file suffixes).
SEGMENT_FORMATS = ("gpkg", "fgb")

#: The files beside a store, by kind: the suffix after the store's stem and, for messages,
#: what the file is.
SIDE_FILES = {
    "label_geotiff": ("labels.tif", "label GeoTIFF"),
    "class_table_csv": ("labels.classes.csv", "class table"),
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


def write_clustering_metrics(ctx: JobContext, y_true: Any, labels: Any) -> dict[str, float]:
    """Score ``labels`` against the ground truth and write ``/metrics`` (ACC, NMI, ARI).

    The scores are stored both as 0-d variables and as the group's attributes, and logged.
    """
    scores = clustering_scores(np.asarray(y_true), np.asarray(labels))
    ctx.store.write("metrics", metrics_dataset(scores))
    logger.info(", ".join(f"{k.upper()} {v:.3f}" for k, v in scores.items()))
    return scores


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


def requested_side_paths(store_path: Path, params: dict[str, Any]) -> dict[str, Path]:
    """The files beside the store that ``params`` ask for (:data:`RASTER_OUTPUT_PARAMS`)."""
    paths = side_paths(Path(store_path), params.get("segments") or "gpkg")
    wanted = {
        "label_geotiff": params.get("write_geotiff", False),
        "class_table_csv": params.get("write_geotiff", False),
        "quicklook_png": params.get("write_png", False),
        "segments": bool(params.get("segments")),
    }
    return {kind: path for kind, path in paths.items() if wanted[kind]}


def check_side_outputs(output: str | Path, params: dict[str, Any], data: Any = None) -> None:
    """Refuse the files beside the store ``output`` that could not be written safely.

    For the runner, before any cluster starts (``output`` is the final store path): each file
    ``params`` ask for must be absent, or a regular file that the store at ``output``
    recorded as its job's (:func:`dkernel.storage.side_files.recorded_side_files`; what
    ``--overwrite`` or ``--resume`` then replaces). Table readers (``data.raster`` None)
    write no such files. The scratch folder is checked with the store
    (:func:`dkernel.storage.store.check_target`).

    Raises
    ------
    StoreError
        Naming the path (a link, a directory, a FIFO, a file of someone else) and the fix.
    """
    if data is not None and getattr(data, "raster", None) is None:
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


def write_map_files(
    ctx: JobContext, label_map: Any, *, title: str, n_classes: int | None = None
) -> dict[str, str]:
    """Write the files ``ctx.params`` asks for from a ``(y, x)`` label map (-1: no label).

    ``n_classes`` (largest label + 1), when known, saves the COG writer a pass over the map.

    Every file is checked first (:func:`check_side_outputs`'s rules; the temporaries of a
    killed run removed), then claimed in the store's ``side_files`` attribute, then written
    through :func:`dkernel.storage.side_files.side_file`.

    Returns the written files as group attributes (paths relative to the store).

    Raises
    ------
    StoreError
        A file's path is a link, a directory, a FIFO or a file the store's job did not write.
    """
    from dkernel.io.cog import write_class_table, write_label_cog
    from dkernel.io.raster import write_quicklook

    p, image, store = ctx.params, ctx.data.raster, ctx.store
    paths = requested_side_paths(store.path, p)
    root = store.path.parent
    owned = recorded_side_files(store.path)
    replace = {}
    for kind, path in paths.items():
        remove_stale_temps(path)  # of a killed run: this job holds the store's lease
        replace[kind] = side_file_key(path) in owned
        check_side_file(path, replace=replace[kind], root=root, what=SIDE_FILES[kind][1])
    if paths:  # claimed before written: the files of a run killed while writing stay its own
        claimed = owned | {side_file_key(path) for path in paths.values()}
        store.update_attrs(**{SIDE_FILES_ATTR: side_file_record(store.path, claimed)})

    def target(kind: str) -> dict[str, Any]:
        return {"replace": replace[kind], "root": root}

    written: dict[str, str] = {}
    t = time.perf_counter()
    if "label_geotiff" in paths:
        cog = write_label_cog(
            paths["label_geotiff"],
            label_map,
            image,
            n_classes=n_classes,
            class_table=False,
            **target("label_geotiff"),
        )
        written["label_geotiff"] = store.relative(cog.path)
        written["label_geotiff_nodata"] = cog.nodata
        table = write_class_table(
            paths["class_table_csv"],
            label_map,
            image,
            n_classes=cog.n_classes,
            **target("class_table_csv"),
        )
        written["class_table_csv"] = store.relative(table)
    if "quicklook_png" in paths:
        what = SIDE_FILES["quicklook_png"][1]
        with side_file(paths["quicklook_png"], what=what, **target("quicklook_png")) as out:
            write_quicklook(out, image, label_map, title=title)
        written["quicklook_png"] = store.relative(paths["quicklook_png"])
    if "segments" in paths:
        from dkernel.io.vector import write_segments

        with side_file(
            paths["segments"], what=SIDE_FILES["segments"][1], **target("segments")
        ) as out:
            write_segments(
                out,
                label_map,
                image,
                min_segment_pixels=int(p.get("min_segment_pixels", 0)),
            )
        written["segments"] = store.relative(paths["segments"])
    if written:
        store.record_timing("map_files", time.perf_counter() - t)
        files = [
            written[k]
            for k in ("label_geotiff", "class_table_csv", "quicklook_png", "segments")
            if k in written
        ]
        logger.info("map files (beside the store): " + ", ".join(Path(f).name for f in files))
    return written


def write_label_map(ctx: JobContext, labels: Any, *, title: str) -> Any:
    """For an image reader: ``/map`` (labels and valid mask on the image grid, with its CRS)
    and the files of :func:`write_map_files`. Does nothing for table readers.

    ``labels`` holds one label per valid pixel, in the reader's (row-major) order, as a NumPy
    or Dask array; ``title`` names the method in the quick-look's title. The map goes onto the
    grid one row strip per task and is written by the workers chunk by chunk; the files are
    made from the stored map, window by window. Returns the stored ``(y, x)`` labels (lazy).
    """
    from dkernel.io.raster import image_strips, labels_on_grid, strip_counts
    from dkernel.storage.geo import map_dataset

    image = ctx.data.raster
    if image is None:
        return None
    t = time.perf_counter()
    grid = labels_on_grid(labels, image, strip_counts(image, ctx.data.X))
    write_map_group(ctx, "map", map_dataset(grid, image_strips(image)[1], image))
    stored = ctx.store.read_array("map", "labels")
    ctx.store.record_timing("map_write", time.perf_counter() - t)
    n_classes = int(stored.max().compute()) + 1
    files = write_map_files(
        ctx, stored, title=f"{title}: {n_classes} clusters", n_classes=n_classes
    )
    ctx.store.update_group_attrs("map", **files)
    return stored


def write_map_group(ctx: JobContext, group: str, dataset: xr.Dataset) -> None:
    """Write a group of lazy maps through the job's cluster, with progress."""
    from dkernel.runtime import compute_with_progress

    compute_with_progress(
        ctx.store.write(group, dataset, compute=False), ctx.client, show=ctx.progress
    )


def write_score_map(ctx: JobContext, scores: Any, seeds: list[str]) -> None:
    """For an image reader: ``/map`` with every seed's ranking scores on the image grid."""
    from dkernel.io.raster import image_strips, labels_on_grid, strip_counts
    from dkernel.storage.geo import score_map_dataset

    image = ctx.data.raster
    counts = strip_counts(image, ctx.data.X)
    maps = [
        labels_on_grid(scores[:, j], image, counts, nodata=np.nan, dtype=np.float32)
        for j in range(len(seeds))
    ]
    grid = da.stack(maps)
    write_map_group(ctx, "map", score_map_dataset(grid, image_strips(image)[1], image, seeds))
