"""``method: pck-spectral`` — PCK (PCKID when values are missing) spectral clustering.

GMM ensemble fitted across the job's workers → posterior feature map Γ (never K) → centred KPCA
(Løkse 2020, Paper I, Eq. 5 [Lokse2020]) or the normalised (NJW, [Ng2002]) embedding from the SVD of
Γ or D^{-1/2}Γ → k-means. Γ is held in memory when it fits ``GAMMA_MEMORY_LIMIT``; otherwise it
stays lazy and, with ``solver: auto``, the embedding comes from the subspace of a uniform row
subsample's Γ and one pass over all rows (:mod:`dkernel.spectral.subsample`; 7 passes with
``solver: randomized``). Writes ``/gmm`` (parameters of every (q, g) model, NaN-padded to G
components, and the mean posterior entropy per model), ``/embedding``, ``/labels``, optionally
``/features`` (Γ/√Z) and ``/kernel`` (blocked K, only on request), and ``/metrics`` when ground
truth is given.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from dkernel._lazy import deferred
from dkernel._random import derive_seed
from dkernel.errors import InvalidInputError
from dkernel.io.data import LoadedData
from dkernel.jobs.outputs import RASTER_OUTPUT_PARAMS, Group, LabelMap, Metrics, Output, Timing
from dkernel.jobs.registry import Cost, JobContext, Method, register_method
from dkernel.schema.estimator import EstimatorSchema
from dkernel.schema.params import Param

if TYPE_CHECKING:
    import xarray as xr

    from dkernel.gmm.pck import ProbabilisticClusterKernel

# imported on first use (dkernel._lazy.deferred): `dkernel validate` and `dkernel methods`
# import every step, without Dask or scikit-learn (tests/test_cli_imports.py)
da = deferred("dask.array")
issparse = deferred("scipy.sparse", "issparse")
DiagMixtures = deferred("dkernel.gmm.em", "DiagMixtures")
euclidean_kmeans, normalize_rows = deferred(
    "dkernel.linalg.kmeans", "euclidean_kmeans", "normalize_rows"
)
take_rows = deferred("dkernel.rows", "take_rows")
choose_solver, feature_map_kpca, feature_map_normalized = deferred(
    "dkernel.spectral.feature_map", "choose_solver", "feature_map_kpca", "feature_map_normalized"
)
subsample_kpca, subsample_normalized, subsample_rows = deferred(
    "dkernel.spectral.subsample", "subsample_kpca", "subsample_normalized", "subsample_rows"
)
embedding_dataset, features_dataset, gmm_dataset, kernel_dataset, labels_dataset = deferred(
    "dkernel.storage.layout",
    "embedding_dataset",
    "features_dataset",
    "gmm_dataset",
    "kernel_dataset",
    "labels_dataset",
)

logger = logging.getLogger(__name__)

KERNEL_LIMIT = 20_000  # rows above which /kernel (N × N) is refused
# Γ is computed once and held in memory up to this size (half the default job memory limit),
# dense, or else sparse (posteriors below SPARSE_CUT · √Z dropped: every model's posteriors are
# nearly one-hot, so about Q (G - 1) to 2 Q (G - 1) entries per row remain); a larger Γ stays
# lazy and every pass over it recomputes it chunk by chunk
GAMMA_MEMORY_LIMIT = 2 * 2**30
SPARSE_CUT = 1e-7
# a lazy Γ is embedded (solver: auto) from the subspace of the Γ of a uniform subsample of at
# most this many rows, held dense within GAMMA_MEMORY_LIMIT, and one pass over all rows
# (dkernel.spectral.subsample)
SUBSAMPLE_ROWS = 20_000


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

PARAMS = (
    Param("n_clusters", "int", low=1, doc="Number of clusters (k)."),
    *PCK_SCHEMA.params,
    Param(
        "embedding",
        "str",
        default="kpca",
        choices=("kpca", "normalized"),
        doc="Centred KPCA (the published PCK) or the NJW normalized embedding.",
    ),
    Param("n_components", "int", default=None, nullable=True, low=1, doc="Default n_clusters."),
    Param(
        "solver",
        "str",
        default="auto",
        choices=("auto", "exact", "randomized"),
        doc="auto: by cost; a Γ too large to hold is embedded from a row subsample's subspace "
        "and one pass over all rows.",
    ),
    Param("n_init", "int", default=100, low=1, high=10000, doc="k-means restarts."),
    Param("store_features", "bool", default=False, doc="Write Γ/√Z to /features."),
    Param("store_kernel", "bool", default=False, doc=f"Write K to /kernel (N <= {KERNEL_LIMIT})."),
    Param("chunk_rows", "int", default=None, nullable=True, low=16, doc="Rows per chunk of Γ."),
    *RASTER_OUTPUT_PARAMS,
)


def _F(params: dict) -> int:
    G = params["max_components"]
    return params["n_inits"] * (G * (G + 1) // 2 - 1)


def _projection(value: float | None) -> int | float | None:
    """The estimator's ``projection``: whole numbers as component counts."""
    return None if value is None else int(value) if value >= 1 else float(value)


def check_data(params: dict, data: LoadedData) -> None:
    n = data.n_samples
    if params["missingness"] == "informative" and params["covariance_type"] != "diag":
        raise InvalidInputError(
            "params.missingness: informative is implemented for covariance_type: diag only; "
            "use covariance_type: diag or missingness: ignorable."
        )
    if params["missingness"] == "informative" and params["projection"] is not None:
        raise InvalidInputError(
            "params.missingness: informative models which input columns are missing and cannot "
            "be combined with params.projection; use projection: null or missingness: ignorable."
        )
    if params["n_clusters"] > n:
        raise InvalidInputError(
            f"params.n_clusters ({params['n_clusters']}) is larger than the number of samples "
            f"({n})."
        )
    k = params["n_components"] or params["n_clusters"]
    if k > n:
        raise InvalidInputError(f"params.n_components ({k}) must be <= n_samples ({n}).")
    n_sub = int(round(params["subsample"] * n))
    if n_sub < params["max_components"]:
        raise InvalidInputError(
            f"params.subsample ({params['subsample']}) of {n} rows gives {n_sub} rows, fewer than "
            f"params.max_components ({params['max_components']}); lower max_components or raise "
            "subsample."
        )
    if params["store_kernel"] and n > KERNEL_LIMIT:
        raise InvalidInputError(
            f"params.store_kernel would write a {n} x {n} kernel; allowed up to {KERNEL_LIMIT} "
            "rows. Use store_features (Γ, whose Gram matrix is K) instead."
        )


def _chunk_rows(params: dict, n: int) -> int:
    if params["chunk_rows"]:
        return int(params["chunk_rows"])
    return int(max(256, min(n, 64 * 2**20 // (4 * _F(params)))))


def gamma_placement(params: dict, n_samples: int) -> str:
    """Where the job keeps Γ: ``'dense'``, ``'sparse'`` (held) or ``'lazy'`` (recomputed).

    Dense when asked for the exact solver or when N F fits ``GAMMA_MEMORY_LIMIT``; sparse
    when its estimated size (2 Q (G - 1) entries per row, value and column index) fits and
    neither /features nor /kernel is written; lazy otherwise.
    """
    item = 4 if params["dtype"] == "float32" else 8
    if params["solver"] == "exact" or item * n_samples * _F(params) <= GAMMA_MEMORY_LIMIT:
        return "dense"
    per_row = 2 * params["n_inits"] * (params["max_components"] - 1) * (item + 4)
    stored = params["store_features"] or params["store_kernel"]
    return "sparse" if not stored and n_samples * per_row <= GAMMA_MEMORY_LIMIT else "lazy"


def subsample_size(params: dict, n_samples: int) -> int:
    """Rows of the subsample whose Γ the lazy route holds: ``SUBSAMPLE_ROWS``, fewer when its
    dense Γ would not fit ``GAMMA_MEMORY_LIMIT``."""
    item = 4 if params["dtype"] == "float32" else 8
    return int(min(n_samples, SUBSAMPLE_ROWS, GAMMA_MEMORY_LIMIT // (item * _F(params))))


def estimate(params: dict, n_samples: int, n_features: int) -> Cost:
    F = _F(params)
    G = params["max_components"]
    C = G * (G + 1) // 2 - 1  # components of one task
    item = 4 if params["dtype"] == "float32" else 8
    n_sub = params["subsample"] * n_samples
    task = 8.0 * n_sub * n_features * 3 + 4 * 64 * 2**20 + 8.0 * C * n_features * 4
    k = params["n_components"] or params["n_clusters"]
    l = k + 20  # the randomized solver's basis (n_oversamples = 20)
    gamma = 8.0 * (n_samples + F) * l * 2
    placement = gamma_placement(params, n_samples)
    if placement == "dense":
        gamma += item * n_samples * F
        if params["solver"] != "randomized":
            gamma += 8.0 * min(n_samples, F) ** 2  # the Gram route's matrix
    elif placement == "sparse":
        gamma += n_samples * 2 * params["n_inits"] * (G - 1) * (item + 4)
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
        what=f"PCK ensemble of {params['n_inits'] * (G - 1)} GMMs, Γ with {F} features",
        alternative="smaller n_inits / max_components, or store_features: false.",
    )


def _gmm_dataset(est: ProbabilisticClusterKernel, entropy: np.ndarray) -> xr.Dataset:
    """The ``/gmm`` group from the fitted ensemble's per-model parameters."""
    means, second, weights = [], [], []
    probs = getattr(est.ensemble_, "missing_probs", None)
    offs = est.ensemble_.offsets
    for m in range(est.model_inits_.size):
        if isinstance(est.ensemble_, DiagMixtures):
            sl = slice(offs[m], offs[m + 1])
            mu, sec, w = (
                est.ensemble_.means[sl],
                est.ensemble_.variances[sl],
                est.ensemble_.weights[sl],
            )
        else:
            mu, sec, w = est.ensemble_.models[m]
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
        n_inits=int(est.n_inits),
        max_components=int(est.max_components_),
        covariance_type=est.covariance_type,
        location=est.location_,
        feature_index=np.flatnonzero(est.feature_mask_),
        mean_entropy=entropy,
        projection=est.projection_components_,
        projection_variance_ratio=None
        if est.projection_components_ is None
        else est.projection_variance_ratio_,
        attrs={
            "n_iter": int(est.n_iter),
            "subsample": float(est.subsample),
            "reg_covar": float(est.reg_covar),
            "dtype": str(est.dtype),
            "missingness": est.missingness,
            "projection": "none" if est.projection is None else est.projection,
            "normalizer": est.normalizer_,
            "n_features_out": est.n_features_out_,
            "seed": est.seed_,
        },
    )


def _nnz_per_row(Gamma: Any) -> float:
    return Gamma.nnz / max(Gamma.shape[0], 1)


def _model_entropy(Gamma, offsets: np.ndarray, scale: float) -> np.ndarray:
    """Mean over samples of each model's posterior entropy (nats)."""

    def block(G):
        P = np.asarray(G, dtype=np.float64) * scale
        H = -np.where(P > 0, P * np.log(np.where(P > 0, P, 1.0)), 0.0)
        return np.add.reduceat(H, offsets[:-1], axis=1).sum(axis=0, keepdims=True)

    if isinstance(Gamma, da.Array):
        parts = Gamma.map_blocks(
            block, dtype=np.float64, chunks=((1,) * Gamma.numblocks[0], (offsets.size - 1,))
        )
        total = parts.sum(axis=0).compute()
    elif issparse(Gamma):  # dropped entries: p log p ≈ 0
        total = sum(block(Gamma[a : a + 4096].toarray())[0] for a in range(0, Gamma.shape[0], 4096))
    else:
        total = block(Gamma)[0]
    return total / Gamma.shape[0]


def compute(ctx: JobContext) -> Iterator[Output]:
    p = ctx.params
    X = ctx.data.X
    n = int(X.shape[0])
    est = PCK_SCHEMA.build(p, projection=_projection(p["projection"]), random_state=ctx.seed)
    n_missing = (
        int(da.isnan(X).sum().compute()) if isinstance(X, da.Array) else int(np.isnan(X).sum())
    )
    variant = "PCKID" if n_missing else "PCK"
    t = time.perf_counter()
    est.fit(X)
    yield Timing.since("fit_ensemble", t)
    logger.info(
        f"{variant}: {est.model_inits_.size} GMMs ({p['covariance_type']}), "
        f"F = {est.n_features_out_} features, {n_missing} missing values"
    )

    t = time.perf_counter()
    placement = gamma_placement(p, n)
    Gamma = _feature_map(p, est, X, placement)
    emb, m = _embed(ctx, est, Gamma, X, placement)
    Z = emb.embedding if p["embedding"] == "kpca" else normalize_rows(emb.embedding)
    yield Timing.since("embedding", t)
    logger.info(f"{p['embedding']} eigenvalues {np.round(emb.eigenvalues, 4).tolist()}")

    t = time.perf_counter()
    labels, centers, inertia = euclidean_kmeans(
        Z, p["n_clusters"], n_init=p["n_init"], random_state=derive_seed(ctx.seed, "kmeans")
    )
    yield Timing.since("kmeans", t)

    t = time.perf_counter()
    entropy = _model_entropy(Gamma, est.ensemble_.offsets, np.sqrt(est.normalizer_))
    yield Group("gmm", _gmm_dataset(est, entropy))
    yield Group(
        "embedding",
        embedding_dataset(
            emb.embedding,
            emb.eigenvalues,
            degrees=emb.degrees,
            attrs={
                "method": p["embedding"],
                "kernel": "pck",
                "variant": variant,
                "solver": emb.solver,
                "criterion": "eigenvalue",
                "n_missing": n_missing,
                **({"subsample_rows": m} if emb.solver == "subsample" else {}),
            },
        ),
    )
    yield Group(
        "labels",
        labels_dataset(
            labels,
            n_clusters=p["n_clusters"],
            clustering="k-means",
            centers=centers,
            inertia=inertia,
        ),
    )
    yield from _gamma_groups(p, Gamma, _chunk_rows(p, n))
    yield Timing.since("write", t)
    yield LabelMap(labels, "PCK spectral clustering")
    yield Metrics(labels)


def _feature_map(p: dict, est: ProbabilisticClusterKernel, X: Any, placement: str) -> Any:
    """Γ, held in memory (dense or sparse) when it fits; otherwise lazy, and every pass over
    it recomputes it chunk by chunk from the ensemble parameters (:func:`gamma_placement`)."""
    if placement == "lazy":
        rows = _chunk_rows(p, int(X.shape[0]))
        Xd = (
            X.rechunk({0: rows, 1: -1})
            if isinstance(X, da.Array)
            else da.from_array(np.asarray(X), chunks=(rows, -1))
        )
        return est.transform(Xd)
    # here, from the N × p data: gathering Γ from the workers would move F / p times more
    # bytes (700x for PCK's defaults on 20 columns) than it takes to compute
    Xn = X.compute() if isinstance(X, da.Array) else np.asarray(X)
    return est.transform(Xn, sparse_threshold=SPARSE_CUT if placement == "sparse" else None)


def _embed(
    ctx: JobContext, est: ProbabilisticClusterKernel, Gamma: Any, X: Any, placement: str
) -> tuple[Any, int | None]:
    """The KPCA or normalized embedding of Γ by the solver its cost picks (logged); a lazy Γ
    may be embedded from a subsample's Γ and one pass (``solver: auto``). Returns the
    embedding and the subsample's rows (None when not subsampled)."""
    p = ctx.params
    n = int(X.shape[0])
    k = p["n_components"] or p["n_clusters"]
    in_memory = placement != "lazy"
    m = subsample_size(p, n) if not in_memory and p["solver"] == "auto" else None
    solver, why = choose_solver(Gamma.shape, k, is_dask=not in_memory, sample_rows=m)
    if placement == "sparse":
        held = (
            f"held in memory, sparse ({_nnz_per_row(Gamma):.0f} entries per row ≥ {SPARSE_CUT:g})"
        )
    else:
        held = "held in memory" if placement == "dense" else "lazy, recomputed once per pass"
    logger.info(
        f"Γ ({n} x {est.n_features_out_}, {p['dtype']}) {held}; {why}"
        + ("" if p["solver"] == "auto" else f"; solver: {p['solver']} as asked")
    )
    seed = derive_seed(ctx.seed, "pck-spectral", "svd")
    if solver == "subsample":
        rows = subsample_rows(n, m, derive_seed(ctx.seed, "pck-spectral", "subsample"))
        sample = est.transform(take_rows(X, rows))
        route = subsample_kpca if p["embedding"] == "kpca" else subsample_normalized
        return route(Gamma, sample, k, random_state=seed), m
    embed = feature_map_kpca if p["embedding"] == "kpca" else feature_map_normalized
    return embed(Gamma, k, solver=p["solver"], random_state=seed), m


def _gamma_groups(p: dict, Gamma: Any, rows: int) -> Iterator[Output]:
    """``/features`` (Γ/√Z) and ``/kernel`` (K = Γ Γᵀ, blocked) when asked for, written by
    the workers."""
    if not (p["store_features"] or p["store_kernel"]):
        return
    G = Gamma if isinstance(Gamma, da.Array) else da.from_array(Gamma, chunks=(rows, -1))
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
    )
)
