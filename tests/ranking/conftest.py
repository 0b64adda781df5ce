"""Small fixtures for the ranking tests."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_iris, load_wine
from sklearn.preprocessing import StandardScaler

from dkernel.kernels import rbf_block


class SoftAssign:
    """A tiny explicit feature map: non-negative soft assignments to fixed centres.

    Stands in for PCK's posteriors (rows sum to one, so κ = γ·γ lies in [0, 1]).
    """

    def __init__(self, n_centers: int = 12, width: float = 1.0, seed: int = 0) -> None:
        self.n_centers = n_centers
        self.width = width
        self.seed = seed

    def fit(self, X, y=None):
        rng = np.random.default_rng(self.seed)
        X = np.asarray(X)
        self.centers_ = X[rng.choice(X.shape[0], self.n_centers, replace=False)]
        return self

    def transform(self, X):
        d2 = ((np.asarray(X)[:, None, :] - self.centers_[None]) ** 2).sum(-1)
        logits = -d2 / (2 * self.width**2)
        logits -= logits.max(axis=1, keepdims=True)
        P = np.exp(logits)
        return P / P.sum(axis=1, keepdims=True)


@pytest.fixture(scope="module")
def iris():
    X, y = load_iris(return_X_y=True)
    return StandardScaler().fit_transform(X), y


@pytest.fixture(scope="module")
def wine():
    X, y = load_wine(return_X_y=True)
    return StandardScaler().fit_transform(X), y


@pytest.fixture(scope="module")
def iris_kernel(iris):
    X, _ = iris
    return rbf_block(X, X, 0.8)


@pytest.fixture(scope="session")
def soft_assign():
    """The :class:`SoftAssign` feature-map class."""
    return SoftAssign
