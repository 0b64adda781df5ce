"""Batched EM engine against slow per-point, per-model references and scikit-learn."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.special import logsumexp
from scipy.stats import multivariate_normal
from sklearn.exceptions import ConvergenceWarning
from sklearn.mixture import GaussianMixture

from dkernel.gmm.em import (
    DiagMixtures,
    MissingnessModel,
    _normalize_segments_t,
    diag_em,
    diag_posteriors,
    init_diag_mixtures,
    init_full_params,
    kmeans_plusplus,
    kmeans_plusplus_models,
    mean_impute,
)
from dkernel.gmm.full_patterns import full_em, full_posteriors


def init_diag_params(X, n_components, rng, reg_covar):
    """Means, variances and weights of one model initialised by :func:`init_diag_mixtures`."""
    mix = init_diag_mixtures(X, (n_components,), [rng], reg_covar)
    return mix.means, mix.variances, mix.weights


def _data(n=60, p=4, missing=0.3, seed=0):
    rng = np.random.default_rng(seed)
    centers = rng.normal(scale=3.0, size=(3, p))
    X = centers[rng.integers(0, 3, n)] + rng.normal(size=(n, p))
    if missing:
        mask = rng.random((n, p)) < missing
        mask[np.arange(n), rng.integers(0, p, n)] = False  # every row keeps one value
        X[mask] = np.nan
    return X


def _random_mix(sizes, p, seed=1):
    rng = np.random.default_rng(seed)
    C = sum(sizes)
    w = rng.random(C) + 0.2
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    for a, b in zip(offsets[:-1], offsets[1:], strict=True):
        w[a:b] /= w[a:b].sum()
    return DiagMixtures(
        rng.normal(scale=2.0, size=(C, p)), rng.random((C, p)) + 0.5, w, offsets.astype(np.int64)
    )


# ---- slow references ---------------------------------------------------------------------
def ref_log_joint(x, means, var, w, rho=None):
    """log π_k + log N(x_o | μ_k, σ_k) (+ the Bernoulli missingness terms) for one point."""
    o = ~np.isnan(x)
    lp = np.log(w).copy()
    for k in range(len(w)):
        for j in range(len(x)):
            if o[j]:
                lp[k] += -0.5 * (
                    (x[j] - means[k, j]) ** 2 / var[k, j] + np.log(2 * np.pi * var[k, j])
                )
            if rho is not None:
                lp[k] += np.log(1 - rho[k, j]) if o[j] else np.log(rho[k, j])
    return lp


def ref_diag_em_one(X, means, var, w, n_iter, reg, model=None):
    """Per point, per component, literal Eq. 2-3 and Alg. 1 (one γ in the covariance).

    With a MissingnessModel ``model``: ρ starts at the column missing rates, enters the
    log-joint as Bernoulli terms and is re-estimated with its prior; the variances are then
    pulled towards the column variances by the missing share.
    """
    means, var, w = means.copy(), var.copy(), w.copy()
    n, p = X.shape
    g = len(w)
    rho = None if model is None else np.tile(model.missing_rate, (g, 1))
    for _ in range(n_iter):
        gam = np.zeros((n, g))
        for i in range(n):
            lp = ref_log_joint(X[i], means, var, w, rho)
            gam[i] = np.exp(lp - logsumexp(lp))
        new_means = np.zeros_like(means)
        new_var = np.zeros_like(var)
        for k in range(g):
            ys = []
            for i in range(n):
                o = ~np.isnan(X[i])
                s = np.where(o, 1.0 / var[k], 0.0)
                ys.append(means[k] + var[k] * s * np.where(o, X[i] - means[k], 0.0))  # Eq. 2
            ys = np.array(ys)
            nk = gam[:, k].sum()
            new_means[k] = (gam[:, k, None] * ys).sum(0) / nk
            om = 0
            for i in range(n):
                o = ~np.isnan(X[i])
                s = np.where(o, 1.0 / var[k], 0.0)
                d = ys[i] - new_means[k]
                om = om + gam[i, k] * (d * d + var[k] - var[k] * s * var[k])  # Eq. 3
            new_var[k] = om / nk + reg
            if model is not None:
                miss = (gam[:, k, None] * np.isnan(X)).sum(0)  # responsibility mass missing
                a, b = model.missing_strength, model.variance_strength
                rho[k] = (miss + a * model.missing_rate) / (nk + a)
                wk = b * miss / nk
                new_var[k] = (nk * new_var[k] + wk * model.column_variance) / (nk + wk)
        w = gam.sum(0) / n
        means, var = new_means, new_var
    if model is not None:
        return means, var, w, rho
    return means, var, w


def ref_full_em_one(X, means, covs, w, n_iter, reg):
    """Per point, per component Alg. 1 with explicit O_i matrices."""
    means, covs, w = means.copy(), covs.copy(), w.copy()
    n, p = X.shape
    g = len(w)
    for _ in range(n_iter):
        gam = np.zeros((n, g))
        Y = np.zeros((g, n, p))
        Corr = np.zeros((g, n, p, p))
        for i in range(n):
            o = ~np.isnan(X[i])
            Oi = np.eye(p)[o]
            lp = np.zeros(g)
            for k in range(g):
                mu_o = Oi @ means[k]
                S_o = Oi @ covs[k] @ Oi.T
                lp[k] = np.log(w[k]) + multivariate_normal(mu_o, S_o).logpdf(X[i, o])
                Sk = Oi.T @ np.linalg.inv(S_o) @ Oi
                xi = np.where(o, X[i], 0.0)
                Y[k, i] = means[k] + covs[k] @ Sk @ (xi - means[k])
                Corr[k, i] = (np.eye(p) - covs[k] @ Sk) @ covs[k]
            gam[i] = np.exp(lp - logsumexp(lp))
        nk = gam.sum(0)
        new_means = np.einsum("nk,knp->kp", gam, Y) / nk[:, None]
        new_covs = np.zeros_like(covs)
        for k in range(g):
            for i in range(n):
                d = Y[k, i] - new_means[k]
                new_covs[k] += gam[i, k] * (np.outer(d, d) + Corr[k, i])
            new_covs[k] = new_covs[k] / nk[k] + reg * np.eye(p)
        means, covs, w = new_means, new_covs, nk / n
    return means, covs, w


# ---- tests -------------------------------------------------------------------------------
def test_segmented_normaliser_is_logsumexp_per_model():
    rng = np.random.default_rng(0)
    L = rng.normal(size=(7, 9)) * 30
    offsets = np.array([0, 2, 5, 9])
    got = _normalize_segments_t(np.array(L.T, order="C", copy=True), offsets)
    want = np.stack(
        [logsumexp(L[:, a:b], axis=1) for a, b in zip(offsets[:-1], offsets[1:], strict=True)], 1
    )
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_batched_diag_em_matches_reference_with_missing_values():
    X = _data(n=50, p=4, missing=0.4)
    assert 0.25 < np.isnan(X).mean() < 0.35  # about 30 % missing
    mix = _random_mix([2, 3, 4], 4)
    got, hist = diag_em(X, mix, n_iter=3, reg_covar=1e-6)
    assert hist.shape == (3, 3)
    for m in range(3):
        a, b = mix.offsets[m], mix.offsets[m + 1]
        mu, var, w = ref_diag_em_one(
            X, mix.means[a:b], mix.variances[a:b], mix.weights[a:b], 3, 1e-6
        )
        np.testing.assert_allclose(got.means[a:b], mu, atol=1e-5, rtol=1e-5)
        np.testing.assert_allclose(got.variances[a:b], var, atol=1e-5, rtol=1e-5)
        np.testing.assert_allclose(got.weights[a:b], w, atol=1e-5, rtol=1e-5)


def _informative_model(X, **strengths):
    return MissingnessModel(
        missing_rate=np.isnan(X).mean(axis=0),
        column_variance=np.nanvar(X, axis=0),
        **strengths,
    )


@pytest.mark.parametrize("strengths", [{}, {"missing_strength": 0.5, "variance_strength": 20.0}])
def test_informative_em_matches_reference(strengths):
    X = _data(n=50, p=4, missing=0.4, seed=5)
    X[X[:, 0] > 1.0, 0] = np.nan  # a saturated sensor: missingness depends on the value
    model = _informative_model(X, **strengths)
    mix = _random_mix([2, 3], 4)
    got, _ = diag_em(X, mix, n_iter=3, reg_covar=1e-6, missingness=model)
    for m in range(2):
        a, b = mix.offsets[m], mix.offsets[m + 1]
        mu, var, w, rho = ref_diag_em_one(
            X, mix.means[a:b], mix.variances[a:b], mix.weights[a:b], 3, 1e-6, model=model
        )
        np.testing.assert_allclose(got.means[a:b], mu, atol=1e-5, rtol=1e-5)
        np.testing.assert_allclose(got.variances[a:b], var, atol=1e-5, rtol=1e-5)
        np.testing.assert_allclose(got.weights[a:b], w, atol=1e-5, rtol=1e-5)
        np.testing.assert_allclose(got.missing_probs[a:b], rho, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("missing", [0.3, 0.0])
def test_informative_posteriors_match_reference(missing):
    """Posteriors with missing_probs, for data with missing values and for complete rows (the
    complete-data design path then adds log(1 - ρ) for every column)."""
    X = _data(n=40, p=4, missing=missing, seed=6)
    mix = _random_mix([3, 2], 4, seed=2)
    mix.missing_probs = np.random.default_rng(3).uniform(0.05, 0.9, size=mix.means.shape)
    got = diag_posteriors(X, mix)
    for m in range(2):
        a, b = mix.offsets[m], mix.offsets[m + 1]
        for i in range(X.shape[0]):
            lp = ref_log_joint(
                X[i], mix.means[a:b], mix.variances[a:b], mix.weights[a:b], mix.missing_probs[a:b]
            )
            np.testing.assert_allclose(got[i, a:b], np.exp(lp - logsumexp(lp)), atol=1e-10)


def test_missing_probs_survive_astype_and_concatenate():
    mix = _random_mix([2, 3], 4)
    mix.missing_probs = np.full(mix.means.shape, 0.25)
    both = DiagMixtures.concatenate([mix, mix.astype(np.float32)])
    assert both.missing_probs.shape == (10, 4) and both.missing_probs.dtype == np.float64
    assert mix.astype(np.float32).missing_probs.dtype == np.float32
    with pytest.raises(ValueError, match="missing_probs"):
        DiagMixtures.concatenate([mix, _random_mix([2], 4)])


def test_diag_em_matches_sklearn_on_complete_data():
    X = _data(n=200, p=5, missing=0.0, seed=3)
    for g in (2, 4):
        rng = np.random.default_rng(g)
        means, var, w = init_diag_params(X, g, rng, 1e-6)
        mix = DiagMixtures(means, var, w, np.array([0, g]))
        got, _ = diag_em(X, mix, n_iter=5, reg_covar=1e-6)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            sk = GaussianMixture(
                g,
                covariance_type="diag",
                max_iter=5,
                tol=0,
                reg_covar=1e-6,
                weights_init=w,
                means_init=means,
                precisions_init=1 / var,
                random_state=0,
            ).fit(X)
        np.testing.assert_allclose(got.means, sk.means_, atol=1e-5, rtol=1e-5)
        np.testing.assert_allclose(got.variances, sk.covariances_, atol=1e-5, rtol=1e-5)
        np.testing.assert_allclose(got.weights, sk.weights_, atol=1e-5, rtol=1e-5)
        np.testing.assert_allclose(diag_posteriors(X, got), sk.predict_proba(X), atol=1e-5)


def test_diag_posteriors_match_reference_and_float32():
    X = _data(n=80, p=6, missing=0.3, seed=5)
    mix = _random_mix([2, 5, 3], 6, seed=7)
    post = diag_posteriors(X, mix)
    for m in range(mix.n_models):
        a, b = mix.offsets[m], mix.offsets[m + 1]
        for i in range(0, 80, 7):
            o = ~np.isnan(X[i])
            lp = np.log(mix.weights[a:b]) + np.array(
                [
                    np.sum(
                        -0.5
                        * (
                            (X[i, o] - mix.means[k, o]) ** 2 / mix.variances[k, o]
                            + np.log(2 * np.pi * mix.variances[k, o])
                        )
                    )
                    for k in range(a, b)
                ]
            )
            np.testing.assert_allclose(post[i, a:b], np.exp(lp - logsumexp(lp)), atol=1e-10)
    post32 = diag_posteriors(X.astype(np.float32), mix.astype(np.float32))
    assert post32.dtype == np.float32
    assert np.abs(post32 - post).max() < 1e-4
    sums = np.add.reduceat(post, mix.offsets[:-1], axis=1)
    np.testing.assert_allclose(sums, 1.0, atol=1e-12)


def test_float32_em_posteriors_agree_with_float64():
    X = _data(n=300, p=8, missing=0.3, seed=11) * 10 + 50  # offset data, like raw sensor values
    X = X - np.nanmean(X, axis=0)  # the estimator centres the data before EM
    rng = np.random.default_rng(0)
    m, v, w = init_diag_params(X, 6, rng, 1e-6)
    mix = DiagMixtures(m, v, w, np.array([0, 6]))
    f64, _ = diag_em(X, mix, 10, 1e-6)
    f32, _ = diag_em(X.astype(np.float32), mix.astype(np.float32), 10, 1e-6)
    p64 = diag_posteriors(X, f64)
    p32 = diag_posteriors(X.astype(np.float32), f32)
    assert np.abs(p64 - p32).max() < 1e-4


def test_row_with_no_observed_value_gets_prior():
    X = _data(n=20, p=3, missing=0.0)
    X[4] = np.nan
    mix = _random_mix([3], 3)
    post = diag_posteriors(X, mix)
    np.testing.assert_allclose(post[4], mix.weights, atol=1e-12)


def test_full_em_matches_reference_with_missing_values():
    X = _data(n=40, p=3, missing=0.45, seed=2)
    assert 0.25 < np.isnan(X).mean() < 0.35  # about 30 % missing
    rng = np.random.default_rng(0)
    means, covs, w = init_full_params(X, 3, rng, 1e-3)
    got = full_em(X, means, covs, w, n_iter=3, reg_covar=1e-6)
    ref = ref_full_em_one(X, means, covs, w, 3, 1e-6)
    for a, b in zip(got[:3], ref, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-5, rtol=1e-5)
    post = full_posteriors(X, *got[:3])
    np.testing.assert_allclose(post.sum(1), 1.0, atol=1e-12)


def test_full_em_matches_sklearn_full_on_complete_data():
    X = _data(n=150, p=3, missing=0.0, seed=4)
    rng = np.random.default_rng(1)
    means, covs, w = init_full_params(X, 3, rng, 1e-6)
    got = full_em(X, means, covs, w, n_iter=4, reg_covar=1e-6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        sk = GaussianMixture(
            3,
            covariance_type="full",
            max_iter=4,
            tol=0,
            reg_covar=1e-6,
            weights_init=w,
            means_init=means,
            precisions_init=np.linalg.inv(covs),
            random_state=0,
        ).fit(X)
    np.testing.assert_allclose(got[0], sk.means_, atol=1e-5, rtol=1e-5)
    np.testing.assert_allclose(got[1], sk.covariances_, atol=1e-5, rtol=1e-5)


def test_kmeans_plusplus_and_init():
    X = _data(n=100, p=3, missing=0.2)
    idx = kmeans_plusplus(mean_impute(X), 5, np.random.default_rng(0))
    assert len(set(idx.tolist())) == 5
    again = kmeans_plusplus(mean_impute(X), 5, np.random.default_rng(0))
    np.testing.assert_array_equal(idx, again)
    m, v, w = init_diag_params(X, 5, np.random.default_rng(0), 1e-6)
    assert np.all(np.isfinite(m)) and np.all(v > 0)
    np.testing.assert_allclose(w.sum(), 1.0)
    # duplicate points: fewer distinct values than clusters still yields distinct indices
    Xd = np.zeros((10, 2))
    assert len(set(kmeans_plusplus(Xd, 4, np.random.default_rng(0)).tolist())) == 4


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_kmeans_plusplus_models_draws_each_models_seeds(dtype):
    """The lockstep seeding of many models gives every model the seeds the one-model
    reference draws from the same generator, also with fewer distinct points than seeds
    (integer coordinates: the distances of duplicates are exactly zero, and the remaining
    seeds are drawn from the unused rows)."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(300, 7)).astype(dtype)
    Xd = np.repeat(rng.integers(-3, 4, size=(3, 4)), 5, axis=0).astype(dtype)
    for data, sizes in ((X, (2, 5, 3, 9, 2)), (Xd, (2, 4, 6))):
        rngs = [np.random.default_rng(i) for i in range(len(sizes))]
        got = kmeans_plusplus_models(data, sizes, rngs)
        for i, g in enumerate(sizes):
            want = kmeans_plusplus(data, g, np.random.default_rng(i))
            np.testing.assert_array_equal(got[i], want)
            assert len(set(got[i].tolist())) == g


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_em_increases_likelihood(dtype):
    X = _data(n=200, p=4, missing=0.2).astype(dtype)
    m, v, w = init_diag_params(X, 4, np.random.default_rng(0), 1e-6)
    _, hist = diag_em(X, DiagMixtures(m, v, w, np.array([0, 4])), 8, 1e-6)
    assert np.all(np.diff(hist[:, 0]) > -1e-4)


def test_row_blocks_do_not_change_the_result():
    X = _data(n=300, p=4, missing=0.3, seed=9)
    mix = _random_mix([2, 3], 4)
    one, h1 = diag_em(X, mix, 4, 1e-6)
    many, h2 = diag_em(X, mix, 4, 1e-6, block_rows=37)
    np.testing.assert_allclose(many.means, one.means, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(many.variances, one.variances, rtol=1e-10)
    np.testing.assert_allclose(h2, h1, rtol=1e-10)
