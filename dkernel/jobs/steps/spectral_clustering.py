"""``method: spectral-clustering`` — Nyström spectral embedding (any registered kernel) and
k-means, scaling to millions of rows; writes ``/embedding``, ``/landmarks``, ``/labels``.

The data are row-chunked into a Dask array and every pass (landmark kernel blocks, r×r sums,
embedding, assignment) runs chunk by chunk on the job's cluster; nothing is n × n.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from dkernel._budget import KERNEL_BLOCK_BYTES, MAX_ROW_CHUNKS, rows_for_budget
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
    chunk_rows_param,
    refuse_missing_values,
    register_method,
)
from dkernel.schema.cache import constants
from dkernel.schema.estimator import EstimatorSchema

if TYPE_CHECKING:
    from dkernel.spectral.bipartite import BipartiteSpectralModel
    from dkernel.spectral.clustering import SpectralClustering
    from dkernel.spectral.sparse import SparseSpectralModel
else:
    BipartiteSpectralModel = deferred("dkernel.spectral.bipartite", "BipartiteSpectralModel")
    SparseSpectralModel = deferred("dkernel.spectral.sparse", "SparseSpectralModel")

# imported on first use (dkernel._lazy.deferred), constants read from the stored derivation
# (dkernel.schema.cache): `dkernel validate` and `dkernel methods` import every step,
# without Dask or scikit-learn (tests/test_cli_imports.py)
DEFAULT_LANDMARKS, EXACT_MAX_SAMPLES = constants(
    "dkernel.spectral.clustering", "DEFAULT_LANDMARKS", "EXACT_MAX_SAMPLES"
)
SEARCH_ROWS = constants("dkernel.graphs.landmark", "SEARCH_ROWS")
embedding_dataset, labels_dataset, landmarks_dataset = deferred(
    "dkernel.storage.layout", "embedding_dataset", "labels_dataset", "landmarks_dataset"
)

logger = logging.getLogger(__name__)

#: The kernels a spectral-clustering job can name (unset: the self-tuning k-NN graph).
KERNEL_CHOICES = ("local_scaling", "knn", "rbf", "cosine")

#: SpectralClustering's parameters, derived from the estimator.
SPECTRAL_SCHEMA = EstimatorSchema(
    "dkernel.spectral.clustering:SpectralClustering",
    exclude={
        "kernel_params": "the kernels' reference samples keep their defaults",
    },
    # the estimator also takes 'pck', 'precomputed' and callables, which a job cannot pass
    overrides={"kernel": {"choices": KERNEL_CHOICES}},
)

PARAMS = (
    *SPECTRAL_SCHEMA.params,
    chunk_rows_param(),
    *RASTER_OUTPUT_PARAMS,
)


def check_data(params: dict, data: LoadedData) -> None:
    n = data.n_samples
    auto = params["n_clusters"] == "auto"
    if not auto and params["n_clusters"] > n:
        raise InvalidInputError(
            f"params.n_clusters ({params['n_clusters']}) is larger than the number of samples "
            f"({n})."
        )
    k = params["n_components"] or (2 if auto else params["n_clusters"])
    if k > _landmarks(params, n):
        raise InvalidInputError(
            f"params.n_components ({k}) must be <= min(n_samples, n_landmarks) = "
            f"{_landmarks(params, n)}."
        )
    scale = params.get("n_neighbors") or params["scale_neighbors"]
    if scale >= n and _approximation(params, n) == "exact":
        raise InvalidInputError(
            f"params.scale_neighbors ({scale}) must be < the number of samples ({n}) on the "
            "exact k-NN graph path: lower it."
        )
    if isinstance(data.X, np.ndarray) and np.isnan(data.X).any():
        if params.get("kernel"):
            refuse_missing_values("spectral-clustering", params["kernel"], data.X, KERNEL_CHOICES)
        est = SPECTRAL_SCHEMA.build(params)
        path = est._approximation(n)
        if not (est._takes_nan() and est._path_takes_nan(path, n)):
            raise InvalidInputError(
                f"spectral-clustering models missing values ({int(np.isnan(data.X).sum())} "
                f"NaN found) on its exact k-NN graph path (params.approximation: exact; 'auto' "
                f"takes it up to {EXACT_MAX_SAMPLES} rows); this job would run approximation: "
                f"{path} on {n} rows. Set params.approximation: exact, impute them, or use "
                "method: kernel-kmeans or pck-spectral, which model them at any size."
            )


def _landmarks(params: dict, n: int) -> int:
    """Landmarks of the bipartite or Nyström path (n on the exact sparse path)."""
    if _approximation(params, n) == "exact":
        return n
    return min(n, params["n_landmarks"] or DEFAULT_LANDMARKS)


def _chunk_rows(params: dict, n: int) -> int:
    """Rows per Dask chunk: ``chunk_rows``, or about ``KERNEL_BLOCK_BYTES`` of float64 kernel
    rows against the landmarks (at least 1000); on the bipartite path, whose tasks search the
    landmarks block by block, at most ``MAX_ROW_CHUNKS`` chunks."""
    if params["chunk_rows"]:
        return int(params["chunk_rows"])
    m = min(_landmarks(params, n), DEFAULT_LANDMARKS)
    rows = rows_for_budget(KERNEL_BLOCK_BYTES, m, 8, low=1000, high=n)
    if _approximation(params, n) == "bipartite":
        rows = max(rows, -(-n // MAX_ROW_CHUNKS))
    return rows


def estimate(params: dict, n_samples: int, n_features: int) -> Cost:
    rows = _chunk_rows(params, n_samples)
    k = params["n_components"] or _largest_k(params, n_samples)
    path = _approximation(params, n_samples)
    if path == "exact":
        g = _graph_size(params) + 1
        # the data, the (n, g) neighbour lists and the sparse graph (three copies while
        # symmetrising), the dense eigenproblem below 2 500 points, the embedding
        dense = 2 * 8.0 * n_samples**2 if n_samples <= 2500 else 0.0
        memory = 8.0 * n_samples * (n_features + 8 * g + 2 * k) + dense
        what = f"exact spectral clustering on the {g - 1}-NN self-tuning graph"
    elif path == "bipartite":
        m, kl = _landmarks(params, n_samples), params["landmark_neighbors"]
        # per task: a chunk, a block of its distances to the landmarks (SEARCH_ROWS rows) and
        # its pair sums; the p × p problem
        search = min(rows, SEARCH_ROWS) * m
        memory = 8.0 * (rows * (n_features + 4 * kl * kl) + search + 6 * m * m)
        # and the k-means sample of the embedding: the embedding and the labels are written
        # from the workers, never held whole in one process
        memory += 8.0 * min(n_samples, params["kmeans_max_samples"]) * k
        what = f"spectral clustering on a {m}-landmark bipartite graph"
    else:
        m = _landmarks(params, n_samples)
        # per task: a chunk of kernel rows against the landmarks, the landmark kernel and basis
        memory = 8.0 * (2 * rows * m + 3 * m * m + rows * n_features) + 8.0 * n_samples * k
        what = f"Nyström spectral clustering with {m} landmarks"
    return Cost(
        memory_bytes=memory,
        disk_bytes=8.0 * n_samples * (k + 1),
        what=what,
        alternative="set n_landmarks (Nyström), fewer n_landmarks or smaller chunk_rows.",
    )


def _graph_size(params: dict) -> int:
    """Neighbours listed per point in the exact path's graph: ``graph_neighbors``, raised to
    the self-tuning widths' rank (``scale_neighbors``, or its former name ``n_neighbors``
    when the spec still writes it)."""
    scale = params.get("n_neighbors") or params["scale_neighbors"]
    return max(int(params["graph_neighbors"]), int(scale))


def _largest_k(params: dict, n: int) -> int:
    """The most clusters the fit may embed: ``n_clusters``, or with 'auto' the
    ``max_clusters + 1`` components of its spectrum."""
    if params["n_clusters"] == "auto":
        if params["max_clusters"] is not None:
            return int(params["max_clusters"]) + 1
        from dkernel.model_order import candidate_range

        return int(candidate_range(max(n, 3))[-1]) + 1
    return int(params["n_clusters"])


def _approximation(params: dict, n: int) -> str:
    return SPECTRAL_SCHEMA.build(params)._approximation(n)


def compute(ctx: JobContext) -> Iterator[Output]:
    p = ctx.params
    n = int(ctx.data.X.shape[0])
    Xd = ctx.row_chunks(_chunk_rows(p, n), persist=False)
    est = SPECTRAL_SCHEMA.build(p, random_state=ctx.seed)
    t = time.perf_counter()
    # the spectral model and the lazy embedding; the embedding is computed once, by its
    # write, and the k-means sample and the labels read it back from the store
    Z, seed = est._fit_embedding_only(Xd)
    yield Timing.since("fit", t)
    t = time.perf_counter()
    criterion, eigen_index, landmarks, solver_attrs = _solver_results(est, p)
    ds = embedding_dataset(
        Z,
        est.eigenvalues_,
        criterion=criterion,
        eigen_index=eigen_index,
        spectrum=est.spectrum_,
        attrs={
            "method": est.embedding_method_,
            "n_clusters": p["n_clusters"],
            "n_clusters_chosen": int(est.n_clusters_),
            "criterion": "entropy contribution"
            if est.embedding_method_ == "keca"
            else "eigenvalue",
            "eigengap_hint": est.eigengap_hint_,
            **solver_attrs,
        },
    )
    yield Group("embedding", ds, lazy=True)
    yield Group("landmarks", landmarks)
    yield Timing.since("embedding", t)
    t = time.perf_counter()
    stored = ctx.store.read_array("embedding", "embedding")
    est._fit_centers(stored, seed)
    labels = est._assign(stored)  # each chunk of the stored embedding labelled where it is
    yield Group(
        "labels",
        labels_dataset(
            labels,
            n_clusters=int(est.n_clusters_),
            clustering="angular k-means" if est.embedding_method_ == "keca" else "k-means",
            centers=est.cluster_centers_,
        ),
        lazy=True,
    )
    yield from model_order_outputs(est)
    yield Timing.since("labels", t)
    written = ctx.store.read_array("labels", "labels")
    yield LabelMap(written, "spectral clustering")
    yield Metrics(written)


def _solver_results(est: SpectralClustering, p: dict) -> tuple[Any, Any, Any, dict[str, Any]]:
    """The fitted path's ordering criterion, eigenvector indices, ``/landmarks`` group and
    embedding attributes (logged)."""
    k = est.eigenvalues_.size
    eigenvalues = np.round(est.eigenvalues_, 4).tolist()
    if est.approximation_ == "bipartite":
        gm = est.graph_model_
        assert isinstance(gm, BipartiteSpectralModel)  # what fit builds on this path
        logger.info(
            f"{est.embedding_method_} embedding of the {gm.graph.n_landmarks}-landmark bipartite "
            f"graph; eigenvalues {eigenvalues}"
        )
        landmarks = landmarks_dataset(None, gm.spectrum, coordinates=gm.graph.landmarks)
        return (
            est.eigenvalues_,
            np.arange(k),
            landmarks,
            {
                "solver": "landmark-bipartite-graph",
                "kernel": "local_scaling",
                "n_landmarks": gm.graph.n_landmarks,
                "landmark_neighbors": gm.graph.n_neighbors,
            },
        )
    if est.approximation_ == "exact":
        sm = est.graph_model_
        assert isinstance(sm, SparseSpectralModel)  # what fit builds on this path
        points = est.landmark_indices_.size
        of = "" if sm.counts is None else f" of the {points} distinct rows"
        logger.info(
            f"exact {est.embedding_method_} embedding of the {_graph_size(p)}-NN self-tuning "
            f"graph{of}; eigenvalues {eigenvalues}"
        )
        landmarks = landmarks_dataset(est.landmark_indices_, sm.spectrum[:50])
        return (
            est.eigenvalues_,
            np.arange(k),
            landmarks,
            {
                "solver": "knn-graph",
                "kernel": "local_scaling",
                "scale_neighbors": sm.n_neighbors,
                "graph_neighbors": sm.graph_neighbors,
            },
        )
    logger.info(
        f"Nyström {est.embedding_method_} embedding with {est.landmark_indices_.size} "
        f"landmarks; eigenvalues {eigenvalues}"
    )
    ny = est.nystrom_
    assert ny is not None  # the Nyström path
    landmarks = landmarks_dataset(est.landmark_indices_, ny.all_eigenvalues_[:50])
    return (
        ny.criterion_,
        ny.component_indices_.astype(np.int64),
        landmarks,
        {
            "solver": "nystrom",
            "n_landmarks": int(est.landmark_indices_.size),
            "landmarks": p["landmarks"],
            "kernel": ny.kernel_.name,
            **dict(ny.kernel_.params),
        },
    )


register_method(
    Method(
        name="spectral-clustering",
        params=PARAMS,
        compute=compute,
        check_data=check_data,
        estimate=estimate,
        description="Spectral embedding (self-tuning k-NN graph, landmark bipartite graph or "
        "Nyström kernel) → k-means; scales to millions of rows and predicts new points.",
        estimators=(SPECTRAL_SCHEMA,),
        # on the exact path (check_data refuses NaN on the others, naming the fixes)
        handles_missing=True,
        example={
            "data": {"reader": "sklearn", "name": "iris", "standardize": True},
            "params": {"n_clusters": 3, "n_landmarks": 40, "n_init": 5},
        },
        bad_data={"n_clusters": 2},
    )
)
