"""``KernelDecompositionClustering(n_clusters='auto')``: the timescale gap of the nearly mutual
k-NN graph (default kernel) or of the spectrum that starts the factorisation, on the exact and
the bipartite path."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import sparse
from sklearn.datasets import make_blobs
from sklearn.metrics import adjusted_rand_score

from dkernel.decomposition import KernelDecompositionClustering


@pytest.fixture(scope="module")
def blobs():
    return make_blobs(300, centers=4, cluster_std=0.5, random_state=0)


@pytest.mark.parametrize(
    "path", [{"approximation": "exact"}, {"approximation": "bipartite", "n_landmarks": 100}]
)
def test_auto_picks_the_true_number_of_well_separated_blobs(blobs, path):
    X, y = blobs
    model = KernelDecompositionClustering("auto", random_state=0, **path).fit(X)
    assert model.approximation_ == path["approximation"]
    assert model.n_clusters_ == 4
    assert model.H_.shape[0] == 4 and model.predict_proba(X[:7]).shape == (7, 4)
    assert adjusted_rand_score(y, model.labels_) > 0.99
    order = model.model_order_
    assert order.rule == "timescale-gap" and order.n_clusters == 4
    assert model.n_clusters_candidates_[int(np.argmax(model.n_clusters_scores_))] == 4
    assert model.spectrum_.size <= model.n_clusters_candidates_[-1] + 1
    assert np.all(np.diff(model.spectrum_) <= 1e-12)


def test_exact_spectrum_is_the_normalized_connectivity_spectrum(blobs):
    """Slow reference: every eigenvalue of the dense D^-1/2 W D^-1/2 of the symmetrised 0/1
    k-NN graph."""
    X, _ = blobs
    model = KernelDecompositionClustering(
        "auto", max_clusters=6, approximation="exact", random_state=0, kernel="rbf"
    ).fit(X)
    Kc, _, _ = KernelDecompositionClustering(kernel="rbf", random_state=0).training_kernel(X)
    C = sparse.csr_matrix(Kc, copy=True)
    C.data[:] = 1.0  # the graph's links, those whose weight underflowed to 0 too
    C = C.toarray()
    W = (C + C.T) * 0.5
    d = W.sum(axis=1)
    S = W / np.sqrt(np.outer(d, d))
    expected = np.sort(np.linalg.eigvalsh(S))[::-1][:7]
    np.testing.assert_allclose(model.spectrum_, expected, atol=1e-7)


def test_int_n_clusters_records_the_count_and_the_starting_spectrum(blobs):
    X, _ = blobs
    model = KernelDecompositionClustering(3, approximation="exact", random_state=0).fit(X)
    assert model.n_clusters_ == 3 and model.H_.shape[0] == 3
    # the factorisation's own eigenvectors: C (n_init + 1) = 12, cut to max_clusters + 1
    assert model.spectrum_.size == 11 and model.spectrum_[0] == pytest.approx(1.0)
    bip = KernelDecompositionClustering(
        3, approximation="bipartite", n_landmarks=100, random_state=0
    ).fit(X)
    assert bip.n_clusters_ == 3 and bip.spectrum_.size == 11


def test_auto_respects_max_clusters_and_refuses_bad_values(blobs):
    X, _ = blobs
    model = KernelDecompositionClustering("auto", max_clusters=3, random_state=0).fit(X)
    assert 2 <= model.n_clusters_ <= 3 and model.spectrum_.size == 4
    with pytest.raises(ValueError, match="n_clusters"):
        KernelDecompositionClustering("many").fit(X)
    with pytest.raises(ValueError, match="max_clusters"):
        KernelDecompositionClustering("auto", max_clusters=1).fit(X)


def test_bipartite_path_chooses_k_on_the_exact_paths_graph(blobs):
    """Up to 5 000 rows the bipartite path's sample is every row, so both paths score the
    same nearly mutual k-NN graph: the same candidates, scores and k."""
    X, _ = blobs
    exact = KernelDecompositionClustering("auto", approximation="exact", random_state=3).fit(X)
    bip = KernelDecompositionClustering(
        "auto", approximation="bipartite", n_landmarks=100, random_state=3
    ).fit(X)
    assert bip.n_clusters_ == exact.n_clusters_
    np.testing.assert_array_equal(bip.n_clusters_candidates_, exact.n_clusters_candidates_)
    np.testing.assert_allclose(bip.n_clusters_scores_, exact.n_clusters_scores_, atol=1e-9)
