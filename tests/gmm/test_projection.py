"""PCK's optional PCA projection: against scikit-learn PCA, out-of-sample, NaN, and the path of
[Lokse2020], Paper I."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest

from dkernel.errors import InvalidInputError, NumericalWarning
from dkernel.gmm.pck import ProbabilisticClusterKernel
from dkernel.gmm.projection import fit_pca_projection, project_observed, project_observed_dask
from dkernel.testing import assert_equal_up_to_row_blocking

SMALL = dict(n_estimators=3, max_components=5, n_iter=5, random_state=0)


def _correlated(n=240, p=12, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    latent = rng.normal(scale=3.0, size=(3, 3))[y] + rng.normal(size=(n, 3))
    X = latent @ rng.normal(size=(3, p)) + 0.3 * rng.normal(size=(n, p))
    return X + 5.0, y


def test_axes_match_sklearn_pca():
    from sklearn.decomposition import PCA

    X, _ = _correlated()
    Xc = X - X.mean(axis=0)
    for n in (3, 0.9):
        W, ratio = fit_pca_projection(Xc, n)
        ref = PCA(n, svd_solver="full").fit(X)
        assert W.shape == (12, ref.n_components_)
        np.testing.assert_allclose(ratio, ref.explained_variance_ratio_, rtol=1e-10)
        # same axes up to sign
        np.testing.assert_allclose(np.abs(W.T @ ref.components_.T), np.eye(W.shape[1]), atol=1e-8)
        Z = project_observed(Xc, W, np.float64)
        np.testing.assert_allclose(np.abs(Z), np.abs(ref.transform(X)), atol=1e-8)
    Wd, _ = fit_pca_projection(da.from_array(Xc, chunks=(50, 12)), 3)
    np.testing.assert_allclose(Wd, fit_pca_projection(Xc, 3)[0], atol=1e-10)
    assert fit_pca_projection(Xc, 40)[0].shape == (12, 12)  # capped at p


def test_rows_with_missing_values_use_least_squares_on_observed():
    X, _ = _correlated(p=8)
    Xc = X - X.mean(axis=0)
    W, _ = fit_pca_projection(Xc, 3)
    Xn = Xc[:5].copy()
    Xn[0, [1, 4]] = np.nan
    Xn[1, :] = np.nan
    Xn[2, 1:] = np.nan  # one observed value: fewer than d, minimum-norm solution
    Z = project_observed(Xn, W, np.float64)
    o = ~np.isnan(Xn[0])
    ref, *_ = np.linalg.lstsq(W[o], Xn[0, o], rcond=None)
    np.testing.assert_allclose(Z[0], ref, atol=1e-10)
    assert np.isnan(Z[1]).all()
    np.testing.assert_allclose(Z[2], np.linalg.pinv(W[:1]) @ Xn[2, :1], atol=1e-10)
    np.testing.assert_allclose(Z[3:], Xc[3:5] @ W, atol=1e-12)  # complete rows: Wᵀ x
    lazy = project_observed_dask(da.from_array(Xn, chunks=(2, 4)), W, np.float64)
    np.testing.assert_allclose(lazy.compute(), Z, rtol=1e-12, atol=1e-12)


def test_estimator_projection_out_of_sample_and_dask():
    X, _ = _correlated()
    pck = ProbabilisticClusterKernel(**SMALL, projection=4).fit(X[:200])
    assert pck.projection_components_.shape == (12, 4)
    assert pck.ensemble_.means.shape[1] == 4
    full = pck.transform(X)
    assert_equal_up_to_row_blocking(pck.transform(X[200:]), full[200:])
    assert_equal_up_to_row_blocking(
        pck.transform(da.from_array(X, chunks=(64, 12))).compute(), full
    )
    np.testing.assert_allclose(pck.degrees_, (pck.kernel() @ np.ones(200)).astype(float), rtol=1e-4)
    frac = ProbabilisticClusterKernel(**SMALL, projection=0.99).fit(X)
    assert 3 <= frac.projection_components_.shape[1] < 12


def test_projection_with_missing_values_still_works():
    X, _ = _correlated()
    rng = np.random.default_rng(1)
    X[rng.random(X.shape) < 0.2] = np.nan
    X[0] = np.nan
    with pytest.warns(NumericalWarning, match="no observed value"):
        pck = ProbabilisticClusterKernel(**SMALL, projection=3).fit(X)
    with pytest.warns(NumericalWarning, match="no observed value"):
        G = pck.transform(X)
    assert np.isfinite(G).all()
    np.testing.assert_allclose(G[0] * np.sqrt(pck.normalizer_), pck.ensemble_.weights, atol=1e-6)


def test_clusters_recovered_through_the_projection():
    from sklearn.cluster import KMeans

    from dkernel.metrics import clustering_accuracy
    from dkernel.spectral.dense import kpca_embedding

    X, y = _correlated(n=300, seed=3)
    pck = ProbabilisticClusterKernel(n_estimators=5, max_components=8, random_state=1, projection=3)
    emb = kpca_embedding(pck.fit(X).kernel().astype(np.float64), 3).embedding
    assert clustering_accuracy(y, KMeans(3, n_init=10, random_state=0).fit_predict(emb)) > 0.9


def test_default_is_paper_path():
    """projection=None is the default and fits on the input columns exactly as before (the
    bit-identical Γ against the pre-projection code was checked once, see docs/pck_results.md;
    here: no projection state, the ensemble in input coordinates, explicit None identical to
    the default, and a full-rank projection really is a different path)."""
    X, _ = _correlated()
    pck = ProbabilisticClusterKernel(**SMALL).fit(X)
    assert ProbabilisticClusterKernel().projection is None
    assert pck.projection_components_ is None and pck.ensemble_.means.shape[1] == 12
    again = ProbabilisticClusterKernel(**SMALL, projection=None).fit(X)
    assert np.array_equal(pck.transform(X), again.transform(X))
    proj = ProbabilisticClusterKernel(**SMALL, projection=12).fit(X)
    assert not np.array_equal(pck.transform(X), proj.transform(X))


@pytest.mark.parametrize(
    "params, match",
    [
        ({"projection": 0}, "'projection'"),
        ({"projection": -3}, "'projection'"),
        ({"projection": 2.5}, "'projection'"),
        ({"projection": "pca"}, "'projection'"),
        ({"projection": True}, "'projection'"),
        ({"projection": float("nan")}, "'projection'"),
        ({"projection": 3, "missingness": "informative"}, "projection=None"),
    ],
)
def test_bad_projection(params, match):
    X, _ = _correlated()
    with pytest.raises(InvalidInputError, match=match):
        ProbabilisticClusterKernel(**{**SMALL, **params}).fit(X)
