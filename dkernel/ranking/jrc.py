"""Joint ranking and clustering (Løkse 2014, ch. 8, Alg. 8–10).

With the β-adjusted Laplacian ``L_β = βD + (D − K)`` (β = α/(1−α)) and its eigenpairs in
ascending order, the embedding ``Z_β = √(β Vol) E Λ^{-1/2}`` satisfies
``π(α, s) = D Z_β Z_β^T s / Vol`` with all eigenvectors (Eq. 8.11): the PPR is a projection on
the seed-weighted mean ``m_s = Z_β^T s``. Clustering ``Z_β`` (its first ``n_components``
columns) with k-means and seeding uniformly over a cluster is ranking by projection on that
cluster's centroid (§8.3.2).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import linalg

from dkernel._random import derive_seed, seed_from_random_state
from dkernel._validation import check_2d_array, check_is_fitted, check_scalar
from dkernel.errors import InvalidInputError, ResourceLimitError
from dkernel.linalg import euclidean_kmeans
from dkernel.linalg.eigen import fix_signs
from dkernel.ranking.kernelmap import resolve_kernel
from dkernel.ranking.kppr import DENSE_LIMIT_BYTES
from dkernel.ranking.ppr import degrees, restart_beta
from dkernel.ranking.seeds import seed_vector


def jrc_embedding(
    K: np.ndarray, alpha: float, n_components: int | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """JRC embedding (000 Alg. 8): ``Z_β = √(β Vol) E Λ^{-1/2}``, smallest eigenpairs of L_β.

    Returns
    -------
    Z : (N, k), eigenvalues : (k,) ascending, d : (N,)

    Notes
    -----
    O(N^3) time (O(N^2 k) with a subset eigen-solver), O(N^2) memory.
    """
    K = np.asarray(K, dtype=np.float64)
    beta = restart_beta(alpha, "jrc_embedding")
    d = degrees(K)
    n = d.size
    k = n if n_components is None else min(int(n_components), n)
    L = -K
    L[np.diag_indices_from(L)] += (1.0 + beta) * d
    L = 0.5 * (L + L.T)
    values, vectors = linalg.eigh(L, subset_by_index=[0, k - 1], check_finite=False)
    Z = np.sqrt(beta * d.sum()) * fix_signs(vectors) / np.sqrt(values)[None, :]
    return Z, values, d


class JointRankingClustering:
    """Joint ranking and clustering on the Green's-kernel embedding (000 Alg. 8–10).

    Parameters
    ----------
    kernel : {'rbf', 'precomputed', 'pck'}, callable or transformer, default='rbf'
        As for :class:`~dkernel.KernelPersonalizedPageRank`.
    alpha : float, default=0.15
        Restart probability (000 uses 0.15).
    n_components : int, default=3
        Embedding dimensions used for clustering and ranking.
    n_clusters : int, default=3
    n_init : int, default=10
        k-means restarts (best by inertia; 000 used 100, which costs seconds, not quality, here).
    sigma, sigma_fraction : RBF width or its rule-of-thumb fraction (000 uses 0.15).
    random_state : int, optional

    Attributes
    ----------
    embedding_ : ndarray (N, n_components)
        ``Z_β``.
    eigenvalues_ : ndarray (n_components,)
        Ascending λ of L_β.
    labels_ : ndarray (N,)
        Cluster labels.
    cluster_centers_ : ndarray (n_clusters, n_components)
    degrees_ : ndarray (N,)
    volume_ : float
    global_rank_ : ndarray (N,)
        ``d/Vol``.

    Notes
    -----
    O(N^3) time and O(N^2) memory (dense kernel and eigen-solver); k-means O(N k n_init).

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> jrc = JointRankingClustering(n_clusters=3, n_init=5, random_state=0).fit(load_iris().data)
    >>> jrc.rank(cluster=0).shape
    (150,)
    """

    def __init__(
        self,
        kernel: Any = "rbf",
        *,
        alpha: float = 0.15,
        n_components: int = 3,
        n_clusters: int = 3,
        n_init: int = 10,
        sigma: float | None = None,
        sigma_fraction: float = 0.15,
        random_state: int | None = None,
    ) -> None:
        self.kernel = kernel
        self.alpha = alpha
        self.n_components = n_components
        self.n_clusters = n_clusters
        self.n_init = n_init
        self.sigma = sigma
        self.sigma_fraction = sigma_fraction
        self.random_state = random_state

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        names = (
            "kernel alpha n_components n_clusters n_init sigma sigma_fraction random_state".split()
        )
        return {n: getattr(self, n) for n in names}

    def set_params(self, **params: Any) -> JointRankingClustering:
        for k, v in params.items():
            if k not in self.get_params():
                raise InvalidInputError(f"JointRankingClustering has no parameter {k!r}.")
            setattr(self, k, v)
        return self

    def fit(self, X: Any, y: Any = None) -> JointRankingClustering:
        """Embed (Alg. 8) and cluster (Alg. 9) the data."""
        owner = type(self).__name__
        self.beta_ = restart_beta(self.alpha, owner)
        check_scalar(self.n_components, "n_components", owner, kind=int, low=1)
        check_scalar(self.n_clusters, "n_clusters", owner, kind=int, low=1)
        check_scalar(self.n_init, "n_init", owner, kind=int, low=1)
        if self.kernel == "precomputed":
            X = np.asarray(X.compute() if hasattr(X, "dask") else X, dtype=np.float64)
        else:
            X = check_2d_array(
                X, owner, allow_nan=self.kernel == "pck" or hasattr(self.kernel, "transform")
            )
            if hasattr(X, "dask"):
                X = X.compute()
        n = X.shape[0]
        if self.n_clusters > n or self.n_components > n:
            raise InvalidInputError(
                f"{owner}: n_clusters={self.n_clusters} and n_components={self.n_components} must "
                f"not exceed the number of samples ({n})."
            )
        if 3.0 * 8 * n * n > DENSE_LIMIT_BYTES:
            raise ResourceLimitError(
                f"{owner} on N={n} points needs a dense N×N kernel "
                f"(~{24 * n * n / 2**30:.1f} GiB). "
                "Cluster a sample of a few thousand points."
            )
        seed = seed_from_random_state(self.random_state)
        self.kernel_, self.kernel_params_ = resolve_kernel(
            self.kernel,
            X,
            sigma=self.sigma,
            sigma_fraction=self.sigma_fraction,
            dtype="float64",
            seed=seed,
            owner=owner,
        )
        Z, values, d = jrc_embedding(self.kernel_.gram(), self.alpha, self.n_components)
        self.embedding_, self.eigenvalues_, self.degrees_ = Z, values, d
        self.volume_ = float(d.sum())
        self.global_rank_ = d / self.volume_
        labels, centers, inertia = euclidean_kmeans(
            Z, self.n_clusters, n_init=self.n_init, random_state=derive_seed(seed, "jrc-kmeans")
        )
        self.labels_, self.cluster_centers_, self.inertia_ = labels, centers, inertia
        return self

    def fit_predict(self, X: Any, y: Any = None) -> np.ndarray:
        return self.fit(X).labels_

    def rank(self, seed: Any = None, *, cluster: Any = None, labels: Any = None) -> np.ndarray:
        """PPR scores ``π = D Z_β m_s / Vol`` (Alg. 10) for a seed or a cluster.

        A cluster seed (uniform over ``labels_ == cluster``) uses the k-means centroid as ``m_s``.
        ``seed=None`` with no cluster is the global uniform seed.
        """
        check_is_fitted(self, "embedding_")
        n = self.degrees_.size
        if cluster is not None and labels is None:
            labels = self.labels_
        s = seed_vector(seed, n, cluster=cluster, labels=labels, owner=type(self).__name__)
        m = self.embedding_.T @ s
        return self.degrees_ * (self.embedding_ @ m) / self.volume_

    def top_k_per_cluster(
        self, k: int = 10, seed: Any = None, *, cluster: Any = None
    ) -> dict[int, np.ndarray]:
        """Indices of the ``k`` best-ranked points in each cluster for one seed (000 Fig. 10.8)."""
        scores = self.rank(seed, cluster=cluster)
        out = {}
        for c in np.unique(self.labels_):
            idx = np.flatnonzero(self.labels_ == c)
            out[int(c)] = idx[np.argsort(-scores[idx], kind="stable")[:k]]
        return out
