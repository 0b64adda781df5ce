"""GDAL's block cache, bounded in every process that reads or writes rasters for a job.

GDAL keeps decoded blocks in a process-wide cache of 5 % of the RAM by default. A job decodes
every tile of a scene once, so without a bound a worker's memory grows with the scene (≈ 100 MiB
per worker for a 9 · 10⁶-pixel, 6-band uint16 scene on two workers, up to 1.2 GiB for a
Sentinel-2 tile) while the cache never serves a second read.
"""

from __future__ import annotations

#: GDAL block cache (MiB) of a job's processes. Reads cover whole rows of the file's blocks
#: (:func:`dkernel.io.raster.block_rows`) and GDAL decodes each block once per read, so the
#: cache never serves a later read: it only has to hold the blocks of one read in flight (a
#: pixel-interleaved 512 × 512 tile of 6 uint16 bands is 3 MiB). 16 MiB keeps one decode
#: per tile (``benchmarks/results/tile_reads.md``) while a full cache no longer adds to a
#: worker's memory on large scenes (64 MiB did: ≈ 50 MiB more per process at 10⁸ pixels
#: than at 10⁶, where the whole scene is 12 MB).
GDAL_CACHE_MB = 16


def limit_gdal_cache(megabytes: int = GDAL_CACHE_MB) -> None:
    """Bound this process's GDAL block cache (no-op without rasterio)."""
    try:
        from rasterio.env import set_gdal_config
    except ImportError:  # pragma: no cover - rasterio is a dependency
        return
    set_gdal_config("GDAL_CACHEMAX", int(megabytes))
