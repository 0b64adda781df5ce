"""``method: jrc`` — joint ranking and clustering (Løkse 2014, Alg. 8–10 [Lokse2014]).

Embeds the data with the Green's-kernel embedding of ``L_β = βD + (D − K)`` (by default the
half-weighted 10-NN graph and the normalized truncation; the paper's ``kernel: pck`` /
``embedding: laplacian`` / ``n_components: 3`` by parameters), clusters it with k-means and ranks every point for the global uniform seed and for a uniform
seed over each cluster (⇔ its centroid). Writes ``/embedding``, ``/labels`` and ``/ranking``
(scores per seed, overall top-k and the top-k inside every cluster, as [Lokse2014], Fig. 10.8).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

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
from dkernel.jobs.registry import (
    Cost,
    JobContext,
    Method,
    refuse_missing_values,
    register_method,
)
from dkernel.jobs.steps.kppr import (
    KERNEL_CHOICES,
    PCK_KERNEL_SCHEMA,
    RANKING_EXCLUDE,
    ranking_kernel,
)
from dkernel.schema.cache import constants
from dkernel.schema.estimator import EstimatorSchema
from dkernel.schema.params import Param

if TYPE_CHECKING:
    from dkernel.ranking.jrc import JointRankingClustering

# imported on first use (dkernel._lazy.deferred), constants read from the stored derivation
# (dkernel.schema.cache): `dkernel validate` and `dkernel methods` import every step,
# without Dask or scikit-learn (tests/test_cli_imports.py)
ADAPTIVE = constants("dkernel.ranking.kernelmap", "ADAPTIVE")
DENSE_LIMIT_BYTES = constants("dkernel.ranking.kppr", "DENSE_LIMIT_BYTES")
SPARSE_BYTES_PER_ROW = constants("dkernel.ranking.sparse_graph", "SPARSE_BYTES_PER_ROW")
as_numpy = deferred("dkernel._validation", "as_numpy")
embedding_dataset, labels_dataset, ranking_dataset = deferred(
    "dkernel.storage.layout", "embedding_dataset", "labels_dataset", "ranking_dataset"
)

logger = logging.getLogger(__name__)

JRC_SCHEMA = EstimatorSchema(
    "dkernel.ranking.jrc:JointRankingClustering",
    exclude=RANKING_EXCLUDE,
    overrides={"kernel": {"choices": KERNEL_CHOICES}},
)

PARAMS = (*JRC_SCHEMA.params, *PCK_KERNEL_SCHEMA.params) + (
    Param("top_k", "int", default=10, low=1, doc="Top-k stored per seed and per cluster."),
    *RASTER_OUTPUT_PARAMS,
)


def check_data(params: dict, data: LoadedData) -> None:
    n = data.n_samples
    auto = params["n_clusters"] == "auto"
    n_components = params["n_components"] or (2 if auto else params["n_clusters"])
    if (not auto and params["n_clusters"] > n) or n_components > n:
        raise InvalidInputError(
            f"params.n_clusters ({params['n_clusters']}) and n_components "
            f"({n_components}) must not exceed the number of samples ({n})."
        )
    kernel = params["kernel"]
    refuse_missing_values("jrc", kernel, data.X, KERNEL_CHOICES)
    # the k-NN graphs' size, or local_scaling's rank (the estimator checks a former spelling)
    name = "scale_neighbors" if kernel == "local_scaling" else "n_neighbors"
    if kernel in ADAPTIVE and params[name] >= n:
        raise InvalidInputError(
            f"params.{name} ({params[name]}) must be < the number of samples ({n})."
        )


def estimate(params: dict, n_samples: int, n_features: int) -> Cost:
    dense = 3.0 * 8 * n_samples * n_samples
    sparse = params["kernel"] in ("knn", "knn_mean") and params["embedding"] == "normalized"
    if sparse and dense > DENSE_LIMIT_BYTES:
        # the estimator's sparse k-NN graph path (with NaN too: expected distances)
        return Cost(
            memory_bytes=float(SPARSE_BYTES_PER_ROW * n_samples),
            what=f"a sparse {n_samples}-point k-NN graph and its leading eigenvectors",
            alternative="cluster a sample of rows (or use method: kppr for ranking).",
        )
    return Cost(
        memory_bytes=dense,
        what=f"a dense {n_samples} x {n_samples} kernel and Laplacian eigen-solve",
        alternative="kernel: knn_mean with embedding: normalized (a sparse graph at any N), or "
        "cluster a sample of a few thousand rows (or use method: kppr for ranking).",
    )


def compute(ctx: JobContext) -> Iterator[Output]:
    p = ctx.params
    X = as_numpy(ctx.data.X, np.float64)
    kernel = ranking_kernel(p, ctx.seed)
    jrc = JRC_SCHEMA.build(p, kernel=kernel, random_state=ctx.seed)
    t = time.perf_counter()
    jrc.fit(X)
    yield Timing.since("embed_and_cluster", t)
    logger.info(
        f"JRC: kernel {jrc.kernel_params_}, cluster sizes "
        f"{np.bincount(jrc.labels_, minlength=jrc.n_clusters_).tolist()}"
    )
    yield Group("ranking", _ranking(jrc, p, ctx.client))
    yield Group(
        "embedding",
        embedding_dataset(
            jrc.embedding_,
            jrc.eigenvalues_,
            degrees=jrc.degrees_,
            global_rank=jrc.global_rank_,
            attrs={
                "method": "jrc",
                "embedding": p["embedding"],
                "eigenvalues": (
                    "descending eigenvalues of D^-1/2 K D^-1/2"
                    if p["embedding"] == "normalized"
                    else "ascending eigenvalues of L_beta"
                ),
                "volume": jrc.volume_,
            },
        ),
    )
    yield Group(
        "labels",
        labels_dataset(
            jrc.labels_,
            n_clusters=int(jrc.n_clusters_),
            clustering="k-means",
            centers=jrc.cluster_centers_,
            centers_name="cluster_centers",
            inertia=jrc.inertia_,
            cluster_coordinate=True,
        ),
    )
    yield from model_order_outputs(jrc)
    yield LabelMap(jrc.labels_, "JRC")
    yield Metrics(jrc.labels_)


def _ranking(jrc: JointRankingClustering, p: dict, client: Any) -> Any:
    """``/ranking``: scores for the global seed and each cluster's, the overall top-k and the
    top-k inside every cluster (``JointRankingClustering.cluster_ranking``). The scores, in
    memory, are sent to the workers that write them once (in the write's graph they made
    ``distributed`` warn of its size: 30 MiB at 10⁶ rows)."""
    from dkernel.runtime.persist import rows_in_memory

    names, scores, per_cluster = jrc.cluster_ranking(p["top_k"])
    scores = rows_in_memory(np.asarray(scores), "auto", client)
    return ranking_dataset(
        scores,
        names,
        k=p["top_k"],
        attrs={"method": "jrc", "alpha": p["alpha"], "kernel": jrc.kernel_params_},
        cluster_top_index=per_cluster,
    )


register_method(
    Method(
        name="jrc",
        params=PARAMS,
        compute=compute,
        check_data=check_data,
        estimate=estimate,
        description="Joint ranking and clustering: Green's-kernel embedding, k-means, PPR "
        "scores for the global seed and each cluster seed.",
        estimators=(JRC_SCHEMA, PCK_KERNEL_SCHEMA),
        example={
            "data": {"reader": "sklearn", "name": "iris", "standardize": True},
            "params": {"n_clusters": 3, "n_init": 5, "top_k": 5},
        },
        bad_data={"n_clusters": 2},
        # with the kernels that model them (refuse_missing_values names the others)
        handles_missing=True,
    )
)
