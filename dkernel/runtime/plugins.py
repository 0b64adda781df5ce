"""Worker plugins a job registers on its cluster."""

from __future__ import annotations

from typing import Any

from distributed import WorkerPlugin

from dkernel.io.gdal import GDAL_CACHE_MB, limit_gdal_cache


class GDALCacheLimit(WorkerPlugin):
    """Bound every worker's GDAL block cache (:mod:`dkernel.io.gdal`), on workers that join
    later too."""

    name = "dkernel-gdal-cache"

    def __init__(self, megabytes: int = GDAL_CACHE_MB) -> None:
        self.megabytes = int(megabytes)

    def setup(self, worker: Any) -> None:
        limit_gdal_cache(self.megabytes)


def register_job_plugins(client: Any) -> None:
    """Register the plugins of :mod:`dkernel.runtime.plugins` on ``client``'s cluster."""
    client.register_plugin(GDALCacheLimit())
