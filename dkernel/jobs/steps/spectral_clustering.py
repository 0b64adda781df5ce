"""``method: spectral-clustering`` — Nyström spectral embedding (any registered kernel) and
k-means, scaling to millions of rows; writes ``/embedding``, ``/landmarks``, ``/labels``.

The data are row-chunked into a Dask array and every pass (landmark kernel blocks, r×r sums,
embedding, assignment) runs chunk by chunk on the job's cluster; nothing is n × n.
"""

from __future__ import annotations

import time

import dask.array as da
import numpy as np
import xarray as xr

from dkernel.errors import InvalidInputError
from dkernel.io.data import LoadedData
from dkernel.jobs.outputs import write_clustering_metrics
from dkernel.jobs.params import Param
from dkernel.jobs.registry import Cost, JobContext, Method, register_method
from dkernel.runtime import compute_with_progress
from dkernel.spectral.clustering import SpectralClustering

PARAMS = (
    Param("n_clusters", "int", low=1, doc="Number of clusters."),
    Param(
        "embedding",
        "str",
        default="normalized",
        choices=("normalized", "kpca", "uncentered", "keca"),
        doc="NJW normalized embedding, centered/uncentered KPCA, or KECA (angular k-means).",
    ),
    Param("n_components", "int", default=None, nullable=True, low=1, doc="Default n_clusters."),
    Param("kernel", "str", default="rbf", choices=("rbf", "cosine"), doc="Kernel by name."),
    Param("sigma", "float", default=None, nullable=True, low=0, low_open=True, doc="RBF width."),
    Param(
        "sigma_fraction",
        "float",
        default=0.2,
        low=0,
        low_open=True,
        doc="RBF rule of thumb: this fraction of the median pairwise distance.",
    ),
    Param("n_landmarks", "int", default=1000, low=1, doc="Nyström landmarks (>= n: exact)."),
    Param("landmarks", "str", default="kmeans++", choices=("kmeans++", "uniform")),
    Param(
        "degrees",
        "str",
        default="nystrom",
        choices=("nystrom", "landmarks"),
        doc="Normalized embedding: degrees of the Nyström kernel, or the landmark estimate.",
    ),
    Param("n_init", "int", default=10, low=1, high=10000, doc="k-means restarts."),
    Param("kmeans_sample", "int", default=100_000, low=2, doc="k-means is fitted on a sample."),
    Param(
        "chunk_rows",
        "int",
        default=None,
        nullable=True,
        low=16,
        doc="Rows per Dask chunk of the data (default: about 64 MiB of kernel rows).",
    ),
)


def check_data(params: dict, data: LoadedData) -> None:
    n = data.n_samples
    if params["n_clusters"] > n:
        raise InvalidInputError(
            f"params.n_clusters ({params['n_clusters']}) is larger than the number of samples "
            f"({n})."
        )
    k = params["n_components"] or params["n_clusters"]
    if k > min(n, params["n_landmarks"]):
        raise InvalidInputError(
            f"params.n_components ({k}) must be <= min(n_samples, n_landmarks) = "
            f"{min(n, params['n_landmarks'])}."
        )
    if isinstance(data.X, np.ndarray) and np.isnan(data.X).any():
        raise InvalidInputError(
            f"spectral-clustering does not handle missing values ({int(np.isnan(data.X).sum())} "
            "NaN found); impute them or use method: pck-spectral."
        )


def _chunk_rows(params: dict, n: int) -> int:
    if params["chunk_rows"]:
        return int(params["chunk_rows"])
    m = min(n, params["n_landmarks"])
    return int(max(1000, min(n, 64 * 2**20 // (8 * max(m, 1)))))


def estimate(params: dict, n_samples: int, n_features: int) -> Cost:
    m = min(n_samples, params["n_landmarks"])
    rows = _chunk_rows(params, n_samples)
    k = params["n_components"] or params["n_clusters"]
    # per task: a chunk of kernel rows against the landmarks, the landmark kernel and its basis
    memory = 8.0 * (2 * rows * m + 3 * m * m + rows * n_features) + 8.0 * n_samples * k
    return Cost(
        memory_bytes=memory,
        disk_bytes=8.0 * n_samples * (k + 1),
        what=f"Nyström spectral clustering with {m} landmarks",
        alternative="fewer n_landmarks or smaller chunk_rows.",
    )


def run(ctx: JobContext) -> None:
    p = ctx.params
    X = ctx.data.X
    n = int(X.shape[0])
    rows = _chunk_rows(p, n)
    Xd = (
        X.rechunk({0: rows, 1: -1})
        if isinstance(X, da.Array)
        else da.from_array(np.asarray(X, dtype=np.float64), chunks=(rows, -1))
    )
    Xd = ctx.client.persist(Xd)
    est = SpectralClustering(
        p["n_clusters"],
        embedding=p["embedding"],
        n_components=p["n_components"],
        kernel=p["kernel"],
        sigma=p["sigma"],
        sigma_fraction=p["sigma_fraction"],
        n_landmarks=p["n_landmarks"],
        landmarks=p["landmarks"],
        degrees=p["degrees"],
        n_init=p["n_init"],
        kmeans_sample=p["kmeans_sample"],
        random_state=ctx.seed,
    )
    t = time.perf_counter()
    est.fit(Xd)
    ctx.store.record_timing("fit", time.perf_counter() - t)
    ctx.log(
        f"[dkernel] Nyström {p['embedding']} embedding with {est.landmark_indices_.size} "
        f"landmarks; eigenvalues {np.round(est.eigenvalues_, 4).tolist()}"
    )

    t = time.perf_counter()
    ny = est.nystrom_
    k = est.eigenvalues_.size
    kernel_attrs = {"kernel": ny.kernel_.name, **dict(ny.kernel_.params)}
    ds = xr.Dataset(
        {
            "embedding": (("sample", "component"), est.embedding_),
            "eigenvalues": (("component",), est.eigenvalues_),
            "criterion": (("component",), ny.criterion_),
            "eigen_index": (("component",), ny.component_indices_.astype(np.int64)),
        },
        coords={"component": np.arange(k)},
        attrs={
            "method": p["embedding"],
            "solver": "nystrom",
            "n_landmarks": int(est.landmark_indices_.size),
            "landmarks": p["landmarks"],
            "criterion": "entropy contribution" if p["embedding"] == "keca" else "eigenvalue",
            "eigengap_hint": est.eigengap_hint_,
            **kernel_attrs,
        },
    )
    compute_with_progress(
        ctx.store.write("embedding", ds, compute=False), ctx.client, show=ctx.progress
    )
    spectrum = ny.all_eigenvalues_[:50]
    ctx.store.write(
        "landmarks",
        xr.Dataset(
            {
                "index": (("landmark",), est.landmark_indices_.astype(np.int64)),
                "spectrum": (("eigen",), spectrum),
            },
            attrs={"description": "landmark row indices; leading eigenvalues of the r×r problem"},
        ),
    )
    ctx.store.write(
        "labels",
        xr.Dataset(
            {
                "labels": (("sample",), est.labels_.astype(np.int64)),
                "centers": (("cluster", "component"), est.cluster_centers_),
            },
            attrs={
                "n_clusters": p["n_clusters"],
                "clustering": "angular k-means" if p["embedding"] == "keca" else "k-means",
            },
        ),
    )
    ctx.store.record_timing("write", time.perf_counter() - t)
    if ctx.data.y is not None:
        write_clustering_metrics(ctx, ctx.data.y, est.labels_)


register_method(
    Method(
        name="spectral-clustering",
        params=PARAMS,
        run=run,
        check_data=check_data,
        estimate=estimate,
        description="Nyström spectral embedding (normalized / KPCA / KECA) → k-means; scales "
        "to millions of rows and predicts new points.",
    )
)
