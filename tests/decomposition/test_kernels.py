"""Row-normalised density kernels ([SzymkowiakHave2006], Eq. 4, 15, 16) against slow, obvious
code."""

from __future__ import annotations

import numpy as np
import pytest

from dkernel.decomposition.kernels import (
    density_log_kernel,
    knn_log_kernel,
    knn_to_csr,
    row_normalize_log,
)
from dkernel.errors import InvalidInputError


def _gauss_ref(x, y, h):
    d = x.size
    return (2 * np.pi) ** (-d / 2) * h ** (-d) * np.exp(-np.sum((x - y) ** 2) / (2 * h**2))


def test_gaussian_density_kernel_matches_eq15(rng):
    X, Y = rng.normal(size=(7, 3)), rng.normal(size=(5, 3))
    logK = density_log_kernel(X, Y, kernel="rbf", sigma=0.7)
    ref = np.array([[_gauss_ref(x, y, 0.7) for y in Y] for x in X])
    np.testing.assert_allclose(np.exp(logK), ref, rtol=1e-10)


def test_gaussian_density_kernel_integrates_to_one():
    h = 0.3
    grid = np.linspace(-3, 3, 601)
    G = np.stack(np.meshgrid(grid, grid), -1).reshape(-1, 2)
    K = np.exp(density_log_kernel(G, np.array([[0.2, -0.1]]), sigma=h))
    assert abs(K.sum() * (grid[1] - grid[0]) ** 2 - 1.0) < 1e-6


def test_cosine_kernel_matches_eq16(rng):
    X, Y = rng.random((6, 4)), rng.random((3, 4))
    logK = density_log_kernel(X, Y, kernel="cosine")
    ref = np.array([[x @ y / np.linalg.norm(x) / np.linalg.norm(y) for y in Y] for x in X])
    np.testing.assert_allclose(np.exp(logK), ref, rtol=1e-12)


def test_cosine_rejects_empty_rows():
    with pytest.raises(InvalidInputError, match="all zero"):
        density_log_kernel(np.zeros((2, 3)), np.ones((2, 3)), kernel="cosine")


def test_row_normalisation_is_eq4_and_stable(rng):
    X = rng.random((20, 2))
    Kc, log_norm = row_normalize_log(density_log_kernel(X, X, sigma=0.2))
    K = np.array([[_gauss_ref(a, b, 0.2) for b in X] for a in X])
    np.testing.assert_allclose(Kc, K / K.sum(1, keepdims=True), rtol=1e-10)
    np.testing.assert_allclose(log_norm, np.log(K.sum(1)), rtol=1e-10)
    # a width at which every exp() underflows in float64 still gives a proper softmax
    Z = np.array([[5.0, 5.0]])
    Kz, lz = row_normalize_log(density_log_kernel(Z, X, sigma=1e-3))
    assert np.all(np.isfinite(Kz)) and abs(Kz.sum() - 1) < 1e-12 and np.isfinite(lz).all()
    assert np.argmax(Kz) == np.argmin(((X - Z) ** 2).sum(1))


def test_knn_kernel_matches_brute_force(rng):
    X, Q = rng.random((40, 2)), rng.random((9, 2))
    ind, logK = knn_log_kernel(Q, X, sigma=0.1, n_neighbors=5)
    full = density_log_kernel(Q, X, sigma=0.1)
    ref_ind = np.argsort(-full, axis=1)[:, :5]
    np.testing.assert_array_equal(ind, ref_ind)
    np.testing.assert_allclose(logK, np.take_along_axis(full, ref_ind, 1), rtol=1e-10)
    M, log_norm = knn_to_csr(ind, logK, 40)
    np.testing.assert_allclose(np.asarray(M.sum(1)).ravel(), 1.0)
    assert M.nnz == 9 * 5
    # a training point is its own nearest neighbour
    ind_tr, _ = knn_log_kernel(X, X, sigma=0.1, n_neighbors=3)
    np.testing.assert_array_equal(ind_tr[:, 0], np.arange(40))


def test_knn_cosine_matches_brute_force(rng):
    X, Q = rng.random((30, 5)), rng.random((4, 5))
    ind, logK = knn_log_kernel(Q, X, kernel="cosine", n_neighbors=4)
    full = density_log_kernel(Q, X, kernel="cosine")
    np.testing.assert_array_equal(ind, np.argsort(-full, axis=1)[:, :4])
    np.testing.assert_allclose(logK, np.take_along_axis(full, ind, 1), atol=1e-12)
