"""Readers of two co-registered images (change detection between two dates).

Importing this module registers ``geotiff-pair`` without importing its implementation
(``dkernel.change.pair``, which needs Dask, xarray and rasterio).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dkernel._lazy import deferred
from dkernel.io.data import SCALES
from dkernel.io.readers.images import chunk, geotiff_files
from dkernel.io.registry import Reader, register_reader
from dkernel.schema.params import Param

load_geotiff_pair = deferred("dkernel.change.pair", "load_geotiff_pair")


def geotiff_pair_files(path: str, after_path: str, **_: Any) -> list[Path]:
    """The files GDAL reads for both dates."""
    return [*geotiff_files(path), *geotiff_files(after_path)]


register_reader(
    Reader(
        name="geotiff-pair",
        params=(
            Param("path", "str", doc="GeoTIFF of the first date (before)."),
            Param("after_path", "str", doc="GeoTIFF of the second date, on the same grid."),
            Param("bands", "int_list", default=None, nullable=True, doc="1-based bands of both."),
            Param(
                "scale",
                "str",
                default="none",
                choices=SCALES,
                doc="Per-band scaling of the stacked bands (change detection is invariant "
                "to it; 'none' keeps the values).",
            ),
            chunk,
        ),
        load=load_geotiff_pair,
        files=geotiff_pair_files,
        description="Two co-registered GeoTIFFs (before, after) on the same grid, for "
        "change-detection; refused at validation when their grids differ.",
        raster=True,
    )
)
