"""MAD, IR-MAD, kernel MAD and the thresholds against slow, obvious references."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import linalg, stats
from sklearn.cross_decomposition import CCA
from sklearn.mixture import GaussianMixture

from dkernel.change.kernel import fit_kernel_mad
from dkernel.change.mad import fit_irmad, fit_mad, weighted_cca
from dkernel.change.threshold import (
    change_threshold,
    fit_two_gaussians,
    mixture_threshold,
    otsu_threshold,
)
from dkernel.errors import InvalidInputError


def _pair(n=600, p=3, seed=0, changed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p)) @ rng.normal(size=(p, p))
    Y = 1.7 * X @ linalg.qr(rng.normal(size=(p, p)))[0] + 3.0 + 0.3 * rng.normal(size=(n, p))
    if changed:
        Y[:changed] = rng.normal(size=(changed, p)) * 3 + 10
    return X, Y


def _reference_cca(X, Y, w):
    """Weighted CCA by the textbook generalised eigenproblem Sxy Syy⁻¹ Syx a = ρ² Sxx a."""
    w = w / w.sum()
    mx, my = w @ X, w @ Y
    Xc, Yc = X - mx, Y - my
    Sxx, Syy, Sxy = (Xc * w[:, None]).T @ Xc, (Yc * w[:, None]).T @ Yc, (Xc * w[:, None]).T @ Yc
    vals, A = linalg.eigh(Sxy @ np.linalg.solve(Syy, Sxy.T), Sxx)
    return np.sqrt(np.clip(vals[::-1], 0, 1)), A[:, ::-1]


def test_correlations_match_scikit_learn_cca():
    X, Y = _pair(seed=1)
    t = fit_mad(X, Y)
    sk = CCA(n_components=3, scale=False, max_iter=5000, tol=1e-12).fit(X, Y)
    U, V = sk.transform(X, Y)
    expected = np.sort([np.corrcoef(U[:, i], V[:, i])[0, 1] for i in range(3)])
    np.testing.assert_allclose(t.correlations, expected, atol=1e-6)


def test_weighted_cca_matches_the_eigenproblem():
    X, Y = _pair(seed=2)
    w = np.random.default_rng(0).uniform(0.1, 1, X.shape[0])
    _, _, A, B, rho = weighted_cca(X, Y, w)
    ref_rho, ref_A = _reference_cca(X, Y, w)
    np.testing.assert_allclose(rho, ref_rho, atol=1e-8)
    for i in range(3):  # same directions up to scale and sign
        c = np.corrcoef(X @ A[:, i], X @ ref_A[:, i])[0, 1]
        assert abs(abs(c) - 1) < 1e-8


def test_mad_variates_by_explicit_formulas():
    X, Y = _pair(seed=3)
    t = fit_mad(X, Y)
    U = (X - X.mean(0)) @ t.x_weights
    V = (Y - Y.mean(0)) @ t.y_weights
    mad = t.variates(X, Y)
    np.testing.assert_allclose(mad, U - V)
    np.testing.assert_allclose(U.var(0), 1, atol=1e-6)  # unit variance
    np.testing.assert_allclose(
        [np.corrcoef(U[:, i], V[:, i])[0, 1] for i in range(3)], t.correlations, atol=1e-8
    )
    np.testing.assert_allclose(mad.var(0), 2 * (1 - t.correlations), atol=1e-6)
    np.testing.assert_allclose(np.corrcoef(mad.T), np.eye(3), atol=1e-6)  # uncorrelated
    assert np.all(np.diff(t.correlations) >= 0)  # least correlated first
    Z = np.array(
        [
            sum((m / np.sqrt(2 * (1 - r))) ** 2 for m, r in zip(row, t.correlations, strict=True))
            for row in mad
        ]
    )
    np.testing.assert_allclose(t.intensity(mad), Z)
    np.testing.assert_allclose(t.no_change_probability(Z), 1 - stats.chi2.cdf(Z, 3))


def test_mad_ignores_a_global_gain_and_offset():
    X, Y = _pair(seed=4)
    t1, t2 = fit_mad(X, Y), fit_mad(X, 0.5 * Y - 7)
    np.testing.assert_allclose(
        t1.intensity(t1.variates(X, Y)), t2.intensity(t2.variates(X, 0.5 * Y - 7)), rtol=1e-6
    )


def test_irmad_reweights_until_the_correlations_settle(monkeypatch):
    """The re-weighting's fixed point, without the floor on the weights' effective sample
    (which stops it here after about 37 iterations: the weights keep concentrating, by 1e-4
    of a correlation per iteration at the end)."""
    from dkernel.change import mad

    monkeypatch.setattr(mad, "IRMAD_MIN_EFFECTIVE_FRACTION", 0.0)
    X, Y = _pair(n=2000, seed=5, changed=200)
    t = fit_irmad(X, Y, tol=1e-8, max_iter=200)
    assert t.converged and t.n_iter > 1
    # a fixed point: one more weighted fit gives the same correlations
    w = t.no_change_probability(t.intensity(t.variates(X, Y)))
    np.testing.assert_allclose(fit_mad(X, Y, weights=w).correlations, t.correlations, atol=1e-6)
    Z = t.intensity(t.variates(X, Y))
    plain = fit_mad(X, Y)
    Zp = plain.intensity(plain.variates(X, Y))
    truth = np.r_[np.ones(200), np.zeros(1800)]
    from sklearn.metrics import roc_auc_score

    assert roc_auc_score(truth, Z) >= roc_auc_score(truth, Zp)
    assert roc_auc_score(truth, Z) > 0.99


def test_mad_refuses_bad_input():
    X, Y = _pair()
    with pytest.raises(InvalidInputError, match="same rows"):
        fit_mad(X, Y[:-1])
    with pytest.raises(InvalidInputError, match="NaN"):
        fit_mad(np.where(X > 2, np.nan, X), Y)


def test_otsu_matches_exhaustive_search():
    rng = np.random.default_rng(0)
    v = np.r_[rng.integers(0, 90, 400), rng.integers(120, 256, 150)].astype(float)
    t = otsu_threshold(v, bins=256)

    def between(s):
        lo, hi = v[v <= s], v[v > s]
        return lo.size * hi.size * (lo.mean() - hi.mean()) ** 2 if lo.size and hi.size else -1

    # the exhaustive split over every gap between distinct values, same histogram bins
    edges = np.histogram_bin_edges(v, 256)
    best = max(edges[1:-1], key=between)
    assert between(t) == pytest.approx(between(best))
    assert 89 <= t <= 120


def test_mixture_matches_scikit_learn():
    rng = np.random.default_rng(1)
    v = np.r_[rng.normal(0, 1, 3000), rng.normal(6, 1.5, 1000)]
    pi, mu, var = fit_two_gaussians(v)
    gm = GaussianMixture(2, random_state=0, tol=1e-10).fit(v[:, None])
    order = np.argsort(gm.means_.ravel())
    np.testing.assert_allclose(mu, gm.means_.ravel()[order], atol=1e-3)
    np.testing.assert_allclose(var, gm.covariances_.ravel()[order], atol=1e-3)
    np.testing.assert_allclose(pi, gm.weights_[order], atol=1e-3)
    t = mixture_threshold(v)
    post = gm.predict_proba(np.array([[t]]))[0, order[1]]
    assert post == pytest.approx(0.5, abs=1e-3)


def test_change_threshold_on_root_intensity():
    rng = np.random.default_rng(2)
    z = np.r_[stats.chi2.rvs(3, size=5000, random_state=rng), rng.uniform(60, 400, 500)]
    for method in ("otsu", "mixture"):
        t = change_threshold(z, method)
        assert (z[:5000] > t).mean() < 0.001 and (z[5000:] > t).mean() > 0.95
        assert t == pytest.approx(
            (otsu_threshold if method == "otsu" else mixture_threshold)(np.sqrt(z)) ** 2
        )
    with pytest.raises(InvalidInputError, match="otsu"):
        change_threshold(z, "kittler")
    with pytest.raises(InvalidInputError, match="constant"):
        change_threshold(np.ones(10))


def test_kernel_mad_sees_non_linear_no_change():
    """Unchanged pixels follow a non-linear relation between the dates; kernel MAD keeps
    their intensity low where linear MAD calls them change."""
    rng = np.random.default_rng(3)
    n = 1500
    X = rng.uniform(-1, 1, (n, 2))
    Y = np.c_[X[:, 0] ** 2, np.sin(2.5 * X[:, 1])] + 0.02 * rng.normal(size=(n, 2))
    Y[:100] = rng.uniform(-1, 1, (100, 2))  # changed pixels
    truth = np.r_[np.ones(100), np.zeros(n - 100)]
    from sklearn.metrics import roc_auc_score

    lin = fit_mad(X, Y)
    ker = fit_kernel_mad(X, Y, n_landmarks=300, sigma_fraction=0.5, random_state=0)
    auc_lin = roc_auc_score(truth, lin.intensity(lin.variates(X, Y)))
    auc_ker = roc_auc_score(truth, ker.intensity(ker.variates(X, Y)))
    assert auc_ker > 0.95 and auc_ker > auc_lin + 0.1
    mad = ker.variates(X, Y)
    np.testing.assert_allclose(mad.std(0), ker.sigma, rtol=1e-6)
    assert np.all(np.diff(ker.correlations) >= 0)


def test_irmad_stops_before_its_weights_collapse(taizhou_sample):
    """On 3 000 Taizhou pixels the re-weighting concentrates on ever fewer pixels; it stops
    while the weights' effective sample is at least 5 % of the pixels, short of correlations
    of 1 (without the floor: 1.0000 after 50 iterations)."""
    from dkernel.change.mad import IRMAD_MIN_EFFECTIVE_FRACTION

    table, _ = taizhou_sample
    X, Y = table[:, :6], table[:, 6:]
    t = fit_irmad(X, Y)
    assert not t.converged and 1 <= t.n_iter < 50
    assert t.correlations.max() < 0.9995
    w = t.no_change_probability(t.intensity(t.variates(X, Y)))
    assert w.sum() ** 2 < IRMAD_MIN_EFFECTIVE_FRACTION * X.shape[0] * (w @ w)  # the next step
    previous = fit_irmad(X, Y, max_iter=t.n_iter)
    np.testing.assert_array_equal(previous.correlations, t.correlations)
