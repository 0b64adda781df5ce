"""GDAL's block cache, bounded in every process that reads or writes rasters for a job.

GDAL keeps decoded blocks in a process-wide cache of 5 % of the RAM by default. A job decodes
every tile of a scene once, so without a bound a worker's memory grows with the scene (≈ 100 MiB
per worker for a 9 · 10⁶-pixel, 6-band uint16 scene on two workers, up to 1.2 GiB for a
Sentinel-2 tile) while the cache never serves a second read.
"""

from __future__ import annotations

#: GDAL block cache (MiB) of a job's processes: a few 512-row strips of tiles.
GDAL_CACHE_MB = 64


def limit_gdal_cache(megabytes: int = GDAL_CACHE_MB) -> None:
    """Bound this process's GDAL block cache (no-op without rasterio)."""
    try:
        from rasterio.env import set_gdal_config
    except ImportError:  # pragma: no cover - rasterio is a dependency
        return
    set_gdal_config("GDAL_CACHEMAX", int(megabytes))
