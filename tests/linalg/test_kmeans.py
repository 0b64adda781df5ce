import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from dkernel.linalg.kmeans import angular_kmeans, euclidean_kmeans, keca_initial_centers
from dkernel.metrics import clustering_accuracy


def _rays(rng, n=60):
    angles = np.repeat([0.0, 2.1, 4.2], n) + rng.normal(scale=0.1, size=3 * n)
    radii = rng.uniform(0.5, 5.0, size=3 * n)
    X = np.c_[np.cos(angles), np.sin(angles)] * radii[:, None]
    return X, np.repeat([0, 1, 2], n)


def test_angular_kmeans_separates_rays_that_euclidean_cannot(rng):
    X, y = _rays(rng)
    labels, centers, cost = angular_kmeans(X, 3, n_init=5, random_state=0)
    assert clustering_accuracy(y, labels) == 1.0
    np.testing.assert_allclose(np.linalg.norm(centers, axis=1), 1.0)
    assert cost >= 0


def test_keca_initialisation_follows_eq_4_17(rng):
    X, _ = _rays(rng, 20)
    U = X / np.linalg.norm(X, axis=1, keepdims=True)
    idx = keca_initial_centers(U, 3)
    C = U @ U.T
    i, j = np.unravel_index(np.argmin(C), C.shape)
    assert set(idx[:2]) == {i, j}
    summed = C[i] + C[j]
    summed[[i, j]] = np.inf
    assert idx[2] == np.argmin(summed)


def test_euclidean_kmeans_best_of_n_init(rng):
    X = np.r_[rng.normal(size=(50, 2)), rng.normal(size=(50, 2)) + 8]
    labels, centers, inertia = euclidean_kmeans(X, 2, n_init=3, random_state=0)
    assert clustering_accuracy(np.repeat([0, 1], 50), labels) == 1.0
    assert centers.shape == (2, 2) and inertia > 0


def test_angular_kmeans_tol_stops_early_and_zero_tol_runs_to_a_fixed_point(rng):
    X = rng.normal(size=(300, 4))
    exact = angular_kmeans(X, 4, n_init=1, random_state=0)
    loose = angular_kmeans(X, 4, n_init=1, max_iter=300, tol=10.0, random_state=0)
    one_step = angular_kmeans(X, 4, n_init=1, max_iter=1, random_state=0)
    # a tolerance above any possible shift stops after the first update, like max_iter=1
    np.testing.assert_array_equal(loose[0], one_step[0])
    assert exact[2] <= loose[2]


def test_lost_clusters_warn_at_the_callers_line():
    Z = np.repeat([[0.0, 0.0], [1.0, 1.0]], 10, axis=0)  # two distinct rows, three clusters
    with pytest.warns(
        ConvergenceWarning, match=r"\(2\) found smaller than n_clusters \(3\)"
    ) as seen:
        labels, _, _ = euclidean_kmeans(Z, 3, n_init=2, random_state=0)
    assert len(seen) == 1 and seen[0].filename == __file__  # not sklearn/base.py
    assert np.unique(labels).size == 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        euclidean_kmeans(Z, 2, n_init=2, random_state=0)
