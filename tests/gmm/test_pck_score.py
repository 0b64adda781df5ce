"""ProbabilisticClusterKernel.score_samples / score against a slow, obvious reference."""

from __future__ import annotations

import warnings

import dask.array as da
import numpy as np
import pytest
from scipy.stats import multivariate_normal, norm

from dkernel.errors import NumericalWarning
from dkernel.gmm.pck import ProbabilisticClusterKernel


def _data(n=150, p=3, missing=0.2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(scale=3.0, size=(3, p))[rng.integers(0, 3, n)] + rng.normal(size=(n, p))
    if missing:
        mask = rng.random((n, p)) < missing
        mask[:, 0] = False  # every row keeps an observed value
        X[mask] = np.nan
    return X


def _reference(pck, X):
    """Per row: mean over models of log sum_g w_g N(observed x; mu_g, Sigma_g)."""
    Xc = X[:, pck.feature_mask_] - pck.location_
    ens = pck.ensemble_
    models = (
        [
            (ens.means[a:b], ens.variances[a:b], ens.weights[a:b])
            for a, b in zip(ens.offsets[:-1], ens.offsets[1:], strict=True)
        ]
        if pck.covariance_type == "diag"
        else ens.models
    )
    out = np.zeros(len(X))
    for i, x in enumerate(Xc):
        o = ~np.isnan(x)
        for means, cov, w in models:
            dens = 0.0
            for g in range(len(w)):
                if pck.covariance_type == "diag":
                    sd = np.sqrt(np.asarray(cov[g], np.float64)[o])
                    dens += w[g] * np.prod(norm.pdf(x[o], means[g][o], sd))
                else:
                    dens += w[g] * multivariate_normal.pdf(x[o], means[g][o], cov[g][np.ix_(o, o)])
            out[i] += np.log(dens) / len(models)
    return out


@pytest.mark.parametrize("covariance_type", ["diag", "full"])
def test_score_samples_equals_the_slow_reference(covariance_type):
    X = _data()
    pck = ProbabilisticClusterKernel(
        n_estimators=2,
        max_components=4,
        covariance_type=covariance_type,
        dtype="float64",
        random_state=0,
    ).fit(X)
    new = _data(n=40, seed=1)
    np.testing.assert_allclose(pck.score_samples(new), _reference(pck, new), rtol=1e-8)
    assert pck.score(new) == pytest.approx(_reference(pck, new).mean(), rel=1e-8)


def test_score_of_dask_input_equals_numpy():
    X = _data(missing=0.0)
    pck = ProbabilisticClusterKernel(n_estimators=2, max_components=4, random_state=0).fit(X)
    new = _data(n=90, missing=0.3, seed=2)
    lazy = pck.score_samples(da.from_array(new, chunks=30))
    assert isinstance(lazy, da.Array)
    np.testing.assert_allclose(lazy.compute(), pck.score_samples(new), rtol=1e-10)
    assert pck.score(da.from_array(new, chunks=30)) == pytest.approx(pck.score(new), rel=1e-10)


def test_held_out_score_prefers_the_fitting_floor_over_a_degenerate_one():
    """Few rows in many dimensions: a variance floor far below the data's spread overfits the
    fitting rows, which the held-out score shows and the training score does not."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 40))
    held_out = rng.normal(size=(200, 40))
    scores = {}
    for reg in (1e-6, 1e-1):
        with warnings.catch_warnings():  # 0.1 is over 1 % of the columns' variance
            warnings.simplefilter("ignore", NumericalWarning)
            pck = ProbabilisticClusterKernel(
                n_estimators=2, max_components=8, reg_covar=reg, random_state=0
            ).fit(X)
        scores[reg] = (pck.score(X), pck.score(held_out))
    assert scores[1e-6][0] > scores[1e-1][0]
    assert scores[1e-6][1] < scores[1e-1][1]
