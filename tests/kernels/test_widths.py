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


def test_robust_silverman_thesis_takes_the_smaller_spread_per_feature(X):
    n, d = X.shape
    heavy = X.copy()
    heavy[:, 0] = np.random.default_rng(1).standard_t(1, size=n)  # Cauchy: σ ≫ IQR / 1.349
    ties = np.zeros(n)
    ties[:5] = 1.0  # IQR 0: the standard deviation stays
    Z = np.c_[heavy, ties]
    spreads = []
    for column in Z.T:
        ordered = np.sort(column)
        # the quartiles by linear interpolation between order statistics
        q25, q75 = (np.interp(q * (n - 1), np.arange(n), ordered) for q in (0.25, 0.75))
        sd = np.std(column, ddof=1)
        iqr = (q75 - q25) / 1.349
        spreads.append(min(sd, iqr) if iqr > 0 else sd)
    p = d + 1
    expected = np.sqrt(np.mean(np.square(spreads)) * (4 / ((2 * p + 1) * n)) ** (2 / (p + 4)))
    assert silverman_thesis(Z, robust=True) == pytest.approx(expected)
    assert silverman_thesis(Z, robust=True) < 0.5 * silverman_thesis(Z)
    # a normal sample: the two spreads nearly agree
    assert silverman_thesis(X, robust=True) == pytest.approx(silverman_thesis(X), rel=0.1)


def test_robust_silverman_thesis_ignores_one_far_row(X):
    far = np.vstack([X, X.mean(axis=0) + 1e4])
    assert silverman_thesis(far, robust=True) == pytest.approx(silverman_thesis(X), rel=0.05)
    assert silverman_thesis(far) > 20 * silverman_thesis(X)


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
    assert MeanShift(bandwidth_factor=1.0).fit(Xs).bandwidth_ == silverman_thesis(Xs, robust=True)
