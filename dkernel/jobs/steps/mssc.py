"""Job method ``mssc``: mean-shift partitions → Cauchy–Schwarz affinity → NJW/KPCA/KECA → labels.

The defaults are :class:`~dkernel.meanshift.MSSC`'s (a test keeps them equal): multi- and
hyperspectral non-negative bands are scaled to unit length per pixel (``band_norm='auto'``,
decided by the reader's hint or by the bands, done by the estimator: the spectral angle,
brightness dropped; pixel coordinates kept); the partition affinity uses ``h_spec`` = half the
median pixel distance and is clustered by normalized spectral clustering (``embedding='njw'``).
See ``benchmarks/results/mssc_scenes.md`` and ``mssc_stability.md`` for the choice.

Writes ``/mssc`` (label raster and partition raster with dims ``y``, ``x``, the valid mask and
the image's CRS/transform as a ``spatial_ref`` coordinate; modes, bandwidths, partition
affinity, embedding, partition labels) and, beside the store, the map files of
:func:`dkernel.jobs.outputs.write_map_files` (label COG, class table, quick-look, segments),
their paths recorded in the ``/mssc`` attributes.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import xarray as xr

from dkernel._validation import as_numpy
from dkernel.errors import InvalidInputError
from dkernel.io.data import LoadedData
from dkernel.jobs.outputs import (
    RASTER_OUTPUT_PARAMS,
    write_clustering_metrics,
    write_map_files,
    write_map_group,
)
from dkernel.jobs.registry import Cost, JobContext, Method, register_method
from dkernel.schema.params import Param

PARAMS = (
    Param("n_clusters", "int", default=5, low=1, doc="Number of output clusters."),
    Param(
        "bandwidth",
        "float",
        default=None,
        nullable=True,
        low=0,
        low_open=True,
        doc="Mean-shift bandwidth h_ms (Silverman's rule of thumb when null).",
    ),
    Param(
        "bandwidth_factor",
        "float",
        default=0.5,
        low=0,
        low_open=True,
        doc="Multiplies Silverman's h_ms when bandwidth is null (over-partition on purpose).",
    ),
    Param(
        "spectral_bandwidth",
        "float",
        default=None,
        nullable=True,
        low=0,
        low_open=True,
        doc="CS-affinity bandwidth (spectral_fraction × the median pixel distance when null).",
    ),
    Param(
        "spectral_fraction",
        "float",
        default=0.5,
        low=0,
        low_open=True,
        doc="h_spec, the width of the partition affinity, as a fraction of the median pixel distance.",
    ),
    Param(
        "regularization",
        "float",
        default=1.0,
        low=0,
        doc=(
            "'njw': every pixel's degree + this × the mean degree (regularized spectral "
            "clustering; 0: plain NJW, which isolates seed-dependent outlier partitions)."
        ),
    ),
    Param(
        "band_norm",
        "str",
        default="auto",
        choices=("auto", "unit", "none"),
        doc=(
            "'unit': every pixel's band vector to unit length (spectral angle; coordinates "
            "kept); 'auto': 'unit' when no band feature is negative, else 'none'."
        ),
    ),
    Param(
        "embedding",
        "str",
        default="njw",
        choices=("njw", "kpca", "keca"),
        doc=(
            "Normalized spectral clustering (NJW), KPCA + k-means or KECA + angular k-means "
            "on the partition affinity."
        ),
    ),
    Param(
        "affinity",
        "str",
        default="auto",
        choices=("auto", "exact", "sample", "rff"),
        doc=(
            "Exact blocked CS sums, the same on a 20000-pixel sample stratified by partition, "
            "or random Fourier features (auto: exact up to 20000 pixels, else sample)."
        ),
    ),
    Param("n_rff", "int", default=1000, low=1, doc="Random Fourier features for 'rff'."),
    Param("n_init", "int", default=100, low=1, doc="k-means restarts in stage two."),
    Param(
        "normalization",
        "str",
        default="size",
        choices=("size", "cs"),
        doc="'size': S_ij/sqrt(n_i n_j), partitions weighted by pixel count; 'cs': the Cauchy-Schwarz divergence normalization.",
    ),
    Param("blurring", "bool", default=False, doc="Blurring mean shift."),
    Param(
        "seeds",
        "str",
        default="kmeans",
        choices=("all", "grid", "kmeans"),
        doc="Mode-finding vectors: all sampled pixels, grid bins or a k-means pre-partition.",
    ),
    Param("n_seeds", "int", default=500, low=1, doc="k-means seeds."),
    Param(
        "density",
        "str",
        default="seeds",
        choices=("sample", "seeds"),
        doc="Density from a pixel sample or from the count-weighted seeds.",
    ),
    Param(
        "n_density",
        "int",
        default=20000,
        low=2,
        doc="Pixels sampled for the pre-partition / density.",
    ),
    Param("max_iter", "int", default=300, low=1, doc="Mean-shift iteration cap."),
    Param("tol", "float", default=1e-3, low=0, doc="Convergence tolerance (× h)."),
    Param(
        "group_factor",
        "float",
        default=0.25,
        low=0,
        doc="Mode grouping threshold relative to the median move.",
    ),
    Param(
        "path_radius",
        "float",
        default=0.3,
        low=0,
        high=1,
        doc="Streaming assignment stops within this × h of a seed trajectory.",
    ),
    *RASTER_OUTPUT_PARAMS,
)


def check_data(params: dict, data: LoadedData) -> None:
    if data.raster is None:
        raise InvalidInputError("method 'mssc' needs an image reader (geotiff, demo-landsat, ...).")
    if params["n_clusters"] > data.n_samples:
        raise InvalidInputError(
            f"params.n_clusters={params['n_clusters']} exceeds the {data.n_samples} valid pixels."
        )


def estimate(params: dict, n_samples: int, n_features: int) -> Cost:
    m = min(n_samples, params["n_density"])
    per_chunk = 2**18 * m * 4 / 8  # kernel blocks are bounded by BLOCK_BYTES; rough upper bound
    return Cost(
        memory_bytes=float(
            n_samples * (n_features * 4 + 8)
            + min(per_chunk, 64 * 2**20)
            + params["n_rff"] * (n_features + 1024) * 8
        ),
        disk_bytes=float(n_samples * 8),
        what=f"MSSC on {n_samples} pixels",
    )


def run(ctx: JobContext) -> None:
    from dkernel.io.preprocess import resolve_band_norm
    from dkernel.io.raster import image_strips, labels_on_grid, strip_counts
    from dkernel.meanshift.estimators import MSSC
    from dkernel.storage.geo import label_map as georeferenced_labels
    from dkernel.storage.geo import valid_mask

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
    est = MSSC(
        n_clusters=p["n_clusters"],
        bandwidth=p["bandwidth"],
        spectral_bandwidth=p["spectral_bandwidth"],
        spectral_fraction=p["spectral_fraction"],
        embedding=p["embedding"],
        affinity=p["affinity"],
        n_rff=p["n_rff"],
        n_init=p["n_init"],
        normalization=p["normalization"],
        regularization=p["regularization"],
        band_norm=band_norm,
        n_bands=n_bands,
        blurring=p["blurring"],
        seeds=p["seeds"],
        n_seeds=p["n_seeds"],
        density=p["density"],
        n_density=p["n_density"],
        max_iter=p["max_iter"],
        tol=p["tol"],
        group_factor=p["group_factor"],
        path_radius=p["path_radius"],
        bandwidth_factor=p["bandwidth_factor"],
        random_state=ctx.seed,
        progress=ctx.progress,
    )
    t = time.perf_counter()
    _fit(ctx, est, X)
    band_norm = est.band_norm_
    labels = est.labels_  # NumPy or Dask: the maps are built strip by strip either way
    partition = est.partition_labels_  # partition -> cluster
    ctx.store.record_timing("mssc_fit", time.perf_counter() - t)
    ctx.log(
        f"[dkernel] mean shift: h_ms={est.bandwidth_:.4g}, {est.n_partitions_} partitions "
        f"({est.n_iter_} iterations); affinity {est.affinity_method_}, "
        f"h_spec={est.spectral_bandwidth_:.4g}; bands {band_norm}"
    )

    counts = strip_counts(image, X)
    lab_da = georeferenced_labels(labels_on_grid(labels, image, counts), image)
    part_da = georeferenced_labels(
        labels_on_grid(est.pixel_partitions_, image, counts), image, name="partition"
    )
    m, k = est.n_partitions_, p["n_clusters"]
    attrs = {
        "bandwidth": est.bandwidth_,
        "spectral_bandwidth": est.spectral_bandwidth_,
        "n_partitions": m,
        "n_clusters": k,
        "embedding": p["embedding"],
        "normalization": p["normalization"],
        "regularization": p["regularization"],
        "band_norm": band_norm,
        "affinity_method": est.affinity_method_,
        "mean_shift_iterations": est.n_iter_,
        "mean_shift_converged": bool(est.converged_),
        "group_threshold": est.group_threshold_,
        "kmeans_cost": est.kmeans_cost_,
        "feature_names": ctx.data.feature_names or [],
        "features": ctx.data.meta.get("features", {}),
        "nodata": -1,
    }
    if image.rio.crs is not None:
        attrs["crs"] = image.rio.crs.to_string()
        attrs["transform"] = list(image.rio.transform())[:6]
    t = time.perf_counter()
    ds = xr.Dataset(
        {
            "labels": lab_da,
            "partition": part_da,
            "valid": valid_mask(image_strips(image)[1], image),
            "modes": (("partition_id", "feature"), est.modes_),
            "partition_labels": (("partition_id",), partition),
            "partition_sizes": (("partition_id",), est.partition_sizes_),
            "affinity": (("partition_id", "partition_id_"), est.affinity_),
            "embedding": (("partition_id", "component"), est.embedding_),
            "eigenvalues": (("component",), est.eigenvalues_),
            "density": (("density_point", "feature"), est.density_),
            "seeds": (("seed", "feature"), est.seeds_),
            "seed_partition": (("seed",), est.seed_labels_),
        },
        attrs=attrs,
    )
    write_map_group(ctx, "mssc", ds)
    ctx.store.record_timing("mssc_write", time.perf_counter() - t)
    stored = ctx.store.read_array("mssc", "labels")
    files = write_map_files(ctx, stored, title=f"MSSC: {m} partitions → {k} clusters")
    ctx.store.update_group_attrs("mssc", **files)
    if ctx.data.y is not None:
        write_clustering_metrics(ctx, ctx.data.y, as_numpy(labels))
    ctx.store.clear_scratch()


def _fit(ctx: JobContext, est: Any, X: Any) -> None:
    """Fit MSSC streaming every pixel through mean shift once: the workers write the
    stage-one partitions to a scratch array, which the affinity sample and the maps read."""
    import dask.array as da

    from dkernel.runtime import compute_with_progress

    if not isinstance(X, da.Array):
        est.fit(X)
        return
    est.fit_partitions(X)
    partitions = est.pixel_partitions_.astype(np.int32)
    compute_with_progress(
        ctx.store.write_scratch("partitions", partitions),
        ctx.client,
        show=ctx.progress,
        what="mean-shift partitions",
    )
    est.fit_clusters(X, partitions=ctx.store.read_scratch("partitions", (X.chunks[0],)))


register_method(
    Method(
        name="mssc",
        params=PARAMS,
        run=run,
        check_data=check_data,
        estimate=estimate,
        needs_raster=True,
        description="Mean-shift partitions → Cauchy–Schwarz affinity → NJW/KPCA/KECA → label map.",
    )
)
