"""The files beside a job's store, one registry entry a kind: :data:`SIDE_FILES`.

An entry (:class:`SideFile`) says what the file is: its kind (the key of its path in the
group's attributes), the suffix after the store's stem, the job parameter that asks for it,
what it is called in messages, and its writer. Everything else reads the registry: which files
a job's ``params`` ask for (:func:`requested_side_paths`), the checks before any cluster starts
(:func:`check_side_outputs`, :func:`check_raster_outputs`), their claim in the store's
``side_files`` attribute, and the writing (:func:`write_map_files`). A new kind is one
:func:`register_side_file` call and its writer; the built-in kinds:

========================  ==========================  ================  ========================
kind                      suffix                      parameter         writer
========================  ==========================  ================  ========================
``label_geotiff``         ``labels.tif``              ``write_geotiff`` label COG, colour map
``class_table_csv``       ``labels.classes.csv``      ``write_geotiff`` class table
``values_geotiff``        ``values.tif``              ``write_geotiff`` float maps COG (a step's
                                                                        ``MapFiles.values``)
``quicklook_png``         ``quicklook.png``           ``write_png``     quick-look, drawn while
                                                                        the others are written
``segments``              ``segments.{format}``       ``segments``      polygons (gpkg or fgb)
========================  ==========================  ================  ========================

Each file is written as the store is (:mod:`dkernel.storage.side_files`): in a private
temporary folder, then moved into place, never through a link; a path holding a link, a
directory, a FIFO or a file that the store's job did not write is refused, before any cluster
starts and again when the file is written.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from threading import Thread
from typing import TYPE_CHECKING, Any

from dkernel.errors import InvalidInputError
from dkernel.jobs.types import JobContext, MapFiles
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

logger = logging.getLogger("dkernel.jobs.outputs")  # the name its log lines always had


# ------------------------------------------------------------------------------------------
# the registry
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Maps:
    """What the files beside a store are made of (:func:`write_map_files`'s arguments)."""

    labels: Any
    title: str
    n_classes: int | None
    look: MapFiles
    values: dict[str, Any]
    model_order: xr.Dataset | None = None


@dataclass
class SideFileTarget:
    """One file to write, as its writer gets it.

    ``path``: where (in a local staging folder for a store on an object store); ``replace``,
    ``root``, ``what``: :func:`~dkernel.storage.side_files.side_file`'s checks, which
    :meth:`writing` applies. ``labels`` and ``image``: the ``(y, x)`` label map and the source
    image, held in memory when small. ``shared``: what a writer leaves for a later one (the
    label COG's ``n_classes`` for the class table)."""

    path: Path
    replace: bool
    root: Path
    what: str
    params: dict[str, Any]
    maps: Maps
    labels: Any
    image: Any
    shared: dict[str, Any] = field(default_factory=dict)

    def writing(self) -> AbstractContextManager[Path]:
        """A temporary path to write the file to, moved into place when the block ends."""
        return side_file(self.path, replace=self.replace, root=self.root, what=self.what)


#: A writer writes ``target.path`` and returns the group attributes it adds beside the
#: file's own path (or None); a ``background`` kind's writer returns a callable instead, run
#: on a thread while the other files are written, that returns those attributes.
SideFileWriter = Callable[[SideFileTarget], Any]


@dataclass(frozen=True)
class SideFile:
    """One kind of file beside the store.

    Parameters
    ----------
    kind : the key of its path in the group's attributes
    suffix : after the store's stem (``job.zarr`` → ``job.<suffix>``); ``{format}`` is the
        parameter's value
    parameter : the job parameter that asks for it (a true value)
    what : what it is, for messages
    write : its writer (``SideFileWriter``: see :class:`SideFileTarget`)
    params : the job parameters this kind brings (``RASTER_OUTPUT_PARAMS``): the one that
        asks for it and the writer's options; () when another kind declares them
    values : written only when the step has float maps (``values`` of
        :class:`~dkernel.jobs.outputs.MapFiles`)
    background : started first, finished on a thread while the other files are written
    check : ``check(data)`` refuses, before any cluster starts, data this file cannot be made
        from (an :class:`~dkernel.errors.InvalidInputError`)
    """

    kind: str
    suffix: str
    parameter: str
    what: str
    write: SideFileWriter
    params: tuple[Param, ...] = ()
    values: bool = False
    background: bool = False
    check: Callable[[Any], None] | None = None


#: The files beside a store, by kind, in the order they are listed (:func:`register_side_file`).
SIDE_FILES: dict[str, SideFile] = {}


def register_side_file(entry: SideFile) -> SideFile:
    """Add a kind of file beside the store (replacing one of the same kind)."""
    SIDE_FILES[entry.kind] = entry
    return entry


def side_paths(store_path: Path, params: dict[str, Any]) -> dict[str, Path]:
    """The path of every kind beside a store, ``{format}`` filled from ``params``."""
    stem = store_path.name[:-5] if store_path.name.endswith(".zarr") else store_path.name
    return {
        kind: store_path.parent
        / f"{stem}.{entry.suffix.format(format=params.get(entry.parameter))}"
        for kind, entry in SIDE_FILES.items()
    }


def requested_side_paths(
    store_path: Path, params: dict[str, Any], *, values: bool = False
) -> dict[str, Path]:
    """The files beside the store that ``params`` ask for (each kind's ``parameter``);
    ``values``: the step has float maps (:class:`~dkernel.jobs.outputs.MapFiles`)."""
    wanted = [
        kind
        for kind, entry in SIDE_FILES.items()
        if params.get(entry.parameter) and (values or not entry.values)
    ]
    paths = side_paths(Path(store_path), params)
    return {kind: paths[kind] for kind in wanted}


# ------------------------------------------------------------------------------------------
# the checks before any cluster starts
# ------------------------------------------------------------------------------------------


def check_raster_outputs(params: dict[str, Any], data: Any) -> None:
    """Refuse map outputs the data cannot give (before any cluster starts): each asked-for
    kind's ``check``."""
    for entry in SIDE_FILES.values():
        if entry.check is not None and params.get(entry.parameter):
            entry.check(data)


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
            what=SIDE_FILES[kind].what,
        )


# ------------------------------------------------------------------------------------------
# the writing
# ------------------------------------------------------------------------------------------


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
    band name for ``<stem>.values.tif`` (see :class:`~dkernel.jobs.outputs.MapFiles`);
    ``model_order``: the ``/model_order`` dataset, drawn in the quick-look as score against
    k (None: no panel).

    Every file is checked first (``check_side_outputs``' rules; the temporaries of a
    killed run removed), then claimed in the store's ``side_files`` attribute, then written
    by its kind's writer (:data:`SIDE_FILES`).

    Returns the written files as group attributes (paths relative to the store).

    Raises
    ------
    StoreError
        A file's path is a link, a directory, a FIFO or a file the store's job did not write.
    """
    t = time.perf_counter()
    maps = Maps(label_map, title, n_classes, look or MapFiles("", title), values or {}, model_order)
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


def _write_remote_map_files(store: ResultsStore, ctx: JobContext, maps: Maps) -> dict[str, Any]:
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
    maps: Maps,
) -> dict[str, Any]:
    """Write the requested files at ``paths`` by their kinds' writers, the ``background``
    kinds first (finished on a thread while the others are written); the written files as
    group attributes (``relative`` to the store)."""
    labels, image = _held_if_small(maps.labels, ctx.data.raster)
    shared: dict[str, Any] = {}

    def target(kind: str) -> SideFileTarget:
        what = SIDE_FILES[kind].what
        return SideFileTarget(
            paths[kind], replace[kind], root, what, ctx.params, maps, labels, image, shared
        )

    kinds = [k for k in SIDE_FILES if k in paths]
    background: dict[str, Future] = {}
    for kind in (k for k in kinds if SIDE_FILES[k].background):
        finish = SIDE_FILES[kind].write(target(kind))
        pool = ThreadPoolExecutor(1, thread_name_prefix=f"dkernel-{kind.partition('_')[0]}")
        background[kind] = pool.submit(finish)
        pool.shutdown(wait=False)
    written: dict[str, Any] = {}
    try:
        for kind in (k for k in kinds if k not in background):
            attrs = SIDE_FILES[kind].write(target(kind))
            written |= {kind: relative(paths[kind]), **(attrs or {})}
    finally:
        # never left drawing after this returns or raises (a failed job writes nothing more)
        wait(background.values())
    for kind, done in background.items():
        attrs = done.result()  # its error, if any, is the job's
        written |= {kind: relative(paths[kind]), **(attrs or {})}
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
        check_side_file(path, replace=replace[kind], root=root, what=SIDE_FILES[kind].what)
    if paths:
        claimed = owned | {side_file_key(path) for path in paths.values()}
        store.update_attrs(**{SIDE_FILES_ATTR: side_file_record(store.path, claimed)})
    return replace


def prefetch_map_writers(ctx: JobContext) -> None:
    """Start the helper process (:mod:`dkernel._helper`) and have it import the plotting
    library while the job computes, when the job will draw a quick-look: matplotlib's import
    (0.5 s) and drawing then run on a core the job leaves idle, not on the job's interpreter
    lock. Without a helper, the import runs on a background thread of this process. (The
    ``dkernel`` command starts it earlier, before its own imports.)"""
    if ctx.data.raster is None or not ctx.params.get(SIDE_FILES["quicklook_png"].parameter):
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


# ------------------------------------------------------------------------------------------
# the built-in kinds: their writers, then their entries
# ------------------------------------------------------------------------------------------


def _write_label_cog(file: SideFileTarget) -> dict[str, Any]:
    """The label COG with its colour map (the class table is its own kind)."""
    from dkernel.io.cog import write_label_cog

    cog = write_label_cog(
        file.path,
        file.labels,
        file.image,
        n_classes=file.maps.n_classes,
        class_table=False,
        replace=file.replace,
        root=file.root,
    )
    file.shared["n_classes"] = cog.n_classes  # the class table's, without a pass of its own
    return {"label_geotiff_nodata": cog.nodata}


def _write_class_table(file: SideFileTarget) -> None:
    from dkernel.io.cog import write_class_table

    n_classes = file.shared.get("n_classes", file.maps.n_classes)
    write_class_table(
        file.path,
        file.labels,
        file.image,
        n_classes=n_classes,
        replace=file.replace,
        root=file.root,
    )


def _write_values_cog(file: SideFileTarget) -> None:
    from dkernel.io.cog import write_float_cog

    write_float_cog(file.path, file.maps.values, file.image, replace=file.replace, root=file.root)


def _start_quicklook(file: SideFileTarget) -> Callable[[], None]:
    """Prepared here (a few reads and percentiles), then drawn by the helper process (on a
    thread of this one when there is none) while the other files are written."""
    from dkernel.io.quicklook import draw_in_helper
    from dkernel.io.raster import quicklook_plan

    maps = file.maps
    look = quicklook_plan(
        file.image,
        file.labels,
        title=maps.title,
        panels=maps.look.panels,
        class_names=maps.look.class_names,
        model_order=maps.model_order,
    )

    def draw() -> None:
        with file.writing() as out:
            draw_in_helper(out, look)

    return draw


def _write_segments(file: SideFileTarget) -> None:
    from dkernel.io.vector import write_segments

    with file.writing() as out:
        min_pixels = int(file.params.get("min_segment_pixels", 0))
        write_segments(out, file.labels, file.image, min_segment_pixels=min_pixels)


def _check_segments(data: Any) -> None:
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


#: Vector formats of the segments layer (file suffixes).
SEGMENT_FORMATS = ("gpkg", "fgb")

_WRITE_GEOTIFF = Param(
    "write_geotiff",
    "bool",
    default=True,
    doc="Image readers: write <store>.labels.tif (COG) and <store>.classes.csv beside the store.",
)
_WRITE_PNG = Param(
    "write_png",
    "bool",
    default=True,
    doc="Image readers: write <store>.quicklook.png beside the store.",
)
_SEGMENTS = Param(
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
)
_MIN_SEGMENT_PIXELS = Param(
    "min_segment_pixels",
    "int",
    default=0,
    low=0,
    doc="segments: merge regions smaller than this into their longest-border neighbour.",
)

for _entry in (
    SideFile(
        "label_geotiff",
        "labels.tif",
        "write_geotiff",
        "label GeoTIFF",
        _write_label_cog,
        params=(_WRITE_GEOTIFF,),
    ),
    SideFile(
        "class_table_csv", "labels.classes.csv", "write_geotiff", "class table", _write_class_table
    ),
    SideFile(
        "values_geotiff",
        "values.tif",
        "write_geotiff",
        "float maps GeoTIFF",
        _write_values_cog,
        values=True,
    ),
    SideFile(
        "quicklook_png",
        "quicklook.png",
        "write_png",
        "quick-look PNG",
        _start_quicklook,
        params=(_WRITE_PNG,),
        background=True,
    ),
    SideFile(
        "segments",
        "segments.{format}",
        "segments",
        "segments layer",
        _write_segments,
        params=(_SEGMENTS, _MIN_SEGMENT_PIXELS),
        check=_check_segments,
    ),
):
    register_side_file(_entry)

#: Job-only parameters of every method that can run on an image reader (ignored for tables):
#: those of the built-in kinds, in their order.
RASTER_OUTPUT_PARAMS: tuple[Param, ...] = tuple(p for e in SIDE_FILES.values() for p in e.params)
