"""The two Silverman rules (issue 16, item 4): one module, two names, two formulas."""

from __future__ import annotations

import numpy as np
import pytest

from dkernel.errors import InvalidInputError
from dkernel.kernels.widths import silverman_normal_reference, silverman_thesis


@pytest.fixture
def X():
    return np.random.default_rng(0).normal(size=(500, 4)) * [1, 2, 3, 4]


def test_silverman_thesis_is_eq_5_1(X):
    n, d = X.shape
    tr = np.trace(np.cov(X.T))
    expected = np.sqrt(tr / d * (4 / ((2 * d + 1) * n)) ** (2 / (d + 4)))
    assert silverman_thesis(X) == pytest.approx(expected)
    with pytest.raises(InvalidInputError, match="bandwidth explicitly"):
        silverman_thesis(np.ones((5, 2)))
    with pytest.raises(InvalidInputError, match="at least 2 samples"):
        silverman_thesis(np.ones((1, 2)))


def test_silverman_normal_reference(X):
    n, p = X.shape
    s = np.mean(np.std(X, axis=0, ddof=1))
    expected = (4 / (p + 2)) ** (1 / (p + 4)) * n ** (-1 / (p + 4)) * s
    assert silverman_normal_reference(X) == pytest.approx(expected)
    with pytest.raises(InvalidInputError, match="'sigma' explicitly"):
        silverman_normal_reference(np.ones((5, 2)))


def test_the_rules_agree_in_one_dimension_only(X):
    x = X[:, :1]
    assert silverman_thesis(x) == pytest.approx(silverman_normal_reference(x))
    assert silverman_thesis(X) != pytest.approx(silverman_normal_reference(X))


def test_the_estimators_use_their_rule(X):
    from dkernel import KernelDecompositionClustering, MeanShift

    Xs = X[:200]
    kdc = KernelDecompositionClustering(2, kernel="rbf", random_state=0).fit(Xs)
    assert kdc.sigma_ == silverman_normal_reference(Xs)
    assert MeanShift(bandwidth_factor=1.0).fit(Xs).bandwidth_ == silverman_thesis(Xs)
