"""``method: kernel-kmeans`` — :class:`~dkernel.KernelKMeans`: Lloyd's iterations in a kernel's
feature space, exact on the kernel matrix (small N) or on a Nyström feature map (large N);
writes ``/labels`` (labels, centres, objective, the AIC/BIC of every K tried; when Lloyd ran on a
sample, each row's squared distance to its centre) and, for the Nyström solver, ``/landmarks``.

The data are row-chunked into a Dask array on the job's cluster: the Nyström solver runs
Lloyd's iterations on a uniform sample of at most ``kmeans_max_samples`` rows, then assigns every
row to its nearest centre chunk by chunk, written as it goes (the cluster sizes and the objective
are read back from the store): nothing is N × N, and nothing of length N is held whole. The
exact solver is taken (by ``solver='auto'``) only on small data whose kernel fits
``limits.max_memory``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

import numpy as np

from dkernel._budget import KERNEL_BLOCK_BYTES, rows_for_budget
from dkernel._lazy import deferred
from dkernel.errors import InvalidInputError, warn_if_clusters_lost
from dkernel.io.data import LoadedData
from dkernel.jobs.outputs import (
    RASTER_OUTPUT_PARAMS,
    Group,
    GroupAttrs,
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

# imported on first use (dkernel._lazy.deferred), constants read from the stored derivation
# (dkernel.schema.cache): `dkernel validate` and `dkernel methods` import every step,
# without Dask or scikit-learn (tests/test_cli_imports.py)
AUTO_COST_RATIO, EXACT_FULL_STEPS, FEATURE_STEPS = constants(
    "dkernel.kmeans.estimator", "AUTO_COST_RATIO", "EXACT_FULL_STEPS", "FEATURE_STEPS"
)
da = deferred("dask.array")
labels_dataset, landmarks_dataset = deferred(
    "dkernel.storage.layout", "labels_dataset", "landmarks_dataset"
)

logger = logging.getLogger(__name__)

#: The kernels a kernel-kmeans job can name.
KERNEL_CHOICES = ("rbf", "local_scaling", "knn", "knn_mean", "landmark", "cosine")

#: KernelKMeans's parameters, derived from the estimator.
KMEANS_SCHEMA = EstimatorSchema(
    "dkernel.kmeans.estimator:KernelKMeans",
    exclude={
        "kernel_params": "the kernels' own parameters keep their defaults",
        "max_memory": "the job's limits.max_memory",
    },
    # the estimator also takes 'pck' (a fitted model), 'precomputed' and callables, which a
    # job cannot pass
    overrides={
        "kernel": {
            "choices": KERNEL_CHOICES,
            "doc": "A kernel of the registry by name (make_kernel), with its own defaults.",
        }
    },
)

PARAMS = (
    *KMEANS_SCHEMA.params,
    chunk_rows_param(),
    *RASTER_OUTPUT_PARAMS,
)


def _largest_k(params: dict, n: int) -> int:
    """The largest K the fit tries: ``n_clusters``, or with 'auto' (null: its former
    spelling) the last candidate of :func:`dkernel.model_order.candidate_range`."""
    k = params["n_clusters"]
    if k is not None and k != "auto":
        return int(k)
    if params["max_clusters"] is not None:
        return min(int(params["max_clusters"]), n)
    from dkernel.model_order import candidate_range

    return int(candidate_range(max(n, 3))[-1])


def check_data(params: dict, data: LoadedData) -> None:
    n = data.n_samples
    if n < 2:
        raise InvalidInputError(f"kernel-kmeans needs at least 2 samples; the data has {n}.")
    if params["n_clusters"] not in (None, "auto") and params["n_clusters"] > n:
        raise InvalidInputError(
            f"params.n_clusters ({params['n_clusters']}) is larger than the number of samples "
            f"({n})."
        )
    if isinstance(data.X, np.ndarray):
        if np.isinf(data.X).any():
            raise InvalidInputError(
                "the data holds infinite values; kernel-kmeans needs finite data."
            )
        refuse_missing_values("kernel-kmeans", params["kernel"], data.X, KERNEL_CHOICES)


def _chunk_rows(params: dict, n: int) -> int:
    if params["chunk_rows"]:
        return int(params["chunk_rows"])
    return rows_for_budget(KERNEL_BLOCK_BYTES, params["n_landmarks"], 8, low=1000, high=n)


def _kmeans_rows(params: dict, n: int) -> int:
    """Rows Lloyd's iterations run on: ``kmeans_max_samples`` (or its former name
    ``kmeans_sample`` when the spec still writes it), at most ``n``."""
    return min(n, int(params.get("kmeans_sample") or params["kmeans_max_samples"]))


def _solver(params: dict, n: int, p: int) -> str:
    """The solver ``solver='auto'`` takes by its work estimate (KernelKMeans._choose_solver;
    the estimator also falls back to Nyström when the exact kernel exceeds the memory limit)."""
    if params["solver"] != "auto":
        return params["solver"]
    k, m, s = _largest_k(params, n), min(n, params["n_landmarks"]), _kmeans_rows(params, n)
    exact = n * n * (p + params["n_init"] * EXACT_FULL_STEPS * k)
    nystrom = n * m * (p + k) + m**3 + s * m * (p + params["n_init"] * FEATURE_STEPS * k)
    return "exact" if exact <= AUTO_COST_RATIO * nystrom else "nystrom"


def estimate(params: dict, n_samples: int, n_features: int) -> Cost:
    n, k = n_samples, _largest_k(params, n_samples)
    if _solver(params, n, n_features) == "exact":
        # the kernel, the columns of moved points, the (n, k) sums and distances
        memory = 8.0 * n * n * 1.25 + 8.0 * n * (6 * k + n_features)
        what = f"exact kernel k-means on a dense {n} x {n} kernel"
    else:
        m, s = min(n, params["n_landmarks"]), _kmeans_rows(params, n)
        rows = _chunk_rows(params, n)
        # the sample's features, a chunk's kernel rows and features, the landmark basis
        memory = 8.0 * (s * (m + n_features) + 2 * rows * m + 3 * m * m) + 8.0 * n * 2
        what = f"kernel k-means on a {m}-landmark Nyström map, Lloyd on {s} rows"
    return Cost(
        memory_bytes=memory,
        disk_bytes=8.0 * n_samples,
        what=what,
        alternative="solver: nystrom, fewer n_landmarks, a smaller kmeans_max_samples or chunk_rows.",
    )


def compute(ctx: JobContext) -> Iterator[Output]:
    p = ctx.params
    n = int(ctx.data.X.shape[0])
    Xd = ctx.row_chunks(_chunk_rows(p, n), persist=False)
    est = KMEANS_SCHEMA.build(p, random_state=ctx.seed, max_memory=ctx.limits.get("max_memory"))
    t = time.perf_counter()
    labelled = est._fit_centres_only(Xd)
    yield Timing.since("fit", t)
    logger.info(
        f"kernel k-means ({est.solver_} solver, kernel {est.kernel_.name}): K = {est.n_clusters_}"
        f", {est.n_iter_} Lloyd steps"
    )
    t = time.perf_counter()
    if labelled:  # Lloyd ran on every row
        labels: Any = est.labels_
        summary = _summary(np.bincount(labels, minlength=est.n_clusters_), est.inertia_)
        yield Group("labels", _labels_dataset(est, p, labels).assign_attrs(summary))
    else:
        # every row's nearest centre, written chunk by chunk; the summary from the stored
        # labels and distances, read back lazily
        labels, distance = est._lazy_labels(Xd)
        yield Group("labels", _labels_dataset(est, p, labels, distance), lazy=True)
        labels = ctx.store.read_array("labels", "labels")
        sizes, inertia = da.compute(
            da.bincount(labels, minlength=est.n_clusters_),
            ctx.store.read_array("labels", "distance").sum(),
        )
        summary = _summary(sizes, float(inertia))
        yield GroupAttrs("labels", summary)
        warn_if_clusters_lost(int(np.count_nonzero(sizes)), est.n_clusters_)
    yield Timing.since("labels", t)
    logger.info(f"kernel k-means objective {summary['inertia']:.6g}")
    if est.landmark_indices_ is not None:
        basis = est.model_.feature_map.basis
        # W0 = U Λ^(-1/2): the landmark kernel's kept eigenvalues are 1 / ||W0[:, j]||²
        spectrum = np.sort(1.0 / np.einsum("ij,ij->j", basis, basis))[::-1]
        yield Group("landmarks", landmarks_dataset(est.landmark_indices_, spectrum[:50]))
    yield from model_order_outputs(est)
    yield LabelMap(labels, "kernel k-means")
    yield Metrics(labels)


def _labels_dataset(est: Any, p: dict, labels: Any, distance: Any = None) -> Any:
    return labels_dataset(
        labels,
        n_clusters=est.n_clusters_,
        clustering=f"kernel k-means ({est.solver_})",
        centers=est.cluster_centers_,
        distance=distance,
    ).assign_attrs(_attrs(est, p))


def _summary(sizes: np.ndarray, inertia: float) -> dict[str, Any]:
    """The ``/labels`` attributes known once every row is labelled."""
    return {"cluster_sizes": np.asarray(sizes).tolist(), "inertia": float(inertia)}


def _attrs(est: Any, p: dict) -> dict[str, Any]:
    """The ``/labels`` attributes: the fitted model and, over the K tried, the selection."""
    attrs: dict[str, Any] = {
        "solver": est.solver_,
        "kernel": est.kernel_.name,
        "sigma": est.sigma_,
        "n_iter": int(est.n_iter_),
        "n_landmarks": None if est.landmark_indices_ is None else int(est.landmark_indices_.size),
        "n_clusters_candidates": est.n_clusters_candidates_.tolist(),
        "inertias": est.inertias_.tolist(),
        "aic": est.aic_.tolist(),
        "bic": est.bic_.tolist(),
        "criterion": p["criterion"],
        "effective_dimension": float(est.effective_dimension_),
    }
    if est.cluster_centers_ is not None:
        attrs["feature_space_dimension"] = int(est.cluster_centers_.shape[1])
    return attrs


register_method(
    Method(
        name="kernel-kmeans",
        params=PARAMS,
        compute=compute,
        check_data=check_data,
        estimate=estimate,
        description="Kernel k-means (any registered kernel; exact, or a Nyström feature map "
        "for large N); K chosen by AIC/BIC with n_clusters: auto; predicts new points.",
        estimators=(KMEANS_SCHEMA,),
        # a row with missing entries sits at its expected distances (KernelKMeans, any solver,
        # the kernels that model them; refuse_missing_values names the others)
        handles_missing=True,
        example={  # the large-N path: Lloyd on a sample, every row assigned after
            "data": {"reader": "sklearn", "name": "iris", "standardize": True},
            "params": {
                "n_clusters": 3,
                "solver": "nystrom",
                "n_landmarks": 40,
                "n_init": 5,
                "kmeans_max_samples": 100,
            },
        },
        bad_data={"n_clusters": 2},
    )
)
