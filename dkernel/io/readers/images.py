"""The image readers: GeoTIFF, the vendored demo scene, ``.npy`` and Zarr images, the
hyperspectral scenes of ``$DKERNEL_DATA``.

Importing this module registers them without importing their implementation
(``dkernel.io.raster``, which needs Dask, xarray and rasterio): it is imported when a reader
loads, so ``dkernel validate`` and ``dkernel methods`` stay light.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dkernel._lazy import deferred
from dkernel.io.data import MAX_COORD_SCALE, SCALES, expand_data_path, resolve_path
from dkernel.io.registry import STORAGE_OPTIONS, Reader, register_reader
from dkernel.schema.params import Param
from dkernel.storage.remote import is_url

load_geotiff, load_demo_landsat, load_npy_raster, load_zarr_raster, load_hyperspectral = deferred(
    "dkernel.io.raster",
    "load_geotiff",
    "load_demo_landsat",
    "load_npy_raster",
    "load_zarr_raster",
    "load_hyperspectral",
)
load_stac = deferred("dkernel.io.stac", "load_stac")


def geotiff_files(path: str, **_: Any) -> list[Path]:
    """The files GDAL reads for reader ``geotiff`` (:func:`dkernel.io.gdal.raster_files`: the
    file alone, GDAL opens no sidecar; a VRT or other indirection is refused here already)."""
    from dkernel.io.gdal import raster_files
    from dkernel.io.raster import zarr_store_refusal

    if is_url(path):
        return []
    zarr_store_refusal(resolve_path(path))
    return raster_files(resolve_path(path))


def zarr_raster_files(path: str, **_: Any) -> list[Path]:
    """The links inside the store of reader ``zarr-raster`` (after checking its files)."""
    from dkernel.io.zarr_inputs import zarr_store_links

    if is_url(path):
        return []
    return zarr_store_links(resolve_path(path))


def stac_files(path: str, assets: list[str] | None = None, **_: Any) -> list[Path | str]:
    """The STAC document and the hrefs of the assets it would read (those named in
    ``assets``, else every asset), as written: a local path, a ``file://`` URL or a remote
    URL, each checked by the data root's confinement (:func:`dkernel.io.files.confine`).
    A local asset brings the files GDAL reads with it (:func:`geotiff_files`: none but itself,
    no sidecar is opened; a VRT or other indirection is refused), so no link leads out of
    the root."""
    from dkernel.io.gdal import raster_files
    from dkernel.io.stac import stac_items
    from dkernel.storage.remote import is_remote, local_path

    if is_url(path):
        return []
    document = resolve_path(path)
    files: list[Path | str] = [document]
    for item in stac_items(str(document)):
        for name, asset in item.assets.items():
            if assets and name not in assets:
                continue
            files.append(asset.href)
            local = None if is_remote(asset.href) else Path(local_path(asset.href))
            if local is not None and local.exists():
                files.extend(raster_files(local))
    return files


def hyperspectral_files(scene: str, path: str | None = None) -> list[Path]:
    """The two ``.mat`` files readers ``samson`` / ``jasper`` read."""
    from dkernel.io.hyperspectral import scene_files

    return scene_files(scene, expand_data_path(path) if path else None)


scale = Param(
    "scale",
    "str",
    default="minmax",
    choices=SCALES,
    doc="Per-band scaling over valid pixels: minmax to [0, 1], standardize, or none.",
)
coord = Param(
    "coord_scale",
    "float",
    default=0.25,
    low=0.0,
    high=MAX_COORD_SCALE,
    doc="Pixel coordinates scaled to [0, c] (longer side); 0 drops them.",
)
chunk = Param(
    "chunk_rows",
    "int",
    default=None,
    nullable=True,
    low=1,
    doc="Rows per chunk (full-width strips), rounded up to the file's block height.",
)
crs = Param(
    "crs",
    "str",
    default=None,
    nullable=True,
    doc="For an image without CRS: 'none' clusters it in pixel coordinates (a warning; "
    "the label map has no CRS), or the CRS to assign ('EPSG:32618').",
)
roi = Param(
    "roi",
    "mapping",
    default=None,
    nullable=True,
    doc="Region of interest: {bounds: [xmin, ymin, xmax, ymax]} in the image's CRS, or "
    "{window: [col_off, row_off, width, height]} in pixels.",
)
storage = STORAGE_OPTIONS
nodata = Param("nodata", "float", default=None, nullable=True)


def layout(default: str) -> Param:
    """The axis order of a 3-D array image: rows, cols, bands or bands, rows, cols."""
    return Param("layout", "str", default=default, choices=("yxb", "byx"))


register_reader(
    Reader(
        name="geotiff",
        params=(
            Param("path", "str", doc="GeoTIFF file or URL (s3://, https://, /vsis3/, ...)."),
            Param("bands", "int_list", default=None, nullable=True, doc="1-based bands to keep."),
            scale,
            coord,
            chunk,
            crs,
            roi,
            storage,
        ),
        load=load_geotiff,
        files=geotiff_files,
        urls=("path",),
        description="A GeoTIFF (rioxarray): bands, nodata mask, CRS and transform kept.",
        raster=True,
    )
)
register_reader(
    Reader(
        name="demo-landsat",
        params=(scale, coord, chunk, roi),
        load=load_demo_landsat,
        description="The vendored CC0 Landsat 7 scene RGB.byte.tif (no DKERNEL_DATA needed).",
        raster=True,
    )
)
register_reader(
    Reader(
        name="npy-raster",
        params=(
            Param("path", "str"),
            layout("yxb"),
            nodata,
            Param("labels_path", "str", default=None, nullable=True),
            scale,
            coord,
            roi,
        ),
        load=load_npy_raster,
        description="A 3-D .npy image (rows, cols, bands) or (bands, rows, cols).",
        raster=True,
    )
)
register_reader(
    Reader(
        name="zarr-raster",
        params=(
            Param("path", "str", doc="Zarr store folder or URL (s3://bucket/cube.zarr, ...)."),
            Param("variable", "str", default=None, nullable=True),
            layout("byx"),
            nodata,
            scale,
            coord,
            Param(
                "missing_chunks",
                "str",
                default="error",
                choices=("error", "nodata"),
                doc="A chunk with no file (it reads as the fill value): 'error', or "
                "'nodata' when the store was written without its empty chunks.",
            ),
            crs,
            roi,
            storage,
        ),
        load=load_zarr_raster,
        files=zarr_raster_files,
        urls=("path",),
        description=(
            "An xarray cube in a Zarr store (CRS, coordinates, band names kept) or a "
            "plain 3-D Zarr array."
        ),
        raster=True,
    )
)
register_reader(
    Reader(
        name="stac",
        params=(
            Param("path", "str", doc="STAC item or item collection JSON: file or URL."),
            Param("assets", "list", default=None, nullable=True, doc="Asset names (bands)."),
            Param(
                "crs",
                "str",
                default=None,
                nullable=True,
                doc="Output CRS (default: the items' native one).",
            ),
            Param(
                "resolution",
                "float",
                default=None,
                nullable=True,
                low=0.0,
                doc="Output pixel size in CRS units (default: native).",
            ),
            Param(
                "bounds",
                "float_list",
                default=None,
                nullable=True,
                doc="[xmin, ymin, xmax, ymax] in crs when given, else longitude/latitude.",
            ),
            scale,
            coord,
            roi,
            storage,
        ),
        load=load_stac,
        files=stac_files,
        description="STAC item(s) loaded lazily with odc-stac: named assets on one grid.",
        raster=True,
        urls=("path",),
    )
)
hs_scale = Param(
    "scale",
    "str",
    default="none",
    choices=SCALES,
    doc="Band scaling (reflectances are already in [0, 1]).",
)
for scene, text in (
    ("samson", "Samson (95 × 95 × 156)"),
    ("jasper", "Jasper Ridge (100 × 100 × 198)"),
):
    register_reader(
        Reader(
            name=scene,
            params=(
                Param("path", "str", default="${DKERNEL_DATA}", doc="DKERNEL_DATA folder."),
                hs_scale,
                coord,
            ),
            load=lambda path="${DKERNEL_DATA}", scale="none", coord_scale=0.25, _s=scene: (
                load_hyperspectral(_s, expand_data_path(path), scale, coord_scale)
            ),
            files=lambda path="${DKERNEL_DATA}", _s=scene, **_: hyperspectral_files(_s, path),
            description=f"{text} hyperspectral scene with argmax-abundance ground truth.",
            raster=True,
        )
    )
