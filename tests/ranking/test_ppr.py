"""Exact PPR (Chung–Zhao solve), power iteration, global rank and seeds."""

from __future__ import annotations

import numpy as np
import pytest

from dkernel.errors import InvalidInputError
from dkernel.ranking import degrees, global_rank, ppr_exact, ppr_power, seed_vector


def reference_ppr(K, s, alpha):
    """Slow obvious reference: π = α (I - (1-α) P^T)^{-1} s with P = D^{-1} K, explicit inverse."""
    P = K / K.sum(axis=1, keepdims=True)
    n = K.shape[0]
    return alpha * np.linalg.inv(np.eye(n) - (1 - alpha) * P.T) @ s


@pytest.mark.parametrize("alpha", [0.1, 0.15, 0.5])
def test_solve_matches_reference_and_power_iteration(iris_kernel, alpha):
    K = iris_kernel
    s = seed_vector([3, 70], K.shape[0])
    exact = ppr_exact(K, s, alpha)
    np.testing.assert_allclose(exact, reference_ppr(K, s, alpha), rtol=0, atol=1e-12)
    power = ppr_power(K, s, alpha)
    assert np.max(np.abs(exact - power)) < 1e-8
    assert exact.sum() == pytest.approx(1.0, abs=1e-12)
    assert (exact > 0).all()


def test_multiple_seeds_and_feature_map(rng):
    G = rng.random((60, 5))
    K = G @ G.T
    S = np.stack([seed_vector(i, 60) for i in (0, 5, 9)], axis=1)
    exact = ppr_exact(K, S, 0.1)
    assert exact.shape == (60, 3)
    np.testing.assert_allclose(exact[:, 1], ppr_exact(K, S[:, 1], 0.1), atol=1e-14)
    power = ppr_power(None, S, 0.1, features=G)
    assert np.max(np.abs(exact - power)) < 1e-8
    np.testing.assert_allclose(degrees(features=G), K.sum(axis=1), rtol=1e-12)


def test_global_rank_is_stationary_distribution(iris_kernel):
    K = iris_kernel
    pi = global_rank(K)
    P = K / K.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(pi @ P, pi, atol=1e-14)
    assert pi.sum() == pytest.approx(1.0)


def test_alpha_validation(iris_kernel):
    with pytest.raises(InvalidInputError, match="alpha"):
        ppr_exact(iris_kernel, seed_vector(0, 150), 1.0)


def test_isolated_point_is_refused():
    K = np.eye(3)
    K[2, 2] = 0.0
    with pytest.raises(InvalidInputError, match="non-positive degree"):
        ppr_exact(K, seed_vector(0, 3), 0.1)


def test_seed_forms():
    np.testing.assert_allclose(seed_vector(1, 4), [0, 1, 0, 0])
    np.testing.assert_allclose(seed_vector([0, 0, 3], 4), [2 / 3, 0, 0, 1 / 3])
    np.testing.assert_allclose(
        seed_vector(np.array([True, False, True, False]), 4), [0.5, 0, 0.5, 0]
    )
    np.testing.assert_allclose(seed_vector(np.array([1.0, 3.0, 0.0, 0.0]), 4), [0.25, 0.75, 0, 0])
    np.testing.assert_allclose(seed_vector(None, 4), [0.25] * 4)
    labels = np.array([2, 1, 2, 0])
    np.testing.assert_allclose(seed_vector(None, 4, cluster=2, labels=labels), [0.5, 0, 0.5, 0])
    with pytest.raises(InvalidInputError, match="Valid labels"):
        seed_vector(None, 4, cluster=7, labels=labels)
    with pytest.raises(InvalidInputError, match=r"\[0, 4\)"):
        seed_vector(9, 4)
    with pytest.raises(InvalidInputError, match="length 4"):
        seed_vector(np.array([0.5, 0.5]), 4)
    with pytest.raises(InvalidInputError, match="non-negative"):
        seed_vector(np.array([-1.0, 1.0, 1.0, 1.0]), 4)


def test_normalized_kernel_is_d_half_k_d_half(iris_kernel):
    """Against the obvious reference D^{-1/2} K D^{-1/2} with explicit diagonal matrices."""
    from dkernel.ranking.ppr import normalized_kernel

    K = iris_kernel
    d = degrees(K)
    Kn, r = normalized_kernel(K, d)
    D_half = np.diag(1.0 / np.sqrt(d))
    np.testing.assert_allclose(Kn, D_half @ K @ D_half, rtol=1e-13, atol=0)
    np.testing.assert_allclose(r, np.diag(D_half), rtol=0, atol=0)
    assert not np.shares_memory(Kn, K)
