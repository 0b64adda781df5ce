"""MeanShift / MSSC estimators: NumPy and Dask input, predict consistency, errors."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.datasets import make_blobs
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import adjusted_rand_score

from dkernel.errors import InvalidInputError, MeanShiftConvergenceWarning, NotFittedError
from dkernel.kernels.widths import silverman_thesis
from dkernel.meanshift import kernels as K
from dkernel.meanshift.estimators import MSSC, MeanShift, normalized_spectrum, second_stage
from dkernel.testing import as_kind


def _toy(seed=0):
    """[Agersborg2012], §6.1.3: two noisy half circles (250 points each) and a blob (100)."""
    rng = np.random.default_rng(seed)
    t = rng.uniform(0, np.pi, 250)
    a = np.c_[5 * np.cos(t), 5 * np.sin(t)] + rng.normal(0, 0.4, (250, 2))
    t = rng.uniform(0, np.pi, 250)
    b = np.c_[5 - 5 * np.cos(t), 2 - 5 * np.sin(t)] + rng.normal(0, 0.6, (250, 2))
    c = rng.normal([11, 7], 1.0, (100, 2))
    return np.vstack([a, b, c]), np.repeat([0, 1, 2], [250, 250, 100])


def _blobs(rng, n=200):
    centers = np.array([[0, 0], [4, 0], [0, 4]])
    X = np.vstack([rng.normal(c, 0.5, (n, 2)) for c in centers])
    return X, np.repeat([0, 1, 2], n)


def test_meanshift_all_seeds_matches_kernels(rng):
    X, y = _blobs(rng, 60)
    ms = MeanShift(0.8, tol=1e-4).fit(X)
    res = K.mean_shift(X, X, 0.8, tol=1e-4)
    labels, modes = K.group_modes(res.ends, K.group_threshold(res.moves, 0.8))
    np.testing.assert_array_equal(ms.labels_, labels)
    np.testing.assert_allclose(ms.modes_, modes)
    assert ms.n_partitions_ == 3
    assert adjusted_rand_score(y, ms.labels_) == 1.0


def test_silverman_default_bandwidth(rng):
    X, _ = _blobs(rng, 50)
    assert MeanShift().fit(X).bandwidth_ == pytest.approx(silverman_thesis(X, robust=True))
    ms = MeanShift(bandwidth_factor=0.5).fit(X)
    assert ms.bandwidth_ == pytest.approx(0.5 * silverman_thesis(X, robust=True))


def test_one_far_row_does_not_merge_the_clusters():
    # the standard deviation of Silverman's rule took the far row's distance: one cluster
    X, y = make_blobs(1000, centers=4, n_features=5, random_state=0)
    X = np.vstack([X, X.mean(axis=0) + 1e4])
    ms = MeanShift().fit(X)
    assert ms.n_partitions_ == 4
    assert adjusted_rand_score(y, ms.labels_[:-1]) > 0.99


@pytest.mark.parametrize("seeds", ["all", "grid", "kmeans"])
def test_predict_reproduces_fit_labels(rng, seeds, array_kind):
    X, y = _blobs(rng, 400)
    ms = MeanShift(
        0.6, seeds=seeds, n_seeds=60, density_max_samples=500, density="sample", random_state=0
    ).fit(as_kind(X, array_kind, chunk_rows=300))
    fit_labels = np.asarray(ms.labels_.compute() if hasattr(ms.labels_, "compute") else ms.labels_)
    assert adjusted_rand_score(y, fit_labels) > 0.95
    pred = ms.predict(X)
    assert (pred == fit_labels).mean() >= 0.99
    # pure mean shift to convergence (no trajectory shortcut) also agrees
    pure = MeanShift(
        0.6, seeds=seeds, n_seeds=60, density_max_samples=500, path_radius=0.0, random_state=0
    ).fit(X)
    assert (pure.predict(X) == pure.labels_).mean() >= 0.99


def test_dask_predict_is_lazy_and_equal(rng):
    import dask.array as da

    X, _ = _blobs(rng, 200)
    ms = MeanShift(0.6, seeds="kmeans", n_seeds=30, random_state=1).fit(X)
    lazy = ms.predict(da.from_array(X, chunks=(128, 2)))
    assert isinstance(lazy, da.Array) and lazy.numblocks == (5,)
    np.testing.assert_array_equal(lazy.compute(), ms.predict(X))


def test_nan_rows_get_minus_one(rng):
    X, _ = _blobs(rng, 50)
    ms = MeanShift(0.6).fit(X)
    Z = X[:5].copy()
    Z[2] = np.nan
    Z[3, 0] = np.nan  # one entry missing: it starts from its mean given the other column
    out = ms.predict(Z)
    assert out[2] == -1 and (out[[0, 1, 3, 4]] >= 0).all()
    np.testing.assert_allclose(ms.missing_model_.mean, X.mean(axis=0))
    np.testing.assert_allclose(ms.missing_model_.covariance, np.cov(X.T, bias=True))
    filled = Z[3:4].copy()
    C = ms.missing_model_.covariance + 1e-3 * np.trace(ms.missing_model_.covariance) / 2 * np.eye(2)
    filled[0, 0] = X[:, 0].mean() + C[0, 1] / C[1, 1] * (Z[3, 1] - X[:, 1].mean())
    np.testing.assert_allclose(ms.missing_model_.fill(Z[3:4])[0], filled)
    assert out[3] == ms.predict(filled)[0]


@pytest.mark.parametrize("est", ["meanshift", "mssc"])
def test_nan_rows_are_nodata_in_fit_as_in_predict(rng, array_kind, est):
    """Nodata rows: -1 in fit as in predict, and the other rows as if they were absent
    (MeanShift: all-NaN rows; MSSC, an image's pixels: any NaN)."""
    X, _ = _blobs(rng, 60)
    Xn = np.insert(X, [0, 7, 100], np.nan, axis=0)
    if est == "mssc":
        Xn[101, 0] = 3.0  # a pixel missing one band is nodata too (the inserted row at 101)
    bad = np.isnan(Xn).any(axis=1)
    make = {
        "meanshift": lambda: MeanShift(0.6),
        "mssc": lambda: MSSC(3, n_init=5, random_state=0),
    }[est]
    clean = make().fit(X)
    fitted = make().fit(as_kind(Xn, array_kind))
    labels = np.asarray(fitted.labels_)
    assert (labels[bad] == -1).all()
    np.testing.assert_array_equal(labels[~bad], np.asarray(clean.labels_))
    pred = fitted.predict(Xn)
    assert (pred[bad] == -1).all() and (pred[~bad] >= 0).all()
    Xi = X.copy()
    Xi[3, 1] = np.inf
    with pytest.raises(
        InvalidInputError, match="infinite values in X; replace them or mark them NaN"
    ):
        make().fit(Xi)
    with pytest.raises(InvalidInputError, match="at least 2 rows (without NaN|with an obs)"):
        make().fit(np.full((5, 2), np.nan))


def _filled_mean_shift(X: np.ndarray, h: float, model, n_iter: int = 2000) -> np.ndarray:
    """Slow reference: Gaussian mean shift from every row, each row filled with the
    conditional means of its missing entries under ``model``'s Gaussian given its observed
    ones (the conditional moments from the covariance's blocks, row by row), every row of
    weight one, iterated to a fixed point."""
    p = X.shape[1]
    S = model.covariance + 1e-3 * np.trace(model.covariance) / p * np.eye(p)  # the ridge
    filled = X.copy()
    for i, x in enumerate(X):
        M, O = np.flatnonzero(np.isnan(x)), np.flatnonzero(~np.isnan(x))
        if M.size:
            gain = S[np.ix_(M, O)] @ np.linalg.inv(S[np.ix_(O, O)])
            filled[i, M] = model.mean[M] + gain @ (x[O] - model.mean[O])
    ends = []
    for i in range(X.shape[0]):
        m = filled[i]
        for _ in range(n_iter):
            w = np.array(
                [np.exp(-((m - filled[j]) ** 2).sum() / (2 * h * h)) for j in range(len(X))]
            )
            new = (w[:, None] * filled).sum(axis=0) / w.sum()
            if np.linalg.norm(new - m) < 1e-10:
                break
            m = new
        ends.append(m)
    return np.array(ends)


def test_partial_rows_climb_the_density_of_the_filled_rows(rng):
    """MeanShift with some entries missing: every seed ends where plain mean shift on the
    rows filled with their conditional means ends, each row of weight one (a slow loop over
    rows)."""
    X, _ = _blobs(rng, 40)
    X = np.c_[X, X[:, 0] - X[:, 1]]
    holes = rng.random(X.shape) < 0.2
    holes[holes.all(axis=1), 0] = False
    X[holes] = np.nan
    ms = MeanShift(0.7, tol=1e-9, max_iter=5000, path_radius=0.0).fit(X)
    model = ms.missing_model_
    assert not model.independent  # EM's Gaussian: the third column follows the first two
    assert ms.density_weights_ is None
    np.testing.assert_allclose(ms.seed_ends_, _filled_mean_shift(X, 0.7, model), atol=1e-5)
    assert (ms.labels_ >= 0).all()
    np.testing.assert_array_equal(ms.predict(X), ms.labels_)


def test_rows_with_missing_entries_count_as_much_as_complete_ones():
    """Issue 57: when most rows miss some columns, the complete ones do not make the density.
    Three blobs whose rows mostly miss two of four columns (as the hawks do): weighted by
    their expected kernel exp(-r / 2h²) the few complete rows made modes of their own (23
    partitions, ARI 0.72)."""
    rng = np.random.default_rng(0)
    centres = np.array([[0.0, 0.0, 0.0, 0.0], [4.0, 0.0, 4.0, 1.0], [0.0, 4.0, -4.0, 2.0]])
    y = np.repeat(np.arange(3), 150)
    X = centres[y] + rng.normal(scale=[0.6, 0.6, 2.0, 2.0], size=(450, 4))
    X[rng.random(450) < 0.9, 2:] = np.nan
    ms = MeanShift().fit(X)
    assert ms.n_partitions_ == 3
    assert adjusted_rand_score(y, ms.labels_) > 0.98


def test_not_converged_warns_and_names_the_fix(rng):
    X, _ = _blobs(rng, 60)
    with pytest.warns(MeanShiftConvergenceWarning, match="max_iter=2 with .* Raise max_iter"):
        ms = MeanShift(0.6, max_iter=2).fit(X)
    assert not ms.converged_ and ms.n_iter_ == 2
    assert MeanShift(0.6).fit(X).converged_  # no warning (an error in the test suite)


def test_seeded_fit_is_deterministic(rng):
    X, _ = _blobs(rng, 300)
    a = MeanShift(0.6, seeds="kmeans", n_seeds=40, density_max_samples=400, random_state=3).fit(X)
    b = MeanShift(0.6, seeds="kmeans", n_seeds=40, density_max_samples=400, random_state=3).fit(X)
    np.testing.assert_array_equal(a.labels_, b.labels_)
    np.testing.assert_array_equal(a.modes_, b.modes_)


def test_first_stage_does_not_depend_on_the_seed(rng):
    # sampled density and k-means pre-partition: both systematic, so every seed finds the
    # same partitions (random draws made MSSC's clusters on the demo scene seed-dependent)
    X, _ = _blobs(rng, 300)
    fits = [
        MeanShift(0.6, seeds="kmeans", n_seeds=40, density_max_samples=100, random_state=s).fit(X)
        for s in (0, 1, 2)
    ]
    for other in fits[1:]:
        np.testing.assert_array_equal(other.labels_, fits[0].labels_)
        np.testing.assert_array_equal(other.modes_, fits[0].modes_)


#: The protocol of Agersborg (2012), ch. 5 [Agersborg2012], pinned where a test reproduces it:
#: the estimator's defaults are the job's (NJW, size-weighted, k-means seeds) since issue 15.
THESIS = {
    "embedding": "keca",
    "normalization": "cs",
    "seeds": "all",
    "density": "sample",
    "density_max_samples": 5000,
    "path_radius": 0.2,
    "bandwidth_factor": 1.0,
    "sigma_fraction": 0.2,
}


def test_mssc_toy_beats_direct_spectral():
    """[Agersborg2012], §6.1.3 (Fig. 6.13–6.14): MSSC separates what KPCA/KECA on the raw kernel
    cannot."""
    from dkernel.kernels import rbf_block
    from dkernel.linalg import angular_kmeans, euclidean_kmeans
    from dkernel.spectral.dense import keca_embedding, kpca_embedding

    X, y = _toy()
    h = 1.0
    Kx = rbf_block(X, X, h)
    kpca = euclidean_kmeans(kpca_embedding(Kx, 3).embedding, 3, n_init=10, random_state=0)[0]
    keca = angular_kmeans(keca_embedding(Kx, 3).embedding, 3, n_init=10, random_state=0)[0]
    direct = max(adjusted_rand_score(y, kpca), adjusted_rand_score(y, keca))
    # the thesis' 50 blurring iterations stop before every point has settled: said, not hidden
    with pytest.warns(MeanShiftConvergenceWarning, match="max_iter=50"):
        m = MSSC(3, bandwidth=1.0, sigma=h, blurring=True, max_iter=50, n_init=10, **THESIS)
        m.fit(X)
    assert not m.converged_
    assert adjusted_rand_score(y, m.labels_) > direct + 0.1
    assert (m.predict(X) == m.labels_).mean() >= 0.99


@pytest.mark.parametrize("embedding", ["kpca", "keca", "normalized"])
@pytest.mark.parametrize("normalization", ["cs", "size"])
def test_mssc_blobs_and_attributes(rng, embedding, normalization):
    X, y = _blobs(rng, 150)
    m = MSSC(
        3,
        bandwidth=0.3,
        embedding=embedding,
        normalization=normalization,
        n_init=10,
        random_state=0,
    ).fit(X)
    assert m.n_partitions_ >= 3
    assert adjusted_rand_score(y, m.labels_) > 0.95
    assert m.affinity_.shape == (m.n_partitions_, m.n_partitions_)
    np.testing.assert_allclose(m.affinity_, m.affinity_.T)
    assert m.embedding_.shape == (m.n_partitions_, 3)
    assert m.partition_sizes_.sum() == X.shape[0]
    np.testing.assert_array_equal(m.labels_, m.partition_labels_[m.pixel_partitions_])


def test_mssc_rff_matches_exact_on_blobs(rng, array_kind):
    X, y = _blobs(rng, 150)
    # Eq. 5.4 affinities (in [0, 1]) so that one absolute tolerance fits every entry
    kw = {"sigma": 2.0, "normalization": "cs", "n_init": 10, "random_state": 0}
    exact = MSSC(3, bandwidth=0.3, affinity="exact", **kw).fit(X)
    rff = MSSC(3, bandwidth=0.3, affinity="rff", n_rff=3000, **kw).fit(as_kind(X, array_kind))
    np.testing.assert_allclose(rff.affinity_, exact.affinity_, atol=0.05)
    labels = np.asarray(rff.labels_.compute() if hasattr(rff.labels_, "compute") else rff.labels_)
    assert adjusted_rand_score(exact.labels_, labels) > 0.95


def _dense_pair_sums(X, lab, m, h):
    """``S_ij = Σ_{k∈C_i, l∈C_j} K(x_k, x_l)`` in float64 from the dense kernel (small X)."""
    d2 = ((X[:, None, :] - X[None, :, :]) ** 2).sum(axis=-1)
    E = np.eye(m)[lab]
    return E.T @ np.exp(-d2 / (2 * h * h)) @ E


def test_second_stage_size_weighting_equals_point_level_kpca(rng):
    """Size-normalised sums = point-level kernel on partition-constant functions."""
    from dkernel.spectral.dense import kpca_embedding

    X = rng.normal(size=(40, 2))
    lab = rng.integers(0, 6, 40)
    n = np.bincount(lab, minlength=6)
    S = _dense_pair_sums(X, lab, 6, 1.0)
    B = S / np.sqrt(np.outer(n, n))
    _, Z, vals, _ = second_stage(B, 2, "kpca", n_init=5, seed=0, sizes=n)
    # reference: KPCA of the N x N block-constant kernel E diag(1/n) S diag(1/n) E^T
    E = np.eye(6)[lab]
    Kblock = E @ (S / np.outer(n, n)) @ E.T
    ref = kpca_embedding(Kblock, 2)
    np.testing.assert_allclose(vals, ref.eigenvalues, rtol=1e-8)
    np.testing.assert_allclose(np.abs(Z[lab]), np.abs(ref.embedding), atol=1e-8)


@pytest.mark.parametrize("sized", [True, False])
def test_second_stage_njw_equals_point_level_njw(rng, sized):
    """'njw' = Ng–Jordan–Weiss on the point graph restricted to partition-constant functions."""
    X = rng.normal(size=(40, 2))
    lab = rng.integers(0, 6, 40)
    n = np.bincount(lab, minlength=6)
    S = _dense_pair_sums(X, lab, 6, 1.0)
    E = np.eye(6)[lab]
    if sized:
        A, sizes = S / np.sqrt(np.outer(n, n)), n
        W = E @ (S / np.outer(n, n)) @ E.T  # N x N block-constant point kernel
    else:
        A, sizes = S, None
        W = S  # every partition one point
    labels, Z, vals, _ = second_stage(A, 3, "normalized", n_init=5, seed=0, sizes=sizes)
    # slow obvious reference: NJW on W (D^-1/2 W D^-1/2, top eigenvectors, unit rows)
    d = W.sum(axis=1)
    M = W / np.sqrt(np.outer(d, d))
    w, V = np.linalg.eigh(M)
    order = np.argsort(w)[::-1][:3]
    U = V[:, order]
    U = U / np.linalg.norm(U, axis=1, keepdims=True)
    np.testing.assert_allclose(vals, w[order], rtol=1e-8, atol=1e-12)
    rows = Z[lab] if sized else Z
    # each column up to sign
    for j in range(3):
        s = np.sign(rows[:, j] @ U[:, j])
        np.testing.assert_allclose(s * rows[:, j], U[:, j], atol=1e-8)
    np.testing.assert_allclose(np.linalg.norm(Z, axis=1), 1.0)
    assert labels.shape == (6,) and set(labels) <= {0, 1, 2}


def test_second_stage_njw_separates_blocks():
    """Two dense diagonal blocks with a weak link: NJW puts each block in one cluster."""
    A = np.full((6, 6), 0.01)
    A[:3, :3] = A[3:, 3:] = 1.0
    labels = second_stage(
        A, 2, "normalized", n_init=5, seed=0, sizes=np.array([5, 1, 9, 2, 30, 4])
    )[0]
    assert len(set(labels[:3])) == 1 and len(set(labels[3:])) == 1 and labels[0] != labels[3]


def test_spectral_fraction_sets_default_bandwidth(rng):
    from dkernel._random import derive_seed
    from dkernel.kernels import sigma_rule_of_thumb

    X, _ = _blobs(rng, 60)
    m = MSSC(3, bandwidth=0.3, sigma_fraction=0.5, n_init=5, random_state=0).fit(X)
    ref = sigma_rule_of_thumb(X, fraction=0.5, seed=derive_seed(0, "sigma"))
    assert m.sigma_ == pytest.approx(max(ref, 0.3))
    with pytest.raises(InvalidInputError, match="'sigma_fraction' parameter of MSSC"):
        MSSC(3, bandwidth=0.3, sigma_fraction=0.0).fit(X)


def test_errors(rng):
    X, _ = _blobs(rng, 30)
    with pytest.raises(InvalidInputError, match="'bandwidth' parameter of MeanShift"):
        MeanShift(-1.0).fit(X)
    with pytest.raises(InvalidInputError, match="'seeds' parameter"):
        MeanShift(seeds="random").fit(X)
    with pytest.raises(NotFittedError):
        MeanShift().predict(X)
    with pytest.raises(InvalidInputError, match="fewer than n_clusters"):
        MSSC(5, bandwidth=50.0).fit(X)
    ms = MeanShift(0.5).fit(X)
    with pytest.raises(InvalidInputError, match="X has 4 features, but MeanShift is expecting 2"):
        ms.predict(np.zeros((3, 4)))
    # MSSC: a band that is NaN everywhere makes every pixel nodata; the message names it
    with pytest.raises(InvalidInputError, match=r"Column\(s\) \[2\] are NaN in every row"):
        MSSC(2).fit(np.c_[X, np.full(len(X), np.nan)])


def _two_materials(rng, n=200):
    """6 non-negative bands: two spectral shapes at brightnesses spread 1-4x, plus x, y."""
    shapes = np.array([[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], [6.0, 5.0, 4.0, 3.0, 2.0, 1.0]])
    y = np.repeat([0, 1], n // 2)
    bright = rng.uniform(1.0, 4.0, n)
    bands = bright[:, None] * shapes[y] + rng.normal(0, 0.05, (n, 6))
    return np.c_[np.abs(bands), rng.uniform(0, 0.1, (n, 2))], y


def test_mssc_band_norm(rng):
    """band_norm='auto' (default) is decided by the bands, as in the job: unit length from 5
    non-negative bands on (only the first n_bands columns), none for standardised features."""
    from dkernel.meanshift.bands import unit_spectra

    X, y = _two_materials(rng)
    m = MSSC(2, n_bands=6, n_init=10, random_state=0).fit(X)
    assert m.band_norm_ == "unit"
    # the stored modes live in the scaled space: coordinates kept, bands of unit length
    np.testing.assert_allclose(np.linalg.norm(m.modes_[:, :6], axis=1), 1.0, atol=0.05)
    assert m.modes_[:, 6:].max() <= 0.1
    assert adjusted_rand_score(y, m.labels_) == 1.0
    assert (m.predict(X) == m.labels_).mean() >= 0.99  # predict scales new points too
    # the same as scaling by hand with the one implementation (meanshift.bands)
    ref = MSSC(2, n_bands=6, band_norm="none", n_init=10, random_state=0)
    np.testing.assert_array_equal(ref.fit(unit_spectra(X, 6)).labels_, m.labels_)
    none = MSSC(2, n_bands=6, band_norm="none", n_init=10, random_state=0).fit(X)
    assert none.band_norm_ == "none" and np.linalg.norm(none.modes_[:, :6], axis=1).min() > 2
    Z = (X - X.mean(0)) / X.std(0)
    assert MSSC(2, n_init=5, random_state=0).fit(Z).band_norm_ == "none"  # negative values
    assert MSSC(2, n_init=5, random_state=0).fit(X[:, :3]).band_norm_ == "none"  # 3 bands
    with pytest.raises(InvalidInputError, match="n_bands=9 exceeds"):
        MSSC(2, n_bands=9).fit(X)
    with pytest.raises(InvalidInputError, match="'band_norm' parameter"):
        MSSC(2, band_norm="l2").fit(X)


def _materials_left_and_right(rng, n=400):
    """Two materials (2 bands) along a long strip; columns 3-4: x in [0, 6], y in [0, 0.2]."""
    x = rng.uniform(0, 6, n)
    y = rng.integers(0, 2, n)
    bands = np.array([[0.0, 0.0], [0.3, 0.3]])[y] + rng.normal(0, 0.04, (n, 2))
    return np.c_[bands, x, rng.uniform(0, 0.2, n)], y


def test_coordinates_count_in_stage_one_only(rng):
    """coordinates='stage_one' (default): the affinity sees the bands alone (a slow, obvious
    reference of the pair sums on the band columns), so a material is one class wherever it
    lies; 'both' lets the position split it."""
    X, y = _materials_left_and_right(rng)
    m = MSSC(2, n_bands=2, bandwidth=0.15, n_init=10, random_state=0).fit(X)
    assert m.affinity_columns_ == 2
    part = np.asarray(m.pixel_partitions_)
    S = np.zeros((m.n_partitions_, m.n_partitions_))
    for i in range(X.shape[0]):
        d2 = ((X[i, :2] - X[:, :2]) ** 2).sum(axis=1)
        np.add.at(S[part[i]], part, np.exp(-d2 / (2 * m.sigma_**2)))
    np.testing.assert_allclose(m.pair_sums_, S, rtol=1e-5)  # float32 kernel blocks
    # the partitions are spatially compact segments, yet the classes are the materials
    assert m.n_partitions_ > 2
    assert adjusted_rand_score(y, m.labels_) == 1.0
    both = MSSC(2, n_bands=2, coordinates="both", bandwidth=0.15, n_init=10, random_state=0)
    assert both.fit(X).affinity_columns_ == 4
    assert adjusted_rand_score(y, both.labels_) < 0.5
    # every column a band (n_bands=None): nothing to leave out
    assert MSSC(2, bandwidth=0.15, n_init=5, random_state=0).fit(X).affinity_columns_ == 4


def test_sampled_affinity_estimates_the_exact_sums(rng):
    """affinity='sample' (auto above 20 000 points): exact kernel on a stratified sample,
    scaled; equal to 'exact' when the sample holds every point, close otherwise."""
    from dkernel.meanshift.estimators import _sampled_pair_sums
    from dkernel.meanshift.sampling import sample_sizes, stratified_sample

    X = rng.normal(size=(3000, 2))
    lab = np.minimum(rng.integers(0, 8, 3000), (X[:, 0] > 2.2) * 99 + 7)  # one small partition
    sizes = np.bincount(lab, minlength=8)
    exact = _dense_pair_sums(X, lab, 8, 1.0)
    taken = sample_sizes(sizes, 10**6)
    idx, ls, Xs = stratified_sample(X, lab, taken, salt=0)
    np.testing.assert_array_equal(taken, sizes)
    np.testing.assert_allclose(_sampled_pair_sums(Xs, ls, sizes, taken, 1.0), exact, rtol=1e-5)
    taken = sample_sizes(sizes, 600)
    idx, ls, Xs = stratified_sample(X, lab, taken, salt=1)
    assert (taken >= np.minimum(sizes, 50)).all() and np.all(np.diff(idx) > 0)
    np.testing.assert_array_equal(np.bincount(ls, minlength=8), taken)
    est = _sampled_pair_sums(Xs, ls, sizes, taken, 1.0)
    np.testing.assert_allclose(est, exact, rtol=0.15)
    m = MSSC(3, bandwidth=0.3, affinity="sample", n_init=10, random_state=0).fit(
        _blobs(rng, 150)[0]
    )
    assert m.affinity_method_ == "sample" and m.partition_sizes_.sum() == 450


def _scene(seed=0, side=36):
    """A small synthetic multispectral scene: 4 materials in irregular patches, 6 bands with
    brightness variation and noise, a few outlier pixels; features bands + (row, col)/side."""
    r = np.random.default_rng(seed)
    rows, cols = np.mgrid[0:side, 0:side] / side
    truth = (rows + 0.2 * np.sin(6 * cols) > 0.5).astype(int) * 2 + (cols > 0.45).astype(int)
    materials = r.uniform(0.1, 1.0, (4, 6))
    bright = r.uniform(0.7, 1.3, truth.shape)[..., None]
    bands = bright * materials[truth] + r.normal(0, 0.04, truth.shape + (6,))
    out = r.random(truth.shape) < 0.01  # outliers: random spectra
    bands[out] = r.uniform(0, 1.5, (int(out.sum()), 6))
    X = np.c_[np.abs(bands).reshape(-1, 6), 0.25 * rows.ravel(), 0.25 * cols.ravel()]
    return X, truth.ravel()


@pytest.mark.parametrize("affinity", ["exact", "sample"])
def test_mssc_defaults_are_stable_across_seeds(affinity):
    """Issue 15: at the defaults the label map does not depend on random_state."""
    import itertools

    X, y = _scene()
    labels = [
        MSSC(4, n_bands=6, affinity=affinity, random_state=s).fit(X).labels_ for s in range(3)
    ]
    assert min(adjusted_rand_score(y, lab) for lab in labels) > 0.9
    pairs = [adjusted_rand_score(a, b) for a, b in itertools.combinations(labels, 2)]
    assert min(pairs) >= 0.97


def test_mssc_auto_n_clusters_from_the_normalized_spectrum(rng):
    """n_clusters='auto': the timescale gap of the normalized partition graph's spectrum (a slow,
    obvious reference: the dense eigenvalues of D^-1/2 S D^-1/2 with the regularized degrees),
    the finest k scoring at least half the best."""
    centers = np.array([[0, 0], [6, 0], [0, 6], [6, 6]])
    X = np.vstack([rng.normal(c, 0.5, (150, 2)) for c in centers])
    y = np.repeat(np.arange(4), 150)
    m = MSSC("auto", bandwidth=0.25, n_init=10, random_state=0).fit(X)  # 7 partitions
    assert m.n_clusters_ == 4 and adjusted_rand_score(y, m.labels_) == 1.0
    S, n = m.pair_sums_, m.partition_sizes_.astype(float)
    deg = S.sum(axis=1) + m.degree_regularization * S.sum() / n.sum() * n
    ref = np.sort(np.linalg.eigvalsh(S / np.sqrt(np.outer(deg, deg))))[::-1]
    top = int(m.n_clusters_candidates_[-1])
    assert m.model_order_.rule == "timescale-gap" and top == min(10, ref.size - 1)
    np.testing.assert_allclose(m.spectrum_, ref[: top + 1], atol=1e-10)
    rel = 1 - ref / ref[0]
    eps = 0.003 * rel[top]
    scores = [np.log((rel[k] + eps) / (rel[k - 1] + eps)) for k in range(2, top + 1)]
    np.testing.assert_allclose(m.n_clusters_scores_, scores, rtol=1e-8, atol=1e-12)
    # the finest k whose score is at least half the best (IMAGE_FINEST_FRACTION)
    finest = [k for k, v in zip(range(2, top + 1), scores, strict=True) if v >= max(scores) / 2]
    assert m.n_clusters_ == max(finest)
    assert m.model_order_.details["finest_fraction"] == 0.5
    # a given k is kept, and its spectrum_ recorded too
    fixed = MSSC(4, bandwidth=0.25, n_init=10, random_state=0).fit(X)
    assert fixed.n_clusters_ == 4
    np.testing.assert_array_equal(fixed.labels_, m.labels_)
    np.testing.assert_allclose(fixed.spectrum_, m.spectrum_)


def _linear_mixture(rng, n=3000, bands=30):
    """Three materials mixed linearly (Dirichlet abundances); the class is the largest one."""
    materials = rng.uniform(0.2, 1.0, (3, bands))
    abundances = rng.dirichlet([0.6] * 3, n)
    X = abundances @ materials + rng.normal(0, 0.005, (n, bands))
    return X, abundances.argmax(axis=1)


@pytest.mark.parametrize("sized", [True, False])
@pytest.mark.parametrize("regularization", [0.0, 1.0])
def test_wide_limit_axes_are_the_limit_of_the_normalized_graph(rng, sized, regularization):
    """At a huge width the normalized partition graph (dense float64 kernel, the slow obvious
    reference) has the wide limit's leading axes and eigenvalue ratios."""
    from dkernel.meanshift.estimators import _normalized_graph, wide_limit_axes

    X = rng.normal(size=(60, 4)) * [3.0, 2.0, 1.0, 0.5]
    lab = rng.permutation(np.arange(60) % 8)
    n = np.bincount(lab, minlength=8)
    S = _dense_pair_sums(X, lab, 8, 1e3 * X.std())  # 1 - K ~ 1e-6
    A, sizes = (S / np.sqrt(np.outer(n, n)), n) if sized else (K.cs_normalize(S), None)
    M, _ = _normalized_graph(A, sizes, regularization)
    w, V = np.linalg.eigh(M)
    w, V = w[::-1], V[:, ::-1]
    means = np.stack([X[lab == i].mean(axis=0) for i in range(8)])
    axes = wide_limit_axes(means, sizes)
    k = 4
    cosines = np.linalg.svd(V[:, :k].T @ axes.vectors[:, :k], compute_uv=False)
    assert cosines.min() > 1 - 1e-6  # the same k-dimensional subspace
    np.testing.assert_allclose(
        w[2 : k + 1] / w[1], axes.spectrum[2 : k + 1] / axes.spectrum[1], rtol=1e-4
    )
    assert axes.n_axes == 4


def test_wide_limit_auto_takes_the_smaller_eigengap_ratio(rng):
    """A linear mixture: the limit (its k-th singular value drops); patches of four materials
    with gaps between them: the affinity at sigma_. The ratios are the spectra's."""
    X, y = _linear_mixture(rng)
    mix = MSSC(3, random_state=0).fit(X)
    assert mix.wide_limit_ and mix.eigengap_ratios_[1] < mix.eigengap_ratios_[0]
    assert adjusted_rand_score(y, mix.labels_) > 0.9
    assert mix.eigenvalues_[0] == 1.0 and mix.embedding_.shape == (mix.n_partitions_, 3)
    np.testing.assert_allclose(np.linalg.norm(mix.embedding_, axis=1), 1.0)
    X, y = _scene()
    patches = MSSC(4, n_bands=6, random_state=0).fit(X)
    assert not patches.wide_limit_
    at_sigma, at_limit = patches.eigengap_ratios_
    assert at_sigma < at_limit
    # the plain normalized graph's ratio (the limit's is that of the plain graph too)
    plain = normalized_spectrum(patches.affinity_, sizes=patches.partition_sizes_)
    assert at_sigma == pytest.approx(plain[4] / plain[3], rel=1e-12)
    assert at_sigma != pytest.approx(patches.spectrum_[4] / patches.spectrum_[3], rel=1e-3)
    assert adjusted_rand_score(y, patches.labels_) > 0.9


def test_wide_limit_never_and_always(rng):
    X, y = _linear_mixture(rng, n=1500)
    never = MSSC(3, random_state=0, wide_limit="never").fit(X)
    assert not never.wide_limit_ and np.isnan(never.eigengap_ratios_[1])
    labels = second_stage(
        never.affinity_,
        3,
        "normalized",
        seed=0,
        sizes=never.partition_sizes_ if never.normalization_ == "size" else None,
        regularization=never.degree_regularization,
    )[0]
    np.testing.assert_array_equal(never.partition_labels_, labels)
    always = MSSC(3, random_state=0, wide_limit="always").fit(X)
    assert always.wide_limit_
    with pytest.raises(InvalidInputError, match="embedding='normalized'"):
        MSSC(3, embedding="kpca", wide_limit="always").fit(X)
    with pytest.raises(InvalidInputError, match="direction"):
        MSSC(4, bandwidth=0.1, wide_limit="always").fit(_blobs(rng)[0])  # 4 clusters, 2 axes
    # 'auto' with fewer columns than clusters: no k-th axis, so no ratio; the limit is no candidate
    few = MSSC(4, random_state=0).fit(X[:, :3])
    assert not few.wide_limit_ and np.isnan(few.eigengap_ratios_[1])


@pytest.mark.parametrize("margin", [None, 0.0])
def test_normalization_auto_keeps_the_labelling_of_higher_silhouette(rng, monkeypatch, margin):
    """'auto' runs stage two on the 'size' and the 'cs' graph and keeps the 'cs' labelling when
    its Euclidean silhouette on (a sample of) the rows is higher by more than the margin: the
    same model as naming that graph. (With no margin the linear mixture takes 'cs'.)"""
    from sklearn.metrics import silhouette_score

    from dkernel.meanshift import estimators

    if margin is not None:
        monkeypatch.setattr(estimators, "SILHOUETTE_MARGIN", margin)
    margin = estimators.SILHOUETTE_MARGIN
    X, _ = _linear_mixture(rng, n=1500)
    chosen = []
    for data, k in ((X, 3), (X[:, :3], 4), (_blobs(rng)[0], 3), (_scene()[0], 4)):
        auto = MSSC(k, random_state=0, normalization="auto").fit(data)
        named = {n: MSSC(k, random_state=0, normalization=n).fit(data) for n in ("size", "cs")}
        # every row here (fewer than SILHOUETTE_ROWS), in the clustered space
        Z = auto._scale_bands(data)[:, : auto.affinity_columns_]
        scores = {n: silhouette_score(Z, m.labels_) for n, m in named.items()}
        assert auto.normalization_silhouettes_ == pytest.approx(scores, rel=1e-9)
        assert auto.normalization_ == ("cs" if scores["cs"] > scores["size"] + margin else "size")
        np.testing.assert_array_equal(auto.labels_, named[auto.normalization_].labels_)
        assert auto.wide_limit_ == named[auto.normalization_].wide_limit_
        for norm, model in named.items():
            assert model.normalization_ == norm and model.normalization_silhouettes_ is None
        chosen.append(auto.normalization_)
    assert chosen == (["size"] * 4 if margin else ["cs", "size", "size", "size"])
    # the sampled affinity scores its stratified sample; random features hold no rows: 'size'
    sampled = MSSC(3, random_state=0, affinity="sample", normalization="auto").fit(X)
    assert set(sampled.normalization_silhouettes_) == {"size", "cs"}
    streamed = MSSC(3, random_state=0, affinity="rff", normalization="auto").fit(X)
    assert streamed.normalization_ == "size" and streamed.normalization_silhouettes_ is None


def test_mean_silhouette_against_scikit_learn(rng):
    from sklearn.metrics import silhouette_samples

    from dkernel.metrics import UNDEFINED_SILHOUETTE, mean_silhouette

    X, y = _blobs(rng)
    w = rng.uniform(0.5, 3.0, size=y.size)
    expected = np.sum(silhouette_samples(X, y) * w) / np.sum(w)
    assert mean_silhouette(X, y, weights=w) == pytest.approx(expected, rel=1e-12)
    assert mean_silhouette(X, np.zeros(y.size, int)) == UNDEFINED_SILHOUETTE
    assert mean_silhouette(X[:3], np.arange(3)) == UNDEFINED_SILHOUETTE


def test_wide_limit_from_streamed_partition_sums(rng, array_kind):
    """Random-feature affinity: the partition means come with the feature sums, the same from
    one pass over Dask chunks as from NumPy."""
    X, _ = _linear_mixture(rng, n=1200, bands=12)
    kw = {"affinity": "rff", "n_rff": 300, "wide_limit": "always", "random_state": 0}
    ref = MSSC(3, **kw).fit(X)
    est = MSSC(3, **kw).fit(as_kind(X, array_kind))
    np.testing.assert_allclose(est.embedding_, ref.embedding_, atol=1e-10)
    np.testing.assert_array_equal(est.partition_labels_, ref.partition_labels_)


def test_neighbour_bandwidth_matches_a_double_loop(rng):
    from dkernel.kernels.widths import neighbour_bandwidth

    X = rng.normal(size=(40, 5))
    X = np.vstack([X, X[:3]])  # duplicates: the nearest *distinct* row counts
    rows = np.unique(X, axis=0)
    nearest = [
        min(np.sqrt(((a - b) ** 2).sum()) for j, b in enumerate(rows) if j != i)
        for i, a in enumerate(rows)
    ]
    assert neighbour_bandwidth(X) == pytest.approx(0.5 * np.median(nearest), rel=1e-12)
    assert neighbour_bandwidth(X, 1.0) == pytest.approx(np.median(nearest), rel=1e-12)
    assert neighbour_bandwidth(np.ones((5, 3))) == 0.0


def _digits(n=300):
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    X = X[:n]
    X = X[:, X.std(axis=0) > 0]
    return (X - X.mean(axis=0)) / X.std(axis=0), y[:n]


def test_meanshift_default_bandwidth_is_not_one_mode_per_point_in_64_dimensions():
    """Issue 57: Silverman's rule alone gave one mode per digit (64-D); the neighbour floor does
    not, and a fit that still finds many modes says so."""
    import warnings

    from dkernel.errors import DegenerateClusteringWarning

    X, y = _digits()
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        ms = MeanShift(projection=None).fit(X)
    warned = any(issubclass(w.category, DegenerateClusteringWarning) for w in seen)
    assert silverman_thesis(X) < 0.5 * ms.bandwidth_  # the neighbour floor took over
    assert ms.n_partitions_ < len(X) // 2
    assert ms.n_partitions_ <= 3 * 10 or warned
    assert adjusted_rand_score(y, ms.labels_) > 0.2


def test_meanshift_warns_on_one_mode_per_point_and_names_the_fix():
    import warnings

    from dkernel.errors import DegenerateClusteringWarning

    X, _ = _digits(200)
    with pytest.warns(DegenerateClusteringWarning, match="larger bandwidth") as seen:
        MeanShift(bandwidth=0.3).fit(X)
    assert seen[0].filename == __file__
    assert "a smaller projection (now 15)" in str(seen[0].message)
    with pytest.warns(DegenerateClusteringWarning, match=r"or projection=15 \(the leading"):
        MeanShift(bandwidth=0.3, projection=None).fit(X)
    # MSSC over-partitions on purpose (stage two merges): no such warning
    with warnings.catch_warnings():
        warnings.simplefilter("error", DegenerateClusteringWarning)
        MSSC(2, bandwidth=0.3, n_seeds=60, random_state=0).fit_partitions(X)


def test_pruned_tail_modes_are_not_a_warning_but_a_pruned_majority_is():
    """Issue 57: on most tables the density's tails hold many small modes that the pruning
    joins to larger ones (breast cancer: 137 modes for 569 points, 2 clusters); the warning
    fired on 70 of the 105 real-data fits for that. It now judges the partition: a majority of
    the points in pruned basins (a kernel far too narrow: one cluster left) still warns."""
    import warnings

    from sklearn.datasets import load_breast_cancer

    from dkernel.errors import DegenerateClusteringWarning

    X = load_breast_cancer().data
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DegenerateClusteringWarning)
        ms = MeanShift().fit(X)
    assert ms.n_partitions_ == 2 and ms._modes_before_pruning_[0] > 100
    digits, _ = _digits(200)
    with pytest.warns(DegenerateClusteringWarning, match="that pruning made the partition"):
        narrow = MeanShift(bandwidth=0.3).fit(digits)
    assert narrow.n_partitions_ == 1


def test_one_cluster_left_of_many_pruned_modes_warns_but_a_blob_does_not():
    """Issue 57: on holed MNIST mean shift found 753 modes, 742 of them single points, and
    pruned them all into one cluster (26 % of the points) without a word; a Gaussian blob's few
    tail modes (under 1 % of the points) pruned into its one cluster are its right answer."""
    import warnings

    from dkernel.errors import DegenerateClusteringWarning

    rng = np.random.default_rng(0)
    blob = rng.normal(size=(400, 12))
    scattered = rng.uniform(-8.0, 8.0, size=(100, 12))  # each far from the others: own modes
    with pytest.warns(DegenerateClusteringWarning, match="leaving a single cluster") as seen:
        ms = MeanShift().fit(np.vstack([blob, scattered]))
    assert seen[0].filename == __file__
    assert ms.n_partitions_ == 1 and ms._modes_before_pruning_[2] > 0.1
    assert "smaller bandwidth" in str(seen[0].message)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DegenerateClusteringWarning)
        alone = MeanShift().fit(rng.normal(size=(2000, 12)))
    assert alone.n_partitions_ == 1 and alone._modes_before_pruning_[0] > 1


def test_small_basins_join_the_nearest_larger_mode(rng):
    """Issue 57: an isolated point was a cluster of its own; below ``min_cluster_size`` its basin
    joins the nearest larger mode, in fit and predict alike (the pruning alone: no merging of
    basins by their passes)."""
    X, y = _blobs(rng, 100)
    X = np.vstack([X, [[9.0, 0.5], [-5.0, 4.2]]])  # two far points, each its own mode
    kept = MeanShift(0.6, min_cluster_size=0, saddle_ratio=None).fit(X)
    assert kept.n_partitions_ == 5
    pruned = MeanShift(0.6, saddle_ratio=None).fit(X)
    assert pruned.n_partitions_ == 3
    # the far points go to the modes nearest theirs: (4, 0) and (0, 4)
    np.testing.assert_array_equal(pruned.labels_[-2:], pruned.labels_[[100, 200]])
    np.testing.assert_array_equal(pruned.labels_[:-2], pruned.predict(X[:-2]))
    np.testing.assert_array_equal(pruned.predict(X[-2:]), pruned.labels_[-2:])
    # the kept modes do not move (renumbered heaviest first, merged seeds counted)
    np.testing.assert_array_equal(np.sort(pruned.modes_, axis=0), np.sort(kept.modes_[:3], axis=0))
    assert adjusted_rand_score(kept.labels_[:-2], pruned.labels_[:-2]) == 1.0
    # a tight group of 6 points of 308 is over 1 % and 5 points: a cluster of its own
    corner = [[-8.0, -8.0], [-8.1, -8.0], [-8.0, -8.1], [-8.1, -8.1], [-8.05, -8.05]]
    group = np.vstack([X, corner, [[-8.02, -8.08]]])
    assert MeanShift(0.6, saddle_ratio=None).fit(group).n_partitions_ == 4
    # on 60 points 1 % is under one point; the floor of 5 still joins a pair far away
    small = np.vstack([X[:300:5], [[9.0, 9.0], [9.1, 9.0]]])
    assert MeanShift(0.6, min_cluster_size=0, saddle_ratio=None).fit(small).n_partitions_ == 4
    assert MeanShift(0.6, saddle_ratio=None).fit(small).n_partitions_ == 3


def test_min_cluster_size_must_be_a_count_or_a_fraction(rng):
    X, _ = _blobs(rng, 20)
    for bad in (1, 1.0, -0.1, 2):
        with pytest.raises(ValueError, match="min_cluster_size"):
            MeanShift(min_cluster_size=bad).fit(X)


# many single-seed modes before pruning on 600 digits and on the noisy blobs (it says so)
@pytest.mark.filterwarnings("ignore::dkernel.errors.DegenerateClusteringWarning")
def test_projection_runs_mean_shift_on_the_leading_components(array_kind):
    """Issue 57: in 55 dimensions mean shift runs on 15 principal components by default;
    labels_, predict and Dask input agree; at most 15 columns nothing changes."""
    from dkernel.testing import as_kind

    X, y = _digits(600)
    ms = MeanShift().fit(X)
    same = MeanShift(projection=None).fit((X - ms.location_) @ ms.projection_components_)
    W = ms.projection_components_
    assert W.shape == (X.shape[1], 15)
    np.testing.assert_allclose(W.T @ W, np.eye(15), atol=1e-10)
    np.testing.assert_allclose(ms.location_, X.mean(axis=0), atol=1e-12)
    assert ms.density_.shape[1] == 15 and ms.modes_.shape[1] == 15
    np.testing.assert_array_equal(ms.predict(X), ms.labels_)
    lazy = ms.predict(as_kind(X, array_kind))
    np.testing.assert_array_equal(np.asarray(getattr(lazy, "compute", lambda: lazy)()), ms.labels_)
    assert adjusted_rand_score(y, ms.labels_) > 0.4
    # on the leading components themselves: the same partition
    np.testing.assert_array_equal(same.labels_, ms.labels_)
    # 8 columns: no projection, the labels of projection=None
    small, _ = _blobs(np.random.default_rng(0), 50)
    small = np.c_[small, np.random.default_rng(1).normal(size=(150, 6))]
    a, b = MeanShift().fit(small), MeanShift(projection=None).fit(small)
    assert a.projection_components_ is None
    np.testing.assert_array_equal(a.labels_, b.labels_)


def test_projected_rows_with_missing_entries_are_their_filled_rows_on_the_model_axes():
    """Rows with missing entries are filled with their conditional means, then projected on
    the leading axes of the missing-value model's covariance (not of the filled rows', which
    misses the conditional covariances)."""
    from dkernel.kernels.missing import MissingValueModel

    rng = np.random.default_rng(3)
    X = rng.normal(size=(400, 20)) * rng.uniform(0.5, 2.0, 20)
    X[:, 1] += X[:, 0]
    X[rng.random(X.shape) < 0.1] = np.nan
    ms = MeanShift(projection=4)
    model = MissingValueModel.fit(X)
    Z = ms._fit_projection(model.fill(X)[0], model, model.mean)
    W = ms.projection_components_
    values, vectors = np.linalg.eigh(model.covariance)
    leading = vectors[:, np.argsort(values)[::-1][:4]]
    np.testing.assert_allclose(np.abs(W.T @ leading), np.eye(4), atol=1e-8)
    np.testing.assert_allclose(Z, (model.fill(X)[0] - model.mean) @ W)


def test_mssc_keeps_silverman_rule_for_its_first_stage():
    X, _ = _digits(200)
    mssc = MSSC(2, n_seeds=60, random_state=0).fit_partitions(X)
    assert mssc.bandwidth_ == pytest.approx(0.4 * silverman_thesis(X))


def test_a_repeated_row_leaves_a_pre_partition_centre_empty_without_a_warning():
    # 150 rows, fewer than n_seeds: every row starts a centre, and the repeated one stays empty
    X = np.random.default_rng(0).uniform(size=(150, 3))
    X[1] = X[0]
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        est = MSSC(n_clusters=2, n_init=2, random_state=0).fit(X)
    assert est.seeds_.shape[0] == 149
