"""Job method ``change-detection``: MAD / IR-MAD / kernel MAD between two dates.

Reads two co-registered GeoTIFFs with reader ``geotiff-pair`` (grids compared when the reader
loads, before any cluster starts), fits on a sample of the pixels valid at both dates and maps
every strip with :func:`dkernel.detect_change`'s functions. Writes ``/change`` (MAD variates,
χ² intensity, change mask as ``labels`` and the valid mask, with the before image's CRS and
transform; canonical correlations, variate scales, the threshold) and, beside the store, the
map files of :func:`dkernel.jobs.outputs.write_map_files`: the change mask as a COG with the
source's CRS and its class table, the χ² intensity and the MAD variates as one float32 COG
(``<stem>.values.tif``, bands ``intensity``, ``variates_1`` …), a quick-look of the two dates
beside the change mask, segments on request.

The parameters are :class:`dkernel.ChangeDetection`'s, derived from the estimator.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

from dkernel._budget import rows_of_max_samples
from dkernel.errors import InvalidInputError
from dkernel.io.data import LoadedData
from dkernel.jobs.outputs import RASTER_OUTPUT_PARAMS, Group, MapFiles, Output, Timing
from dkernel.jobs.registry import Cost, JobContext, Method, register_method
from dkernel.schema.estimator import EstimatorSchema

#: ChangeDetection's parameters, derived from the estimator.
CHANGE_SCHEMA = EstimatorSchema(
    "dkernel.change.estimator:ChangeDetection",
    exclude={"chunk_rows": "the reader's strips"},
)

PARAMS = (*CHANGE_SCHEMA.params, *RASTER_OUTPUT_PARAMS)


def check_data(params: dict, data: LoadedData) -> None:
    if data.raster is None or "n_bands_before" not in data.meta:
        raise InvalidInputError(
            "method 'change-detection' needs two dates: reader geotiff-pair (data.path: the "
            "before GeoTIFF, data.after_path: the after GeoTIFF on the same grid)."
        )
    if data.n_samples < 10:
        raise InvalidInputError(
            f"only {data.n_samples} pixels have data at both dates; change detection needs "
            "at least 10."
        )


def estimate(params: dict, n_samples: int, n_features: int) -> Cost:
    # max_samples, or its former name sample_size when the spec still writes it
    m = params["n_landmarks"]
    s = rows_of_max_samples(params.get("sample_size") or params["max_samples"], n_samples)
    return Cost(
        memory_bytes=float(s * n_features * 8 * 4 + 2 * m * m * 8 + n_samples * 4),
        disk_bytes=float(n_samples * (n_features // 2 + 2) * 4),
        what=f"change detection on {n_samples} pixels",
    )


def compute(ctx: JobContext) -> Iterator[Output]:
    p = ctx.params
    image = ctx.data.raster
    n_before = int(ctx.data.meta["n_bands_before"])
    before = image.isel(band=slice(0, n_before))
    after = image.isel(band=slice(n_before, None))
    t = time.perf_counter()
    ds = CHANGE_SCHEMA.build(p, random_state=ctx.seed).fit_transform(before, after)
    yield Timing.since("change_fit", t)
    t = time.perf_counter()
    yield Group("change", ds, lazy=True)
    yield Timing.since("change_write", t)
    title = {"kernel": "kernel MAD", "irmad": "IR-MAD", "mad": "MAD"}[p["method"]]
    yield MapFiles(
        "change",
        f"Change ({title})",
        values=("intensity", "variates"),
        panels=(("before", slice(0, n_before)), ("after", slice(n_before, None))),
        class_names=("no change", "change"),
    )


register_method(
    Method(
        name="change-detection",
        params=PARAMS,
        compute=compute,
        check_data=check_data,
        estimate=estimate,
        needs_raster=True,
        estimators=(CHANGE_SCHEMA,),
        description="Two dates → (kernel) MAD variates, chi-squared intensity, change mask.",
        example={
            "data": {"reader": "geotiff-pair"},
            "params": {"method": "kernel", "n_landmarks": 60, "max_samples": 800},
        },
        bad_data={"write_geotiff": False, "write_png": False},
    )
)
