"""``KernelKMeans(n_clusters='auto')``: the timescale gap of the k-NN graph (the eigengap of the
normalized kernel for a precomputed one) against slow dense references, separated blobs, and
the evidence attributes."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.distance import cdist
from sklearn.datasets import make_blobs

from dkernel import KernelKMeans
from dkernel.errors import InvalidInputError
from dkernel.kernels.rbf import rbf_block
from dkernel.kmeans.estimator import AUTO_RULE, PRECOMPUTED_AUTO_RULE
from dkernel.kmeans.lloyd import FeatureSpace, GramSpace
from dkernel.kmeans.spectrum import normalized_kernel_spectrum
from dkernel.model_order import RULES, TIMESCALE_FLOOR
from dkernel.spectral.sparse import GRAPH_NEIGHBORS, ONE_SIDED_WEIGHT

#: The rank of the neighbour whose distance is a point's self-tuning scale.
SCALE_RANK = 7


def _blobs(n: int, k: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    centres = (
        6.0 * np.c_[np.cos(2 * np.pi * np.arange(k) / k), np.sin(2 * np.pi * np.arange(k) / k)]
    )
    return make_blobs(n, centers=centres, cluster_std=0.5, random_state=seed)


def _dense_graph_spectrum(X: np.ndarray) -> np.ndarray:
    """Every eigenvalue, descending, of ``D^-1/2 W D^-1/2`` for the nearly mutual self-tuning
    k-NN graph, built densely: each point lists itself and its 8 nearest, its scale is the
    distance to its 7th nearest, ``w_ij = exp(-d² / (σ_i σ_j))``, an edge listed by one end
    only keeps 5 % of its weight, a point's self-loop at most the weight of its other edges."""
    d = cdist(X, X)
    order = np.argsort(d, axis=1, kind="stable")
    listed = np.zeros(d.shape, dtype=bool)
    np.put_along_axis(listed, order[:, : GRAPH_NEIGHBORS + 1], True, axis=1)
    sigma = np.take_along_axis(d, order[:, SCALE_RANK : SCALE_RANK + 1], axis=1).ravel()
    w = np.exp(-(d**2) / np.outer(sigma, sigma))
    both, either = listed & listed.T, listed | listed.T
    W = np.where(both, w, np.where(either, ONE_SIDED_WEIGHT * w, 0.0))
    np.fill_diagonal(W, np.minimum(1.0, W.sum(axis=1) - 1.0))
    s = 1.0 / np.sqrt(W.sum(axis=1))
    return np.linalg.eigvalsh(W * np.outer(s, s))[::-1]


def _timescale_gaps(lam: np.ndarray, ks: np.ndarray) -> np.ndarray:
    """``log((1 − λ_{k+1} + ε) / (1 − λ_k + ε))``, ε the floor times ``1 − λ`` at the last k + 1."""
    one_minus = np.maximum(1.0 - lam / lam[0], 0.0)
    eps = TIMESCALE_FLOOR * one_minus[ks[-1]]
    return np.array([np.log((one_minus[k] + eps) / (one_minus[k - 1] + eps)) for k in ks])


def test_timescale_gap_matches_the_dense_graph():
    X, _ = _blobs(120, 3)
    est = KernelKMeans("auto", max_clusters=8, n_init=2, random_state=0).fit(X)
    order = est.model_order_
    assert order.rule == AUTO_RULE == "timescale-gap" and order.higher_is_better
    lam = _dense_graph_spectrum(X)
    np.testing.assert_allclose(order.details["spectrum"], lam[:9], atol=1e-8)
    ks = np.arange(2, 9)
    np.testing.assert_allclose(est.n_clusters_scores_, _timescale_gaps(lam, ks), atol=1e-6)
    assert est.n_clusters_ == ks[np.argmax(_timescale_gaps(lam, ks))] == 3


def test_precomputed_kernel_uses_the_eigengap_of_the_normalized_kernel():
    X, y = _blobs(150, 4)
    K = rbf_block(X, X, 1.0)
    est = KernelKMeans("auto", kernel="precomputed", max_clusters=10, n_init=2, random_state=0)
    est.fit(K)
    order = est.model_order_
    assert order.rule == PRECOMPUTED_AUTO_RULE == "eigengap"
    d = K.sum(axis=1)
    lam = np.linalg.eigvalsh(K / np.sqrt(np.outer(d, d)))[::-1]
    np.testing.assert_allclose(order.details["spectrum"], lam[:11], atol=1e-10)
    np.testing.assert_allclose(est.n_clusters_scores_, lam[1:10] - lam[2:11], atol=1e-10)
    assert est.n_clusters_ == 4 and np.unique(est.labels_).size == 4


def test_normalized_kernel_spectrum_paths_agree_with_dense():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(1100, 3))
    K = rbf_block(X, X, 1.5)
    d = K.sum(axis=1)
    dense = np.linalg.eigvalsh(K / np.sqrt(np.outer(d, d)))[::-1]
    # above 1 000 rows: Lanczos on the implicit product
    np.testing.assert_allclose(normalized_kernel_spectrum(GramSpace(K), 12), dense[:12], atol=1e-8)
    # explicit features: the r × r Gram of D^-1/2 Φ
    Phi = np.abs(rng.normal(size=(300, 20)))
    G = Phi @ Phi.T
    dg = G.sum(axis=1)
    ref = np.linalg.eigvalsh(G / np.sqrt(np.outer(dg, dg)))[::-1]
    got = normalized_kernel_spectrum(FeatureSpace(Phi), 8)
    np.testing.assert_allclose(got, ref[:8], atol=1e-10)
    # a kernel with negative row sums has no normalized spectrum
    with pytest.raises(InvalidInputError, match="positive row sums"):
        normalized_kernel_spectrum(GramSpace(-np.eye(4)), 2)


@pytest.mark.parametrize("k", [2, 3, 4, 5, 6])
def test_separated_blobs_give_the_true_k(k):
    X, y = _blobs(60 * k, k, seed=k)
    est = KernelKMeans("auto", n_init=3, random_state=0).fit(X)
    assert est.n_clusters_ == k
    assert np.unique(est.labels_).size == k


@pytest.mark.parametrize("solver", ["exact", "nystrom"])
def test_evidence_is_consistent(solver):
    X, _ = _blobs(300, 3)
    params = {"solver": solver, "n_init": 2, "random_state": 0}
    if solver == "nystrom":
        params |= {
            "n_landmarks": 60,
            "kmeans_max_samples": 200,
        }  # the graph of the 200 sampled rows
    est = KernelKMeans("auto", **params).fit(X)
    order = est.model_order_
    assert order.rule in RULES and order.n_clusters == est.n_clusters_ == 3
    np.testing.assert_array_equal(order.candidates, est.n_clusters_candidates_)
    np.testing.assert_array_equal(order.scores, est.n_clusters_scores_)
    assert est.n_clusters_ == est.n_clusters_candidates_[np.argmax(est.n_clusters_scores_)]
    # candidates from all n = 300 rows: 2 .. round(√300)
    np.testing.assert_array_equal(est.n_clusters_candidates_, np.arange(2, 18))
    assert order.details["spectrum"].size == 18
    # only the chosen K is fitted; the criteria are its own
    assert est.inertias_.shape == est.aic_.shape == est.bic_.shape == (1,)
    assert est.information_criterion_ is est.bic_
    assert est.predict(X).max() == 2 and "timescale-gap" in order.summary()
    # the same K given as an integer gives the same clustering
    fixed = KernelKMeans(3, **params).fit(X)
    np.testing.assert_array_equal(fixed.labels_, est.labels_)
    assert fixed.bic_[0] == est.bic_[0] and fixed.model_order_ is None
