"""Job method ``mssc``: mean-shift partitions → Cauchy–Schwarz affinity → NJW/KPCA/KECA → labels.

The parameters are :class:`~dkernel.meanshift.MSSC`'s, derived from the estimator: multi- and
hyperspectral non-negative bands are scaled to unit length per pixel (``band_norm='auto'``,
decided by the reader's hint or by the bands, done by the estimator: the spectral angle,
brightness dropped; pixel coordinates kept); the partition affinity uses ``h_spec`` = half the
median pixel distance and is clustered by normalized spectral clustering (``embedding='normalized'``),
or by its wide limit when that separates the clusters better (``wide_limit='auto'``).
See ``benchmarks/results/mssc_scenes.md`` and ``mssc_stability.md`` for the choice.

Writes ``/mssc`` (label raster and partition raster with dims ``y``, ``x``, the valid mask and
the image's CRS/transform as a ``spatial_ref`` coordinate; modes, bandwidths, partition
affinity, embedding, partition labels) and, beside the store, the map files of
:func:`dkernel.jobs.outputs.write_map_files` (label COG, class table, quick-look, segments),
their paths recorded in the ``/mssc`` attributes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Generator, Iterator
from typing import Any

import numpy as np

from dkernel._budget import SCRATCH_BLOCK_BYTES, STRIP_PIXELS
from dkernel.errors import InvalidInputError
from dkernel.io.data import LoadedData
from dkernel.jobs.outputs import (
    RASTER_OUTPUT_PARAMS,
    Group,
    MapFiles,
    Metrics,
    Output,
    Scratch,
    Timing,
    model_order_outputs,
)
from dkernel.jobs.registry import Cost, JobContext, Method, register_method
from dkernel.schema.estimator import EstimatorSchema

logger = logging.getLogger(__name__)

#: MSSC's parameters, derived from the estimator (its defaults, ranges and docstring).
MSSC_SCHEMA = EstimatorSchema(
    "dkernel.meanshift.estimators:MSSC",
    exclude={
        "n_bands": "the image reader knows the bands (the other columns are kept)",
        "projection": "the first stage runs on the bands (MSSC's default)",
    },
)

PARAMS = (
    *MSSC_SCHEMA.params,
    *RASTER_OUTPUT_PARAMS,
)


def check_data(params: dict, data: LoadedData) -> None:
    if data.raster is None:
        raise InvalidInputError("method 'mssc' needs an image reader (geotiff, demo-landsat, ...).")
    if params["n_clusters"] != "auto" and params["n_clusters"] > data.n_samples:
        raise InvalidInputError(
            f"params.n_clusters={params['n_clusters']} exceeds the {data.n_samples} valid pixels."
        )


def estimate(params: dict, n_samples: int, n_features: int) -> Cost:
    # density_max_samples, or its former name n_density when the spec still writes it
    m = min(n_samples, int(params.get("n_density") or params["density_max_samples"]))
    # a strip's kernel rows against the density sample, rough upper bound; they are computed
    # in blocks of SCRATCH_BLOCK_BYTES (``dkernel.meanshift.kernels``): a block and its
    # transform at most
    per_chunk = STRIP_PIXELS * m * 4 / 8
    return Cost(
        memory_bytes=float(
            n_samples * (n_features * 4 + 8)
            + min(per_chunk, 2 * SCRATCH_BLOCK_BYTES)
            + params["n_rff"] * (n_features + 1024) * 8
        ),
        disk_bytes=float(n_samples * 8),
        what=f"MSSC on {n_samples} pixels",
    )


def compute(ctx: JobContext) -> Iterator[Output]:
    from dkernel.io.raster import image_strips, labels_on_grid, strip_counts
    from dkernel.meanshift.bands import resolve_band_norm
    from dkernel.storage.layout import mssc_dataset

    p = ctx.params
    image = ctx.data.raster
    n_bands = int(image.shape[0])
    # the reader's hint (what the bands are) decides 'auto'; the estimator scales the bands
    band_norm = p["band_norm"]
    if band_norm == "auto" and ctx.data.meta.get("bands") is not None:
        band_norm = resolve_band_norm(
            ctx.data.X, n_bands, band_norm, bands=ctx.data.meta.get("bands")
        )
    X = ctx.data.X
    est = MSSC_SCHEMA.build(
        p,
        band_norm=band_norm,
        n_bands=n_bands,
        random_state=ctx.seed,
        progress=ctx.progress,
    )
    t = time.perf_counter()
    pixel_partitions = yield from _fit(ctx, est, X)  # NumPy, or Dask read back from scratch
    labels = est.cluster_of_partitions(pixel_partitions)  # maps are built strip by strip
    yield Timing.since("mssc_fit", t)
    logger.info(
        f"mean shift: h_ms={est.bandwidth_:.4g}, {est.n_partitions_} partitions "
        f"({est.n_iter_} iterations); affinity {est.affinity_method_}, "
        f"h_spec={est.sigma_:.4g}{' (stage two: its wide limit)' if est.wide_limit_ else ''}; "
        f"bands {est.band_norm_}; {_partition_graph_text(est)}"
    )

    counts = strip_counts(image, X)
    t = time.perf_counter()
    ds = mssc_dataset(
        labels=labels_on_grid(labels, image, counts),
        partition=labels_on_grid(pixel_partitions, image, counts),
        valid=image_strips(image)[1],
        image=image,
        modes=est.modes_,
        partition_labels=est.partition_labels_,  # partition -> cluster
        partition_sizes=est.partition_sizes_,
        affinity=est.affinity_,
        embedding=est.embedding_,
        eigenvalues=est.eigenvalues_,
        density=est.density_,
        seeds=est.seeds_,
        seed_partition=est.seed_labels_,
        spectrum=est.spectrum_,
        attrs=_attrs(ctx, est),
    )
    yield Group("mssc", ds, lazy=True)
    yield from model_order_outputs(est)
    yield Timing.since("mssc_write", t)
    m, k = est.n_partitions_, est.n_clusters_
    yield MapFiles("mssc", f"MSSC: {m} partitions → {k} clusters")
    yield Metrics(labels)


def _partition_graph_text(est: Any) -> str:
    """The partition graph stage two kept, with the silhouettes that chose it."""
    scores = est.normalization_silhouettes_
    if not scores:
        return f"partition graph '{est.normalization_}'"
    listed = ", ".join(f"'{name}' {score:.3f}" for name, score in scores.items())
    return f"partition graph '{est.normalization_}' (silhouettes {listed})"


def _attrs(ctx: JobContext, est: Any) -> dict[str, Any]:
    """The ``/mssc`` group's attributes."""
    p = ctx.params
    return {
        "bandwidth": est.bandwidth_,
        "spectral_bandwidth": est.sigma_,  # the key before sigma: kept for existing readers
        "sigma": est.sigma_,
        "n_partitions": est.n_partitions_,
        "n_clusters": p["n_clusters"],
        "n_clusters_chosen": int(est.n_clusters_),
        "embedding": p["embedding"],
        "normalization": p["normalization"],
        "normalization_chosen": est.normalization_,
        # normalization='auto': each partition graph's silhouette, the evidence of the choice
        "normalization_silhouettes": (
            None
            if est.normalization_silhouettes_ is None
            else {name: float(s) for name, s in est.normalization_silhouettes_.items()}
        ),
        "degree_regularization": est._degree_regularization(),
        "regularization": est._degree_regularization(),  # the key before: kept for readers
        "wide_limit": p["wide_limit"],
        "wide_limit_chosen": bool(est.wide_limit_),
        # lambda_{k+1} / lambda_k at sigma and in the wide limit (None: undefined)
        "eigengap_ratios": [None if np.isnan(r) else float(r) for r in est.eigengap_ratios_],
        "band_norm": est.band_norm_,
        "affinity_method": est.affinity_method_,
        "mean_shift_iterations": est.n_iter_,
        "mean_shift_converged": bool(est.converged_),
        "group_threshold": est.group_threshold_,
        "kmeans_cost": est.kmeans_cost_,
        "feature_names": ctx.data.feature_names or [],
        "features": ctx.data.meta.get("features", {}),
    }


def _fit(ctx: JobContext, est: Any, X: Any) -> Generator[Output, None, Any]:
    """Fit MSSC streaming every pixel through mean shift once: the workers write the
    stage-one partitions to a scratch array, which the affinity sample and the maps read.
    Returns every pixel's partition (lazy, read from the scratch array, for Dask input)."""
    import dask.array as da

    from dkernel.io.raster import image_strips

    if not isinstance(X, da.Array):
        est.fit(X)
        return est.pixel_partitions_
    est.fit_partitions(X)
    partitions = est.pixel_partitions_.astype(np.int32)
    yield Scratch("partitions", partitions, what="mean-shift partitions")
    # for the affinity sample each strip's partitions are read after the strip's features
    # (a column of them: the read's input), on their worker: the sample's task for the
    # strip then has both inputs there (with partitions read elsewhere the scheduler
    # weighs moving the features against the workers' queues, and often moves them)
    est.fit_clusters(X, partitions=ctx.store.read_scratch("partitions", after=X[:, :1]))
    # the maps pair each strip's partitions with its valid mask: read them after it
    valid = image_strips(ctx.data.raster)[1]
    after = valid if valid.numblocks[0] == len(X.chunks[0]) else None
    return ctx.store.read_scratch("partitions", after=after)


register_method(
    Method(
        name="mssc",
        params=PARAMS,
        compute=compute,
        check_data=check_data,
        estimate=estimate,
        needs_raster=True,
        description="Mean-shift partitions → Cauchy–Schwarz affinity → NJW/KPCA/KECA → label map.",
        estimators=(MSSC_SCHEMA,),
        example={
            "data": {"reader": "npy-raster", "coord_scale": 0.25},
            "params": {
                "n_clusters": 4,
                "n_seeds": 60,
                "density_max_samples": 600,
                "n_rff": 200,
                "n_init": 5,
                "write_geotiff": False,
                "write_png": False,
            },
        },
        bad_data={"n_clusters": 2},
        handles_missing=True,  # pixels with a NaN band are nodata,
    )
)
