"""``KernelKMeans(sigma_fraction='auto')``: the silhouette in a kernel's feature space against
the definition, the choice against fitting the chosen width, the evidence, and when the width
is not chosen."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.base import BaseEstimator, ClusterMixin
from sklearn.datasets import load_wine, make_blobs
from sklearn.preprocessing import StandardScaler

from dkernel import KernelKMeans
from dkernel.errors import InvalidInputError
from dkernel.kernels import width_selection as width
from dkernel.kernels.width_selection import kernel_silhouette, reference_kernel
from dkernel.kernels.widths import KERNEL_KMEANS_SIGMA_FRACTION, KERNEL_KMEANS_SIGMA_FRACTIONS
from dkernel.metrics import UNDEFINED_SILHOUETTE


def _slow_silhouette(K: np.ndarray, labels: np.ndarray) -> float:
    """Rousseeuw's definition, point by point: a(i) the mean distance to the rest of its own
    cluster, b(i) the smallest mean distance to another cluster, s(i) = (b − a) / max(a, b)
    (0 for a point alone in its cluster), with ``d(x, y)² = k(x, x) + k(y, y) − 2 k(x, y)``."""
    n = len(labels)
    s = []
    for i in range(n):
        d = [np.sqrt(max(K[i, i] + K[j, j] - 2 * K[i, j], 0.0)) for j in range(n)]
        own = [d[j] for j in range(n) if labels[j] == labels[i] and j != i]
        if not own:
            s.append(0.0)
            continue
        a = np.mean(own)
        b = min(
            np.mean([d[j] for j in range(n) if labels[j] == c])
            for c in set(labels.tolist()) - {labels[i]}
        )
        s.append((b - a) / max(a, b))
    return float(np.mean(s))


def _wine() -> np.ndarray:
    return StandardScaler().fit_transform(load_wine().data)


def test_kernel_silhouette_is_the_definition():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 3))
    K = np.exp(-((X[:, None, :] - X[None, :, :]) ** 2).sum(-1) / 4.0)
    labels = rng.integers(0, 3, size=40)
    labels[0] = 5  # one point alone in its cluster
    assert kernel_silhouette(K, labels) == pytest.approx(_slow_silhouette(K, labels), abs=1e-12)


def test_kernel_silhouette_undefined_for_one_cluster_or_one_per_point():
    K = np.eye(5)
    assert kernel_silhouette(K, np.zeros(5, dtype=int)) == UNDEFINED_SILHOUETTE
    assert kernel_silhouette(K, np.arange(5)) == UNDEFINED_SILHOUETTE


def test_auto_keeps_the_best_scored_width_and_equals_fitting_it():
    X = _wine()
    auto = KernelKMeans(3, random_state=0).fit(X)
    np.testing.assert_array_equal(auto.sigma_fraction_candidates_, KERNEL_KMEANS_SIGMA_FRACTIONS)
    scores = auto.sigma_fraction_scores_
    assert scores.shape == (len(KERNEL_KMEANS_SIGMA_FRACTIONS),)
    assert auto.sigma_fraction_ == KERNEL_KMEANS_SIGMA_FRACTIONS[int(np.argmax(scores))]
    # every score is the silhouette of that width's partition in the reference kernel, the
    # kernel k-means' own at 0.5 x the median distance
    narrow = KernelKMeans(3, sigma_fraction=0.5, random_state=0).fit(X)
    reference = reference_kernel(X, 0)
    np.testing.assert_allclose(reference, narrow.kernel_(X))
    for fraction, score in zip(KERNEL_KMEANS_SIGMA_FRACTIONS, scores, strict=True):
        labels = KernelKMeans(3, sigma_fraction=fraction, random_state=0).fit(X).labels_
        assert score == pytest.approx(kernel_silhouette(reference, labels), abs=1e-12)
    fixed = KernelKMeans(3, sigma_fraction=auto.sigma_fraction_, random_state=0).fit(X)
    np.testing.assert_array_equal(auto.labels_, fixed.labels_)
    assert auto.sigma_ == pytest.approx(fixed.sigma_)


def test_auto_chooses_on_a_sample_above_the_width_sample(monkeypatch):
    monkeypatch.setattr(width, "WIDTH_SAMPLE", 150)
    X, _ = make_blobs(600, centers=4, random_state=0)
    first = KernelKMeans(4, random_state=3).fit(X)
    again = KernelKMeans(4, random_state=3).fit(X)
    assert first.sigma_fraction_ in KERNEL_KMEANS_SIGMA_FRACTIONS
    np.testing.assert_array_equal(first.sigma_fraction_scores_, again.sigma_fraction_scores_)
    np.testing.assert_array_equal(first.labels_, again.labels_)
    assert first.labels_.shape == (600,)


def test_auto_with_missing_values_and_auto_k():
    X = _wine()
    X[np.random.default_rng(1).random(X.shape) < 0.1] = np.nan
    model = KernelKMeans("auto", random_state=0).fit(X)
    assert model.sigma_fraction_ in KERNEL_KMEANS_SIGMA_FRACTIONS
    assert np.all(np.isfinite(model.sigma_fraction_scores_))
    assert model.n_clusters_ >= 2


@pytest.mark.parametrize(
    "params", [{"sigma": 2.0}, {"kernel": "knn_mean"}, {"sigma_fraction": 1.5}]
)
def test_no_choice_without_a_data_chosen_rbf_width(params):
    model = KernelKMeans(3, random_state=0, **params).fit(_wine())
    assert model.sigma_fraction_candidates_ is None and model.sigma_fraction_scores_ is None
    expected = params.get("sigma_fraction", KERNEL_KMEANS_SIGMA_FRACTION)
    assert model.sigma_fraction_ == expected


def test_bad_sigma_fraction_is_a_clear_error():
    with pytest.raises(InvalidInputError, match="sigma_fraction"):
        KernelKMeans(3, sigma_fraction="median").fit(_wine())


def test_kpca_auto_clusters_at_the_best_scored_width_and_equals_fitting_it():
    from dkernel import KernelPCAEmbedding
    from dkernel.kernels.widths import KPCA_SIGMA_FRACTIONS

    X = _wine()
    auto = KernelPCAEmbedding(n_clusters=3, random_state=0).fit(X)
    np.testing.assert_array_equal(auto.sigma_fraction_candidates_, KPCA_SIGMA_FRACTIONS)
    assert auto.sigma_fraction_ == KPCA_SIGMA_FRACTIONS[int(np.argmax(auto.sigma_fraction_scores_))]
    reference = reference_kernel(X, 0)
    for fraction, score in zip(KPCA_SIGMA_FRACTIONS, auto.sigma_fraction_scores_, strict=True):
        labels = KernelPCAEmbedding(n_clusters=3, sigma_fraction=fraction, random_state=0)
        assert score == pytest.approx(kernel_silhouette(reference, labels.fit(X).labels_))
    fixed = KernelPCAEmbedding(n_clusters=3, sigma_fraction=auto.sigma_fraction_, random_state=0)
    fixed.fit(X)
    np.testing.assert_array_equal(auto.labels_, fixed.labels_)
    np.testing.assert_allclose(np.abs(auto.embedding_), np.abs(fixed.embedding_), atol=1e-5)
    np.testing.assert_array_equal(auto.predict(X), auto.labels_)
    assert not hasattr(auto, "_width_fit") or auto._width_fit is None  # nothing kept twice


def test_kpca_and_keca_auto_without_clusters_are_the_median_heuristic():
    from dkernel import KECA, KernelPCAEmbedding
    from dkernel.kernels.widths import DEFAULT_SIGMA_FRACTION

    for model in (KernelPCAEmbedding(2, random_state=0), KECA(2, random_state=0)):
        model.fit(_wine())
        assert model.sigma_fraction_ == DEFAULT_SIGMA_FRACTION
        assert model.sigma_fraction_candidates_ is None


def test_keca_auto_compares_widths_and_dimensions_and_equals_fitting_the_choice():
    """Every width with k and 2k entropy axes, each score the silhouette of that setting's
    own fit in the reference kernel; the fit is the chosen setting's."""
    from dkernel import KECA
    from dkernel.kernels.widths import KECA_SIGMA_FRACTIONS

    X = _wine()
    auto = KECA(n_clusters=3, random_state=0).fit(X)
    settings = [(f, c) for f in KECA_SIGMA_FRACTIONS for c in (3, 6)]
    np.testing.assert_array_equal(auto.sigma_fraction_candidates_, [f for f, _ in settings])
    np.testing.assert_array_equal(auto.n_components_candidates_, [c for _, c in settings])
    reference = reference_kernel(X, 0)
    for (fraction, dim), score in zip(settings, auto.sigma_fraction_scores_, strict=True):
        one = KECA(n_clusters=3, sigma_fraction=fraction, n_components=dim, random_state=0)
        assert score == pytest.approx(kernel_silhouette(reference, one.fit(X).labels_))
    best = int(np.argmax(auto.sigma_fraction_scores_))
    assert (auto.sigma_fraction_, auto.n_components_) == settings[best]
    fixed = KECA(
        n_clusters=3,
        sigma_fraction=settings[best][0],
        n_components=settings[best][1],
        random_state=0,
    ).fit(X)
    np.testing.assert_array_equal(auto.labels_, fixed.labels_)
    assert auto.embedding_.shape == (len(X), settings[best][1])
    np.testing.assert_array_equal(auto.predict(X), auto.labels_)


def test_keca_auto_with_a_given_dimension_compares_widths_only(monkeypatch):
    from dkernel import KECA
    from dkernel.kernels.widths import KECA_SIGMA_FRACTIONS

    given = KECA(n_components=4, n_clusters=3, random_state=0).fit(_wine())
    np.testing.assert_array_equal(given.sigma_fraction_candidates_, KECA_SIGMA_FRACTIONS)
    assert given.n_components_candidates_ is None and given.n_components_ == 4
    # on a sample (above WIDTH_SAMPLE) the chosen dimension is carried to the final fit
    monkeypatch.setattr(width, "WIDTH_SAMPLE", 100)
    sampled = KECA(n_clusters=3, random_state=0).fit(_wine())
    best = int(np.argmax(sampled.sigma_fraction_scores_))
    assert sampled.n_components_ == sampled.n_components_candidates_[best]
    assert sampled.embedding_.shape == (178, sampled.n_components_)


class _AxisSplit(ClusterMixin, BaseEstimator):
    """Two clusters by the sign of column 0; with ``drift`` and more than 100 rows, by the
    sign of column 1 instead: a setting whose fit on every row is not its sample fit."""

    def __init__(self, sigma_fraction=1.0, drift=False, random_state=None):
        self.sigma_fraction = sigma_fraction
        self.drift = drift
        self.random_state = random_state

    def fit(self, X, y=None):
        column = 1 if self.drift and len(X) > 100 else 0
        self.labels_ = (np.asarray(X)[:, column] > 0).astype(int)
        return self


def _two_groups_along_x(n: int = 400) -> np.ndarray:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, 2))
    X[:, 0] += np.where(np.arange(n) % 2 == 0, -4.0, 4.0)
    return X


def test_verify_takes_the_next_setting_when_the_fit_on_every_row_is_another_partition(
    monkeypatch,
):
    monkeypatch.setattr(width, "WIDTH_SAMPLE", 100)
    X = _two_groups_along_x()
    settings = [{"sigma_fraction": 0.5, "drift": True}, {"sigma_fraction": 1.0, "drift": False}]
    unverified = width.choose_setting(_AxisSplit(), X, 0, settings)
    assert unverified.setting == settings[0]  # a tie on the sample: the first
    assert unverified.model is None and unverified.verified_scores is None
    choice = width.choose_setting(_AxisSplit(), X, 0, settings, verify=True)
    assert choice.setting == settings[1]
    np.testing.assert_array_equal(choice.scores, unverified.scores)
    rows = width.width_sample(len(X), width.derive_rng(0, "width-selection"))
    reference = reference_kernel(X[rows], 0)
    drifted = (X[:, 1] > 0).astype(int)
    assert choice.verified_scores[0] == pytest.approx(kernel_silhouette(reference, drifted[rows]))
    assert choice.verified_scores[1] == pytest.approx(choice.scores[1])
    assert choice.verified_scores[0] < choice.verified_scores[1] - width.VERIFY_TOLERANCE
    np.testing.assert_array_equal(choice.model.labels_, (X[:, 0] > 0).astype(int))
    assert len(choice.model.labels_) == len(X)  # the fit on every row, to adopt


def test_verify_fits_one_setting_on_every_row_when_it_holds(monkeypatch):
    monkeypatch.setattr(width, "WIDTH_SAMPLE", 100)
    X = _two_groups_along_x()
    settings = [{"sigma_fraction": 0.5, "drift": False}, {"sigma_fraction": 1.0, "drift": True}]
    choice = width.choose_setting(_AxisSplit(), X, 0, settings, verify=True)
    assert choice.setting == settings[0]
    assert np.isfinite(choice.verified_scores[0]) and np.isnan(choice.verified_scores[1])
    # at most MAX_VERIFIED_FITS settings are fitted on every row
    many = [{"sigma_fraction": 0.1 * (i + 1), "drift": True} for i in range(5)]
    capped = width.choose_setting(_AxisSplit(), X, 0, many, verify=True)
    assert np.isfinite(capped.verified_scores).sum() == width.MAX_VERIFIED_FITS


def test_keca_above_the_width_sample_keeps_the_verified_fit(monkeypatch):
    """KECA's 'auto' above the sample: the chosen setting's fit on every row is the one
    adopted, its verified score the silhouette of its labels on the sample's rows."""
    from dkernel import KECA

    monkeypatch.setattr(width, "WIDTH_SAMPLE", 100)
    X = _wine()
    auto = KECA(n_clusters=3, random_state=0).fit(X)
    verified = auto.sigma_fraction_verified_scores_
    chosen = int(np.nanargmax(verified))
    assert int(np.argmax(auto.sigma_fraction_scores_)) in np.flatnonzero(np.isfinite(verified))
    assert (auto.sigma_fraction_, auto.n_components_) == (
        auto.sigma_fraction_candidates_[chosen],
        auto.n_components_candidates_[chosen],
    )
    rows = width.width_sample(len(X), width.derive_rng(0, "width-selection"))
    reference = reference_kernel(X[rows], 0)
    assert verified[chosen] == pytest.approx(kernel_silhouette(reference, auto.labels_[rows]))
    fixed = KECA(
        n_clusters=3,
        sigma_fraction=float(auto.sigma_fraction_),
        n_components=int(auto.n_components_),
        random_state=0,
    ).fit(X)
    np.testing.assert_array_equal(auto.labels_, fixed.labels_)
    assert fixed.sigma_fraction_verified_scores_ is None
    assert auto._width_fit is None  # nothing kept twice
