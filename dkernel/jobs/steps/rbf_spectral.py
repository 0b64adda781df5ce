"""``method: rbf-spectral`` — RBF kernel (blocked, stored) → KPCA or KECA → k-means.

``embedding: uncentered`` is uncentered KPCA (the word ``SpectralClustering`` and
``NystromEmbedding`` use); ``kpca-uncentered``, its former name, is a deprecated alias
(``dkernel.kernels.aliases``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

import numpy as np

from dkernel._budget import dense_kernel_cost
from dkernel._lazy import deferred
from dkernel.errors import InvalidInputError
from dkernel.io.data import LoadedData
from dkernel.jobs.outputs import RASTER_OUTPUT_PARAMS, Group, LabelMap, Metrics, Output, Timing
from dkernel.jobs.registry import Cost, JobContext, Method, register_method
from dkernel.runtime.progress import compute_parts
from dkernel.schema.estimator import EstimatorSchema
from dkernel.schema.params import REQUIRED, Param

# imported on first use (dkernel._lazy.deferred): `dkernel validate` and `dkernel methods`
# import every step, without Dask, scikit-learn or SciPy (tests/test_cli_imports.py; the
# kernels family's __init__ imports SciPy, so the alias resolver is deferred too)
resolve_alias = deferred("dkernel.kernels.aliases", "resolve_alias")
embedding_dataset, kernel_dataset, labels_dataset = deferred(
    "dkernel.storage.layout", "embedding_dataset", "kernel_dataset", "labels_dataset"
)

logger = logging.getLogger(__name__)

_EXCLUDE = {
    "kernel": "the job's kernel is rbf",
    "scale_neighbors": "adaptive kernels only",
    "n_neighbors": "the former name of scale_neighbors",
    "max_memory": "the job's limits.max_memory",
    "approximation": "the job stores the dense kernel (method: spectral-clustering for landmarks)",
    "n_landmarks": "the job stores the dense kernel",
}
#: The job always clusters: n_clusters is required (the estimators' None embeds only).
_OVERRIDES = {
    "n_clusters": {"default": REQUIRED, "nullable": False, "doc": "Number of clusters for k-means."}
}
KPCA_SCHEMA = EstimatorSchema(
    "dkernel.spectral.estimators:KernelPCAEmbedding",
    exclude={**_EXCLUDE, "centered": "embedding: kpca or uncentered"},
    overrides=_OVERRIDES,
)
KECA_SCHEMA = EstimatorSchema(
    "dkernel.spectral.estimators:KECA", exclude=_EXCLUDE, overrides=_OVERRIDES
)

PARAMS = (
    Param(
        "embedding",
        "str",
        default="kpca",
        # 'kpca-uncentered': the former name of 'uncentered' (a FutureWarning)
        choices=("kpca", "uncentered", "keca", "kpca-uncentered"),
        doc="KPCA (centered), uncentered KPCA, or KECA (entropy ordering, angular k-means).",
    ),
    *KPCA_SCHEMA.params,
    Param("store_kernel", "bool", default=True, doc="Write the blocked kernel to /kernel."),
    *RASTER_OUTPUT_PARAMS,
)


def _width_evidence(est: Any) -> dict[str, Any]:
    """The width ``sigma_fraction='auto'`` chose and what it compared (store attributes)."""
    evidence: dict[str, Any] = {"sigma_fraction": float(est.sigma_fraction_)}
    if est.sigma_fraction_candidates_ is not None:
        evidence["sigma_fraction_candidates"] = est.sigma_fraction_candidates_.tolist()
        evidence["sigma_fraction_scores"] = est.sigma_fraction_scores_.tolist()
    verified = getattr(est, "sigma_fraction_verified_scores_", None)
    if verified is not None:  # NaN (not fitted on every row) is null in the store's JSON
        evidence["sigma_fraction_verified_scores"] = [
            None if np.isnan(v) else float(v) for v in verified
        ]
    dims = getattr(est, "n_components_candidates_", None)
    if dims is not None:
        evidence["n_components_candidates"] = dims.tolist()
    return evidence


def check_data(params: dict, data: LoadedData) -> None:
    n = data.n_samples
    if n < 2:
        raise InvalidInputError(f"rbf-spectral needs at least 2 samples; the data has {n}.")
    if params["n_clusters"] > n:
        raise InvalidInputError(
            f"params.n_clusters ({params['n_clusters']}) is larger than the number of samples ({n})."
        )
    # None: the estimator's default, which never exceeds the number of samples
    if params["n_components"] is not None and params["n_components"] > n:
        raise InvalidInputError(
            f"params.n_components ({params['n_components']}) is larger than the number of "
            f"samples ({n})."
        )
    X = np.asarray(data.X)
    if np.isinf(X).any():
        raise InvalidInputError("the data holds infinite values; rbf-spectral needs finite data.")


def estimate(params: dict, n_samples: int, n_features: int) -> Cost:
    itemsize = np.dtype(params["dtype"]).itemsize
    memory, disk = dense_kernel_cost(n_samples, itemsize)
    return Cost(
        memory_bytes=memory,
        disk_bytes=disk if params["store_kernel"] else 0.0,
        what=f"A dense {n_samples} x {n_samples} RBF kernel and eigen-solve",
        alternative="method: spectral-clustering with Nyström landmarks (n_landmarks).",
    )


def compute(ctx: JobContext) -> Iterator[Output]:
    from dkernel._validation import aligned

    p = ctx.params
    embedding = str(resolve_alias(p["embedding"], "embedding", "rbf-spectral"))
    keca = embedding == "keca"
    fixed: dict = dict(
        # None leaves the dimension to the estimator (KPCA 2k; KECA's 'auto' width compares k and 2k)
        n_components=p["n_components"],
        random_state=ctx.seed,
        max_memory=ctx.limits.get("max_memory"),
    )
    if not keca:
        fixed["centered"] = embedding == "kpca"
    est = (KECA_SCHEMA if keca else KPCA_SCHEMA).build(p, **fixed)

    t = time.perf_counter()
    K_source = est.prepare_fit(ctx.data.X)
    if p["store_kernel"]:
        n_blocks = K_source.numblocks[0] * K_source.numblocks[1]
        logger.info(
            f"writing the {K_source.shape[0]}² kernel in "
            f"{n_blocks} block{'s' if n_blocks != 1 else ''}"
        )
        attrs = {"kernel": "rbf", "sigma": est.sigma_, "block_size": int(K_source.chunksize[0])}
        yield Group("kernel", kernel_dataset(K_source, attrs=attrs), lazy=True)
        K_source = ctx.store.read_array("kernel", "kernel")
    K = aligned(np.asarray(compute_parts([K_source], ctx.client)[0], dtype=np.float64))
    yield Timing.since("kernel", t)

    t = time.perf_counter()
    est.fit_kernel(K)
    yield Timing.since("embedding_and_clustering", t)

    yield Group(
        "embedding",
        embedding_dataset(
            est.embedding_,
            est.eigenvalues_,
            criterion=est.criterion_,
            eigen_index=est.eigen_indices_,
            attrs={
                "method": embedding,
                "sigma": est.sigma_,
                "criterion": "entropy contribution" if keca else "eigenvalue",
                **_width_evidence(est),
            },
        ),
    )
    yield Group(
        "labels",
        labels_dataset(
            est.labels_,
            n_clusters=p["n_clusters"],
            clustering="angular k-means" if keca else "k-means",
        ),
    )
    yield LabelMap(est.labels_, "RBF spectral clustering")
    yield Metrics(est.labels_)


register_method(
    Method(
        name="rbf-spectral",
        params=PARAMS,
        compute=compute,
        check_data=check_data,
        estimate=estimate,
        description="RBF kernel (blocked, stored) → KPCA or KECA embedding → (angular) k-means.",
        estimators=(KPCA_SCHEMA, KECA_SCHEMA),
        # a row with missing entries enters the kernel at its expected squared distances
        handles_missing=True,
        example={
            "data": {"reader": "sklearn", "name": "wine", "standardize": True},
            "params": {"n_clusters": 3, "n_init": 5},
        },
        bad_data={"n_clusters": 2},
    )
)
