"""The stacked full-covariance EM (``dkernel.gmm.stacked_full``) against the per-model one."""

from __future__ import annotations

import numpy as np
import pytest

from dkernel._random import derive_rng
from dkernel.gmm.em import init_full_params
from dkernel.gmm.full_patterns import full_em, full_posteriors
from dkernel.gmm.graph import FullMixtures, _fit_rows, posterior_block
from dkernel.gmm.stacked_full import log_joint_weights, stacked_full_em, stacked_posteriors


def _starts(X, sizes):
    starts = [init_full_params(X, g, np.random.default_rng(g), 1e-6) for g in sizes]
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    return starts, offsets, [np.concatenate([s[i] for s in starts]) for i in range(3)]


@pytest.fixture
def blobs():
    rng = np.random.default_rng(0)
    # a tight component far from the origin: the expanded quadratic form must keep its digits
    return np.r_[
        rng.normal(size=(300, 4)),
        rng.normal(3.0, 0.5, size=(200, 4)),
        rng.normal(-4.0, 1e-3, size=(60, 4)),
    ]


def test_stacked_em_is_every_models_own_em(blobs):
    sizes = (2, 3, 5)
    starts, offsets, stacked = _starts(blobs, sizes)
    means, covs, weights = stacked_full_em(blobs, *stacked, offsets, 10, 1e-6)
    for m, start in enumerate(starts):
        ref = full_em(blobs, *start, 10, 1e-6)
        seg = slice(offsets[m], offsets[m + 1])
        np.testing.assert_allclose(means[seg], ref[0], atol=1e-9)
        np.testing.assert_allclose(covs[seg], ref[1], atol=1e-9)
        np.testing.assert_allclose(weights[seg], ref[2], atol=1e-12)
        post = stacked_posteriors(blobs, log_joint_weights(means, covs, weights), offsets)[:, seg]
        np.testing.assert_allclose(post, full_posteriors(blobs, *ref[:3]), atol=1e-9)


def test_float32_data_keeps_a_tight_component(blobs):
    X = blobs.astype(np.float32)
    _, offsets, stacked = _starts(blobs, (3,))
    means, covs, weights = stacked_full_em(X, *stacked, offsets, 10, 1e-6)
    assert means.dtype == covs.dtype == np.float64  # float32 can round them indefinite
    assert np.all(np.linalg.eigvalsh(covs) > 0)
    labels = stacked_posteriors(X, log_joint_weights(means, covs, weights), offsets).argmax(axis=1)
    assert np.unique(labels[-60:]).size == 1


def test_fit_rows_runs_the_stacked_em_on_complete_subsamples(blobs):
    sizes = (2, 3)
    fitted = _fit_rows(blobs, 0, sizes, 7, 6, 1e-6, "full", None)
    for g, model in zip(sizes, fitted.models, strict=True):
        start = init_full_params(blobs, g, derive_rng(7, "pck-init", 0, g), 1e-6)
        ref = full_em(blobs, *start, 6, 1e-6)
        for got, want in zip(model, ref[:3], strict=True):
            np.testing.assert_allclose(got, want, atol=1e-9)


def test_rows_with_and_without_missing_values_are_scored_alike(blobs):
    sizes = (2, 4)
    _, offsets, stacked = _starts(blobs, sizes)
    means, covs, weights = stacked_full_em(blobs, *stacked, offsets, 5, 1e-6)
    ensemble = FullMixtures(
        [
            (means[a:b], covs[a:b], weights[a:b])
            for a, b in zip(offsets[:-1], offsets[1:], strict=True)
        ]
    )
    X = blobs.copy()
    X[::7, 1] = np.nan  # every seventh row goes to the per-pattern path
    got = posterior_block(X, ensemble, 1.0, np.float64)
    for m, model in enumerate(ensemble.models):
        ref = full_posteriors(X, *model)
        np.testing.assert_allclose(got[:, offsets[m] : offsets[m + 1]], ref, atol=1e-9)


def test_full_covariance_em_with_missing_values_keeps_positive_definite_covariances():
    # heavy tails put components on a handful of the 80-row subsample's points; in float32
    # the per-pattern EM's covariance of one of them (init 23, g = 15) stopped being positive
    # definite (LinAlgError) until the EM ran in float64
    from dkernel import ProbabilisticClusterKernel

    rng = np.random.default_rng(1)
    X = rng.standard_t(2, size=(160, 12))
    X = (X - X.mean(0)) / X.std(0)
    X[rng.random(X.shape) < 0.015] = np.nan
    pck = ProbabilisticClusterKernel(
        n_estimators=24, max_components=15, covariance_type="full", random_state=1
    ).fit(X)
    assert pck.ensemble_.covariances.dtype == np.float64
    assert np.isfinite(pck.transform(X)).all()


@pytest.mark.parametrize("case", ["outliers", "large units", "repeated rows", "unscaled"])
def test_pck_clusters_data_that_makes_components_singular(case):
    # a component on fewer distinct points than columns is singular up to reg_covar; rounded to
    # float32 (the default dtype) its covariance turned indefinite, and fit or transform raised
    # LinAlgError on each of these (and on 18 of 24 fits of six such kinds of data, seeds 0-3,
    # and on every one of five plain 3 000-row blobs in 5-D as make_blobs draws them)
    from sklearn.datasets import make_blobs
    from sklearn.metrics import adjusted_rand_score

    from dkernel import PCKSpectralClustering

    X, y = make_blobs(600, centers=3, n_features=5, random_state=1)  # raw: "unscaled"
    rng = np.random.default_rng(1)
    if case == "outliers":
        X[:24] = rng.uniform(-40, 40, (24, 5))
    elif case == "large units":
        X = X * 1e12
    elif case == "repeated rows":
        X[:120] = X[0]
    labels = PCKSpectralClustering(3, random_state=1).fit(X).labels_
    keep = slice(24, None) if case == "outliers" else slice(None)
    assert adjusted_rand_score(y[keep], labels[keep]) > 0.5


def test_float32_posterior_features_hold_no_subnormal_numbers():
    # computed in float64 and stored in float32, posteriors of 1e-40 were subnormal: 6.7 % of
    # the features of 2e4 rows of 5-D blobs, and each pass of the spectral solver over them
    # took 5.1 s instead of 0.37 s
    from sklearn.datasets import make_blobs

    from dkernel import ProbabilisticClusterKernel

    X, _ = make_blobs(400, centers=3, n_features=5, random_state=0)
    X[::9, 2] = np.nan  # the per-pattern path too
    pck = ProbabilisticClusterKernel(n_estimators=4, covariance_type="full", random_state=0)
    G = pck.fit(X).transform(X)
    assert G.dtype == np.float32
    assert not np.any((G > 0) & (G < np.finfo(np.float32).tiny))
    assert (G == 0).mean() > 0.1  # the test data has far-apart clusters: many exact zeros
