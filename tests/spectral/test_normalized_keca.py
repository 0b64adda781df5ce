"""Normalized (NJW) embedding, eigengap hint, kernel k-means and the KECA experiment of
Agersborg (2012), §4.4 [Agersborg2012] (two rings and a dense cluster, h = 3.7)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import linalg
from sklearn.datasets import make_blobs

from dkernel.errors import InvalidInputError
from dkernel.kernels.rbf import rbf_block
from dkernel.kmeans.lloyd import kernel_kmeans
from dkernel.linalg.kmeans import angular_kmeans, normalize_rows
from dkernel.metrics import clustering_scores
from dkernel.spectral.clustering import SpectralClustering
from dkernel.spectral.dense import entropy_candidates, keca_embedding, keca_of_pairs
from dkernel.spectral.normalized import eigengap_hint, normalized_embedding


def rings_and_cluster(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """[Agersborg2012], §4.4: inner ring of 110 points, outer ring of 330, dense cluster of 60.

    Each ring is a circle of equally spaced points (so point i neighbours i-1 and i+1, as the
    thesis describes) plus isotropic normal noise; the cluster is a normal blob outside the
    rings. Radii (7.4 and 28) are chosen so that the inner ring's leading eigenvalue is about
    22.4 as reported for Fig. 4.2.
    """
    rng = np.random.default_rng(seed)
    a = np.linspace(0, 2 * np.pi, 110, endpoint=False)
    b = np.linspace(0, 2 * np.pi, 330, endpoint=False)
    inner = 7.4 * np.c_[np.cos(a), np.sin(a)] + rng.normal(0, 0.5, (110, 2))
    outer = 28.0 * np.c_[np.cos(b), np.sin(b)] + rng.normal(0, 0.5, (330, 2))
    dense = np.array([35.0, 35.0]) + rng.normal(0, 1.0, (60, 2))
    y = np.r_[np.zeros(110), np.ones(330), np.full(60, 2)].astype(int)
    return np.r_[inner, outer, dense], y


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_keca_reproduces_seed_001_section_4_4(seed):
    X, y = rings_and_cluster(seed)
    K = rbf_block(X, X, 3.7)
    emb = keca_embedding(K, 3)
    # eigenvectors of the 1st, 2nd and 5th largest eigenvalues are selected
    assert sorted(emb.indices.tolist()) == [0, 1, 4]
    labels, _, _ = angular_kmeans(emb.embedding, 3, random_state=0)
    assert clustering_scores(y, labels)["acc"] == 1.0
    # the inner ring's indicator eigenvalue is close to the thesis' 22.405
    values = np.sort(linalg.eigvalsh(K))[::-1]
    assert 18 < values[1] < 27


def test_keca_spectral_clustering_estimator_on_the_rings():
    X, y = rings_and_cluster(0)
    sc = SpectralClustering(3, embedding="keca", sigma=3.7, n_landmarks=500, random_state=0)
    labels = sc.fit_predict(X)
    assert sorted(sc.nystrom_.component_indices_.tolist()) == [0, 1, 4]
    assert clustering_scores(y, labels)["acc"] == 1.0
    # uncentered KPCA keeps the top-3 eigenvalues instead (thesis Fig. 4.4b)
    kp = SpectralClustering(3, embedding="uncentered", sigma=3.7, n_landmarks=500, random_state=0)
    assert kp.fit(X).nystrom_.component_indices_.tolist() == [0, 1, 2]


def _reference_random_walk(K, k):
    d = K.sum(axis=1)
    w, V = linalg.eig(K / d[:, None])  # D^{-1} K, non-symmetric reference
    order = np.argsort(-w.real)[:k]
    return w.real[order], V.real[:, order]


def test_normalized_embedding_against_random_walk_reference(rng):
    X = rng.normal(size=(80, 2))
    K = rbf_block(X, X, 1.0)
    emb = normalized_embedding(K, 4)
    w, V = _reference_random_walk(K, 4)
    np.testing.assert_allclose(emb.eigenvalues, w, rtol=1e-9)
    assert emb.eigenvalues[0] == pytest.approx(1.0)
    # D^{-1/2} e are eigenvectors of D^{-1} K (compare directions)
    R = emb.random_walk_vectors
    for j in range(4):
        cos = abs(R[:, j] @ V[:, j]) / (np.linalg.norm(R[:, j]) * np.linalg.norm(V[:, j]))
        assert cos == pytest.approx(1.0, abs=1e-8)
    np.testing.assert_allclose(np.linalg.norm(emb.njw, axis=1), 1.0)


def test_eigengap_hint_counts_clusters():
    X, _ = make_blobs(300, centers=[[0, 0], [10, 0], [0, 10], [10, 10]], random_state=0)
    emb = normalized_embedding(rbf_block(X, X, 1.0), 10)
    assert emb.eigenvalues[3] > 0.99 and emb.eigenvalues[4] < 0.9
    assert eigengap_hint(emb.eigenvalues) == 4
    assert eigengap_hint(np.array([1.0])) == 1


def test_normalized_rejects_nonpositive_degrees():
    K = np.array([[1.0, -2.0], [-2.0, 1.0]])
    with pytest.raises(InvalidInputError, match="positive degrees"):
        normalized_embedding(K, 1)


def _naive_kernel_kmeans_cost(K, labels):
    cost = 0.0
    for i in range(K.shape[0]):
        members = np.flatnonzero(labels == labels[i])
        cost += K[i, i] - 2 * K[i, members].mean() + K[np.ix_(members, members)].mean()
    return cost


def test_kernel_kmeans_linear_kernel_is_kmeans():
    X, y = make_blobs(120, centers=[[0, 0], [8, 0], [0, 8]], random_state=1)
    K = X @ X.T
    labels, cost = kernel_kmeans(K, 3, random_state=0)
    assert clustering_scores(y, labels)["ari"] == 1.0
    assert cost == pytest.approx(_naive_kernel_kmeans_cost(K, labels), rel=1e-9)
    centers = np.array([X[labels == c].mean(axis=0) for c in range(3)])
    assert cost == pytest.approx(np.sum((X - centers[labels]) ** 2), rel=1e-9)


def test_kernel_kmeans_separates_rings():
    X, y = rings_and_cluster(0)
    labels, _ = kernel_kmeans(rbf_block(X, X, 3.7), 3, n_init=5, random_state=0)
    # rings are not linearly separable in input space, kernel k-means does better than chance
    assert clustering_scores(y, labels)["nmi"] > 0.3
    with pytest.raises(InvalidInputError, match="n_clusters"):
        kernel_kmeans(np.eye(3), 4)


def test_row_normalize_keeps_zero_rows():
    Z = np.array([[3.0, 4.0], [0.0, 0.0]])
    np.testing.assert_allclose(normalize_rows(Z), [[0.6, 0.8], [0.0, 0.0]])


def _entropy_axes_by_full_search(K: np.ndarray, k: int) -> np.ndarray:
    """The obvious reference: every eigenpair, ψ = λ (eᵀ1)², the k largest."""
    values, vectors = np.linalg.eigh(K)
    values, vectors = values[::-1], vectors[:, ::-1]
    psi = np.maximum(values, 0) * vectors.sum(axis=0) ** 2
    return np.argsort(-psi, kind="stable")[:k]


def test_keca_finds_entropy_axes_deep_in_the_spectrum():
    """keca_embedding computes only as many leading pairs as prove the choice; a kernel whose
    entropy lies on the 101st and 201st eigenvectors makes it look past its first 64."""
    n = 300
    rng = np.random.default_rng(0)
    W, _ = np.linalg.qr(np.c_[np.ones(n), rng.normal(size=(n, n - 1))])
    R, _ = np.linalg.qr(rng.normal(size=(4, 4)))
    carriers = [0, 5, 100, 200]  # the eigenvectors that the constant vector spreads over
    Q = np.empty((n, n))
    Q[:, carriers] = W[:, :4] @ R
    Q[:, [j for j in range(n) if j not in carriers]] = W[:, 4:]
    K = (Q / (1.0 + np.arange(n))) @ Q.T  # eigenvalues 1, 1/2, ..., 1/n
    K = 0.5 * (K + K.T)
    for k in (1, 2, 3, 4):
        emb = keca_embedding(K, k)
        np.testing.assert_array_equal(emb.indices, _entropy_axes_by_full_search(K, k))
    # ψ: 190 on the 1st eigenvector, 0.39 on the 201st, 0.30 on the 101st, 0.01 on the 6th
    assert keca_embedding(K, 3).indices.tolist() == [0, 200, 100]


@pytest.mark.parametrize("seed", [0, 1])
def test_keca_default_equals_the_whole_spectrum_search_on_rbf_kernels(seed):
    X, _ = make_blobs(400, n_features=8, centers=6, random_state=seed)
    for sigma in (0.5, 2.0, 8.0):
        K = rbf_block(X, X, sigma)
        for k in (2, 6, 12):
            emb = keca_embedding(K, k)
            np.testing.assert_array_equal(emb.indices, _entropy_axes_by_full_search(K, k))
            full = keca_embedding(K, k, n_candidates=K.shape[0])
            np.testing.assert_allclose(np.abs(emb.embedding), np.abs(full.embedding), atol=1e-8)


def test_keca_reuses_leading_pairs_that_prove_its_axes():
    """Pairs solved for one dimension serve another when they prove its axes (the same axes
    and embedding as its own solve); too few pairs, or pairs that do not prove them, are
    solved past. The deep-spectrum kernel needs 300 pairs for its third axis."""
    X, _ = make_blobs(400, n_features=8, centers=6, random_state=0)
    K = rbf_block(X, X, 2.0)
    pairs = entropy_candidates(K, 6)
    again = entropy_candidates(K, 12, start=pairs)
    assert again is pairs or again[0].size >= pairs[0].size
    for k in (6, 12):
        shared = keca_of_pairs(*entropy_candidates(K, k, start=pairs), k)
        own = keca_embedding(K, k)
        np.testing.assert_array_equal(shared.indices, own.indices)
        np.testing.assert_allclose(np.abs(shared.embedding), np.abs(own.embedding), atol=1e-8)
    few = (pairs[0][:3], pairs[1][:, :3])
    assert entropy_candidates(K, 6, start=few)[0].size >= 6
    n = 300
    rng = np.random.default_rng(0)
    W, _ = np.linalg.qr(np.c_[np.ones(n), rng.normal(size=(n, n - 1))])
    Q = W.copy()
    Q[:, [0, 100, 200]] = W[:, :3] @ np.linalg.qr(rng.normal(size=(3, 3)))[0]
    Q[:, [1, 2]] = W[:, [100, 200]]
    deep = (Q / (1.0 + np.arange(n))) @ Q.T
    deep = 0.5 * (deep + deep.T)
    start = entropy_candidates(deep, 1)
    assert entropy_candidates(deep, 3, start=start)[0].size > start[0].size
    np.testing.assert_array_equal(
        keca_of_pairs(*entropy_candidates(deep, 3, start=start), 3).indices,
        _entropy_axes_by_full_search(deep, 3),
    )


def test_keca_auto_solves_each_width_once(monkeypatch):
    """'auto' compares four widths × k and 2k axes: four eigen-solves on the sample, not
    eight (and the scores are those of each setting's own fit, tested in test_estimators)."""
    import dkernel
    from dkernel.spectral import dense

    X, _ = make_blobs(600, n_features=5, centers=4, random_state=1)
    calls = []
    solve = dense.dense_eigh

    def counted(K, n_components=None, **kw):
        calls.append(n_components)
        return solve(K, n_components, **kw)

    monkeypatch.setattr(dense, "dense_eigh", counted)
    model = dkernel.KECA(n_clusters=4, random_state=0).fit(X)
    assert model.sigma_fraction_candidates_.size == 8
    # 600 rows: the comparison saw every row and its chosen fit is adopted (eight before)
    assert len(calls) == 4
