"""``method: pck-spectral`` — PCK (PCKID when values are missing) spectral clustering.

The job fits ``dkernel.spectral.pck.PCKSpectralClustering`` (with the job's placement of Γ and
its k-means restarts) and writes what it found: a GMM ensemble fitted across the job's workers →
posterior feature map Γ (never K) → centred KPCA (Løkse 2020, Paper I, Eq. 5 [Lokse2020]) or the
normalised (NJW, [Ng2002]) embedding from the SVD of Γ or D^{-1/2}Γ → k-means. Γ is held in
memory when it fits ``GAMMA_MEMORY_LIMIT``; otherwise it stays lazy and, with ``solver: auto``,
the embedding comes from the subspace of a uniform row subsample's Γ and one pass over all rows
(:mod:`dkernel.spectral.subsample`; 7 passes with ``solver: randomized``). Writes ``/gmm``
(parameters of every (q, g) model, NaN-padded to G components, and the mean posterior entropy
per model), ``/embedding``, ``/labels``, optionally ``/features`` (Γ/√Z) and ``/kernel``
(blocked K, only on request), and ``/metrics`` when ground truth is given.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from dkernel._budget import KERNEL_BLOCK_BYTES, rows_of_max_samples
from dkernel._lazy import deferred
from dkernel.errors import InvalidInputError
from dkernel.io.data import LoadedData
from dkernel.jobs.outputs import (
    RASTER_OUTPUT_PARAMS,
    Group,
    LabelMap,
    Metrics,
    Output,
    Timing,
    model_order_outputs,
)
from dkernel.jobs.registry import Cost, JobContext, Method, chunk_rows_param, register_method
from dkernel.schema.cache import constants
from dkernel.schema.estimator import EstimatorSchema
from dkernel.schema.params import Param
from dkernel.spectral import pck_memory

if TYPE_CHECKING:
    import xarray as xr

    from dkernel.gmm.em import DiagMixtures
    from dkernel.gmm.graph import FullMixtures
    from dkernel.gmm.pck import ProbabilisticClusterKernel
    from dkernel.spectral.pck import PCKSpectralClustering
else:
    DiagMixtures = deferred("dkernel.gmm.em", "DiagMixtures")

# imported on first use (dkernel._lazy.deferred), constants read from the stored derivation
# (dkernel.schema.cache): `dkernel validate` and `dkernel methods` import every step, without
# Dask or scikit-learn (tests/test_cli_imports.py)
da = deferred("dask.array")
SpectralEstimator = deferred("dkernel.spectral.pck", "PCKSpectralClustering")
embedding_dataset, features_dataset, gmm_dataset, kernel_dataset, labels_dataset = deferred(
    "dkernel.storage.layout",
    "embedding_dataset",
    "features_dataset",
    "gmm_dataset",
    "kernel_dataset",
    "labels_dataset",
)
# where Γ is kept (dense, sparse, lazy) and the lazy route's subsample: the estimator's limits
SPARSE_CUT = constants("dkernel.spectral.pck", "SPARSE_CUT")

logger = logging.getLogger(__name__)

KERNEL_LIMIT = 20_000  # rows above which /kernel (N × N) is refused


def _check_projection(value: float) -> str | None:
    """What ``ProbabilisticClusterKernel.fit`` would refuse, refused at validation."""
    if value < 1 or float(value).is_integer():
        return None
    return "must be a fraction in (0, 1) or a whole number of components"


#: The PCK ensemble's parameters, derived from the estimator.
PCK_SCHEMA = EstimatorSchema(
    "dkernel.gmm.pck:ProbabilisticClusterKernel",
    overrides={"projection": {"check": _check_projection}},
)
#: The embedding's and the final k-means' parameters, derived from the spectral estimator
#: (their defaults are declared there).
EMBEDDING_SCHEMA = EstimatorSchema(
    "dkernel.spectral.pck:PCKSpectralClustering", include=("embedding", "n_init")
)

PARAMS = (
    Param(
        "n_clusters",
        "int",
        low=1,
        str_options=("auto",),
        doc="Number of clusters (k); 'auto': chosen from the spectrum (/model_order).",
    ),
    *PCK_SCHEMA.params,
    *EMBEDDING_SCHEMA.params,
    Param("n_components", "int", default=None, nullable=True, low=1, doc="Default n_clusters."),
    Param(
        "solver",
        "str",
        default="auto",
        choices=("auto", "exact", "randomized"),
        doc="auto: by cost; a Γ too large to hold is embedded from a row subsample's subspace "
        "and one pass over all rows.",
    ),
    Param("store_features", "bool", default=False, doc="Write Γ/√Z to /features."),
    Param("store_kernel", "bool", default=False, doc=f"Write K to /kernel (N <= {KERNEL_LIMIT})."),
    chunk_rows_param("Rows per chunk of Γ."),
    *RASTER_OUTPUT_PARAMS,
)


def _largest_k(params: dict, n: int) -> int:
    """The most components the fit may embed: ``n_clusters``, or with 'auto' one more than
    the largest candidate (:func:`dkernel.model_order.candidate_range`), at most n."""
    if params["n_clusters"] != "auto":
        return int(params["n_clusters"])
    from dkernel.model_order import candidate_range

    return min(n, int(candidate_range(max(n, 3))[-1]) + 1)


def _Q(params: dict) -> int:
    """The ensemble's size: ``n_estimators``, or its former name ``n_inits`` when the spec
    still writes it."""
    return int(params.get("n_inits") or params["n_estimators"])


def _max_samples(params: dict) -> int | float:
    """The rows each ensemble member trains on (a count or a fraction): ``max_samples``, or
    its former name ``subsample`` when the spec still writes it."""
    return params.get("subsample") or params["max_samples"]


def _F(params: dict) -> int:
    G = params["max_components"]
    return _Q(params) * (G * (G + 1) // 2 - 1)


def _projection(value: float | None) -> int | float | None:
    """The estimator's ``projection``: whole numbers as component counts."""
    return None if value is None else int(value) if value >= 1 else float(value)


def check_data(params: dict, data: LoadedData) -> None:
    n = data.n_samples
    if params["missingness"] == "informative" and params["covariance_type"] == "full":
        raise InvalidInputError(
            "params.missingness: informative is implemented for covariance_type: diag only; "
            "use covariance_type: diag or missingness: ignorable."
        )
    if params["missingness"] == "informative" and params["projection"] is not None:
        raise InvalidInputError(
            "params.missingness: informative models which input columns are missing and cannot "
            "be combined with params.projection; use projection: null or missingness: ignorable."
        )
    if params["n_clusters"] != "auto" and params["n_clusters"] > n:
        raise InvalidInputError(
            f"params.n_clusters ({params['n_clusters']}) is larger than the number of samples "
            f"({n})."
        )
    k = params["n_components"] or _largest_k(params, n)
    if k > n:
        raise InvalidInputError(f"params.n_components ({k}) must be <= n_samples ({n}).")
    n_sub = rows_of_max_samples(_max_samples(params), n)
    if n_sub < params["max_components"]:
        raise InvalidInputError(
            f"params.max_samples ({_max_samples(params)}) of {n} rows gives {n_sub} rows, fewer "
            f"than params.max_components ({params['max_components']}); lower max_components or "
            "raise max_samples."
        )
    if params["store_kernel"] and n > KERNEL_LIMIT:
        raise InvalidInputError(
            f"params.store_kernel would write a {n} x {n} kernel; allowed up to {KERNEL_LIMIT} "
            "rows. Use store_features (Γ, whose Gram matrix is K) instead."
        )


def gamma_placement(params: dict, n_samples: int) -> str:
    """Where the job keeps Γ (:func:`dkernel.spectral.pck_memory.gamma_placement` of its
    parameters): ``'dense'``, ``'sparse'`` (only when neither /features nor /kernel is
    written) or ``'lazy'``."""
    return pck_memory.gamma_placement(
        n_samples,
        _F(params),
        _Q(params) * (params["max_components"] - 1),
        4 if params["dtype"] == "float32" else 8,
        solver=params["solver"],
        allow_sparse=not (params["store_features"] or params["store_kernel"]),
    )


def subsample_size(params: dict, n_samples: int) -> int:
    """Rows of the subsample whose Γ the lazy route holds
    (:func:`dkernel.spectral.pck_memory.subsample_size` of the job's parameters)."""
    return pck_memory.subsample_size(
        n_samples, _F(params), 4 if params["dtype"] == "float32" else 8
    )


def estimate(params: dict, n_samples: int, n_features: int) -> Cost:
    F = _F(params)
    G = params["max_components"]
    C = G * (G + 1) // 2 - 1  # components of one task
    item = 4 if params["dtype"] == "float32" else 8
    n_sub = rows_of_max_samples(_max_samples(params), n_samples)
    task = 8.0 * n_sub * n_features * 3 + 4 * KERNEL_BLOCK_BYTES + 8.0 * C * n_features * 4
    k = params["n_components"] or _largest_k(params, n_samples)
    l = k + 20  # the randomized solver's basis (n_oversamples = 20)
    gamma = 8.0 * (n_samples + F) * l * 2
    placement = gamma_placement(params, n_samples)
    if placement == "dense":
        gamma += item * n_samples * F
        if params["solver"] != "randomized":
            gamma += 8.0 * min(n_samples, F) ** 2  # the Gram route's matrix
    elif placement == "sparse":
        gamma += n_samples * 2 * _Q(params) * (G - 1) * (item + 4)
    elif params["solver"] == "auto":
        gamma += item * subsample_size(params, n_samples) * F
    memory = 8.0 * n_samples * n_features * 2 + task + gamma
    disk = 8.0 * n_samples * 8
    if params["store_features"]:
        disk += item * n_samples * F
    if params["store_kernel"]:
        disk += 8.0 * n_samples * n_samples
    return Cost(
        memory_bytes=memory,
        disk_bytes=disk,
        what=f"PCK ensemble of {_Q(params) * (G - 1)} GMMs, Γ with {F} features",
        alternative="smaller n_estimators / max_components, or store_features: false.",
    )


def _gmm_dataset(est: ProbabilisticClusterKernel, entropy: np.ndarray) -> xr.Dataset:
    """The ``/gmm`` group from the fitted ensemble's per-model parameters."""
    means, second, weights = [], [], []
    # fit stacks diagonal mixtures, or lists full-covariance ones (covariance_type)
    ensemble = cast("DiagMixtures | FullMixtures", est.ensemble_)
    probs = getattr(ensemble, "missing_probs", None)
    offs = ensemble.offsets
    for m in range(est.model_inits_.size):
        if isinstance(ensemble, DiagMixtures):
            sl = slice(offs[m], offs[m + 1])
            mu, sec, w = ensemble.means[sl], ensemble.variances[sl], ensemble.weights[sl]
        else:
            mu, sec, w = ensemble.models[m]
        means.append(mu)
        second.append(sec)
        weights.append(w)
    return gmm_dataset(
        inits=est.model_inits_,
        components=est.model_components_,
        means=means,
        second_moments=second,
        weights=weights,
        missing_probs=None
        if probs is None
        else [probs[offs[m] : offs[m + 1]] for m in range(len(means))],
        n_inits=est._n_estimators(),
        max_components=int(est.max_components_),
        covariance_type=est.covariance_type_,
        location=est.location_,
        feature_index=np.flatnonzero(est.feature_mask_),
        mean_entropy=entropy,
        projection=est.projection_components_,
        projection_variance_ratio=None
        if est.projection_components_ is None
        else est.projection_variance_ratio_,
        attrs={
            "n_iter": int(est.n_iter),
            "max_samples": est._max_samples(),
            "subsample": est._max_samples(),  # the key before max_samples: kept for readers
            "reg_covar": float(est.reg_covar),
            "dtype": str(est.dtype),
            "missingness": est.missingness,
            "projection": "none" if est.projection is None else est.projection,
            "normalizer": est.normalizer_,
            "n_features_out": est.n_features_out_,
            "seed": est.seed_,
        },
    )


def compute(ctx: JobContext) -> Iterator[Output]:
    p = ctx.params
    X = ctx.data.X
    n = int(X.shape[0])
    placement = gamma_placement(p, n)
    est = SpectralEstimator(
        p["n_clusters"],
        pck=PCK_SCHEMA.build(p, projection=_projection(p["projection"]), random_state=ctx.seed),
        embedding=p["embedding"],
        n_components=p["n_components"],
        solver=p["solver"],
        n_init=p["n_init"],
        placement=placement,
        chunk_rows=p["chunk_rows"],
        random_state=ctx.seed,
    )
    est.fit(X)
    for phase, seconds in est.timings_.items():
        yield Timing(phase, seconds)
    _log_fit(p, est, n)

    t = time.perf_counter()
    yield Group("gmm", _gmm_dataset(est.pck_, est.model_entropy_))
    yield Group(
        "embedding",
        embedding_dataset(
            est.embedding_,
            est.eigenvalues_,
            degrees=est.degrees_,
            attrs={
                "method": p["embedding"],
                "kernel": "pck",
                "variant": est.variant_,
                "solver": est.solver_,
                "criterion": "eigenvalue",
                "n_missing": est.n_missing_,
                **({"subsample_rows": est.subsample_rows_} if est.solver_ == "subsample" else {}),
            },
        ),
    )
    yield Group(
        "labels",
        labels_dataset(
            est.labels_,
            n_clusters=int(est.n_clusters_),
            clustering="k-means",
            centers=est.cluster_centers_,
            inertia=est.inertia_,
        ),
    )
    yield from _gamma_groups(p, est, X)
    yield from model_order_outputs(est)
    yield Timing.since("write", t)
    yield LabelMap(est.labels_, "PCK spectral clustering")
    yield Metrics(est.labels_)


def _log_fit(p: dict, est: PCKSpectralClustering, n: int) -> None:
    """The ensemble, where Γ was kept, the solver and why, the eigenvalues."""
    pck = est.pck_
    logger.info(
        f"{est.variant_}: {pck.model_inits_.size} GMMs ({pck.covariance_type_} covariance), "
        f"F = {pck.n_features_out_} features, {est.n_missing_} missing values"
    )
    if est.placement_ == "sparse":
        held = f"held in memory, sparse ({est.nnz_per_row_:.0f} entries per row ≥ {SPARSE_CUT:g})"
    else:
        held = "held in memory" if est.placement_ == "dense" else "lazy, recomputed once per pass"
    logger.info(
        f"Γ ({n} x {pck.n_features_out_}, {p['dtype']}) {held}; {est.solver_reason_}"
        + ("" if p["solver"] == "auto" else f"; solver: {p['solver']} as asked")
    )
    logger.info(f"{p['embedding']} eigenvalues {np.round(est.eigenvalues_, 4).tolist()}")


def _gamma_groups(p: dict, est: PCKSpectralClustering, X: Any) -> Iterator[Output]:
    """``/features`` (Γ/√Z) and ``/kernel`` (K = Γ Γᵀ, blocked) when asked for, written by
    the workers. Γ is computed again as the estimator computed it for the embedding (dense
    from the data in memory, or lazy in ``chunk_rows_`` chunks); stored, it is never sparse
    (:func:`gamma_placement`)."""
    if not (p["store_features"] or p["store_kernel"]):
        return
    rows = est.chunk_rows_
    if est.placement_ == "lazy":
        Xd = (
            X.rechunk({0: rows, 1: -1})
            if isinstance(X, da.Array)
            else da.from_array(np.asarray(X), chunks=(rows, -1))
        )
        G = est.pck_.transform(Xd)
    else:
        Xn = X.compute() if isinstance(X, da.Array) else np.asarray(X)
        G = da.from_array(est.pck_.transform(Xn), chunks=(rows, -1))
    if p["store_features"]:
        yield Group("features", features_dataset(G), lazy=True)
    if p["store_kernel"]:
        attrs = {"kernel": "pck", "normalized": False}
        yield Group("kernel", kernel_dataset(G @ G.T, attrs=attrs, block_size=2048), lazy=True)


register_method(
    Method(
        name="pck-spectral",
        params=PARAMS,
        compute=compute,
        check_data=check_data,
        estimate=estimate,
        description="Probabilistic cluster kernel (PCKID with missing values): GMM ensemble "
        "across workers → KPCA / normalized embedding from Γ (K never formed) → k-means.",
        estimators=(PCK_SCHEMA,),
        example={
            "data": {"reader": "sklearn", "name": "iris", "standardize": True},
            "params": {"n_clusters": 3, "n_estimators": 6, "max_components": 6, "n_init": 5},
        },
        bad_data={"n_clusters": 2, "n_estimators": 3, "max_components": 3},
        handles_missing=True,  # a PCK models NaN as missing,
    )
)
