"""Reader ``geotiff-pair``: two co-registered GeoTIFFs, before and after, as one image.

The two dates are checked to lie on the same grid (:func:`dkernel.change.detect.check_same_grid`)
when the reader loads, which ``dkernel validate`` and ``dkernel run`` do before any cluster
starts. The image the job sees stacks the before bands and the after bands ``(p + q, y, x)``
with the pixels valid at both dates; ``meta['n_bands_before']`` says where the after bands
start.
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from dkernel.change.detect import check_same_grid
from dkernel.errors import InvalidInputError
from dkernel.io.cube import no_crs_message
from dkernel.io.data import LoadedData, resolve_path
from dkernel.io.raster import open_geotiff, raster_to_loaded


def stack_pair(before: xr.DataArray, after: xr.DataArray) -> xr.DataArray:
    """``before`` and ``after`` (each with a ``valid`` coordinate, same grid) as one image
    ``(p + q, y, x)`` in ``before``'s strips, valid where both are."""
    check_same_grid(before, after)
    after = after.chunk({"band": -1, "y": before.chunks[1], "x": -1})
    valid = before["valid"].data & after["valid"].data
    dtype = np.result_type(before.dtype, after.dtype)
    parts = [before.drop_vars("valid").astype(dtype), after.drop_vars("valid").astype(dtype)]
    p, q = int(before.sizes["band"]), int(after.sizes["band"])
    stacked = xr.concat(parts, dim="band", coords="minimal", compat="override")
    stacked = stacked.assign_coords(band=list(range(1, p + q + 1)), valid=(("y", "x"), valid))
    stacked.attrs = {**before.attrs, "n_bands_before": p}
    return stacked


def load_geotiff_pair(
    path: str,
    after_path: str,
    bands: list[int] | None = None,
    scale: str = "minmax",
    chunk_rows: int | None = None,
) -> LoadedData:
    """Reader ``geotiff-pair``: the pixels valid at both dates, before bands then after bands.

    Raises
    ------
    InvalidInputError
        Either file without a CRS, or the two on different grids (naming the difference).
    """
    before = open_geotiff(path, bands=bands, chunk_rows=chunk_rows)
    after = open_geotiff(after_path, bands=bands, chunk_rows=chunk_rows)
    for image, where in ((before, path), (after, after_path)):
        if image.rio.crs is None:
            raise InvalidInputError(no_crs_message(f"GeoTIFF {where}"))
    image = stack_pair(before, after)
    meta = {
        "source": str(resolve_path(path)),
        "after": str(resolve_path(after_path)),
        "n_bands_before": int(before.sizes["band"]),
    }
    return raster_to_loaded(image, scale=scale, coord_scale=0.0, meta=meta)
