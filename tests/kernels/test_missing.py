"""Expected squared distances under missing entries, against a slow obvious reference."""

from __future__ import annotations

import numpy as np
import pytest

from dkernel.errors import InvalidInputError
from dkernel.kernels.missing import (
    MissingValueModel,
    column_moments,
    expected_rbf,
    expected_sq_distances,
    partial_sq_distances,
)


def _slow(X, Y, mean, var, same):
    """Entry by entry: both observed (x − y)², one missing (μ − other)² + σ², both 2σ²."""
    out = np.zeros((len(X), len(Y)))
    for i, x in enumerate(X):
        for k, y in enumerate(Y):
            if same and i == k:
                continue
            total = 0.0
            for j in range(len(mean)):
                a, b = np.isnan(x[j]), np.isnan(y[j])
                if not a and not b:
                    total += (x[j] - y[j]) ** 2
                elif a and b:
                    total += 2 * var[j]
                else:
                    total += (mean[j] - (x[j] if b else y[j])) ** 2 + var[j]
            out[i, k] = total
    return out


def _holes(rng, n, p, rate):
    X = rng.normal(size=(n, p)) * rng.uniform(0.5, 3, p) + rng.normal(size=p)
    X[rng.random((n, p)) < rate] = np.nan
    return X


def test_column_moments_are_those_of_the_observed_values(rng):
    X = _holes(rng, 30, 4, 0.3)
    mean, var = column_moments(X)
    np.testing.assert_allclose(mean, np.nanmean(X, axis=0))
    np.testing.assert_allclose(var, np.nanvar(X, axis=0))


@pytest.mark.parametrize("rate", [0.0, 0.25, 0.6])
def test_expected_sq_distances_match_the_entrywise_expectation(rng, rate):
    """With independent columns (the model of rows wider than the full model's limit)."""
    X, Y = _holes(rng, 25, 6, rate), _holes(rng, 9, 6, rate)
    mean, var = column_moments(X)
    model = MissingValueModel(mean, var)
    np.testing.assert_allclose(
        expected_sq_distances(X, model=model), _slow(X, X, mean, var, True), rtol=1e-10, atol=1e-10
    )
    np.testing.assert_allclose(
        expected_sq_distances(X, Y, model=model),
        _slow(X, Y, mean, var, False),
        rtol=1e-10,
        atol=1e-10,
    )


def test_expected_sq_distances_is_a_monte_carlo_average(rng):
    """The expectation over draws of each row's missing entries from the model's Gaussian
    given its observed ones (independently per row), drawn the slow way: the conditional
    distribution from the covariance's blocks (the code uses the precision's)."""
    train = rng.multivariate_normal(
        [1.0, -2.0, 0.5], [[2, 1.2, 0.3], [1.2, 1.5, 0], [0.3, 0, 1]], 400
    )
    train[rng.random(train.shape) < 0.2] = np.nan
    model = MissingValueModel.fit(train)
    X = rng.normal(size=(4, 3))
    X[0, 0] = X[1, 0] = X[2, 1] = X[2, 2] = np.nan
    S = model.covariance + 1e-3 * np.mean(np.diag(model.covariance)) * np.eye(3)  # the ridge
    draws = 100_000
    filled = np.repeat(X[None], draws, axis=0)
    for i, x in enumerate(X):
        M, O = np.flatnonzero(np.isnan(x)), np.flatnonzero(~np.isnan(x))
        if not M.size:
            continue
        gain = S[np.ix_(M, O)] @ np.linalg.inv(S[np.ix_(O, O)])
        mu = model.mean[M] + gain @ (x[O] - model.mean[O])
        C = S[np.ix_(M, M)] - gain @ S[np.ix_(O, M)]
        filled[:, i, M] = rng.multivariate_normal(mu, C, draws)
    total = ((filled[:, :, None, :] - filled[:, None, :, :]) ** 2).sum(-1).mean(0)
    np.fill_diagonal(total, 0)
    np.testing.assert_allclose(expected_sq_distances(X, model=model), total, rtol=0.02, atol=0.02)


def test_expected_rbf_and_errors(rng):
    X = _holes(rng, 10, 3, 0.3)
    np.testing.assert_allclose(expected_rbf(X, sigma=2.0), np.exp(-expected_sq_distances(X) / 8))
    with pytest.raises(InvalidInputError, match="sigma"):
        expected_rbf(X, sigma=0.0)
    with pytest.raises(InvalidInputError, match="columns"):
        expected_sq_distances(X, X[:, :2])


def test_partial_sq_distances_match_a_double_loop(rng):
    X, Y = _holes(rng, 20, 5, 0.35), _holes(rng, 7, 5, 0.35)
    X[0] = np.nan
    X[0, 0] = 1.0  # shares column 0 only, or nothing, with the others
    Y[1, 0] = np.nan

    def slow(A, B):
        out = np.empty((len(A), len(B)))
        for i, a in enumerate(A):
            for k, b in enumerate(B):
                both = ~np.isnan(a) & ~np.isnan(b)
                out[i, k] = (
                    5 / both.sum() * ((a[both] - b[both]) ** 2).sum() if both.any() else np.inf
                )
        return out

    np.testing.assert_allclose(partial_sq_distances(X, Y), slow(X, Y), rtol=1e-10, atol=1e-10)
    ref = slow(X, X)
    np.fill_diagonal(ref, 0.0)
    np.testing.assert_allclose(partial_sq_distances(X), ref, rtol=1e-10, atol=1e-10)
    full = rng.normal(size=(6, 5))
    np.testing.assert_allclose(
        partial_sq_distances(full), ((full[:, None] - full[None]) ** 2).sum(-1), atol=1e-10
    )
    with pytest.raises(InvalidInputError, match="same number of columns"):
        partial_sq_distances(X, Y[:, :3])


def _incomplete(n: int, p: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p)) * rng.uniform(0.5, 2.0, p)
    holes = rng.random((n, p)) < 0.3
    holes[holes.all(axis=1), 0] = False
    X[holes] = np.nan
    return X


def test_registry_rbf_of_rows_with_nan_is_the_expected_rbf():
    from dkernel.kernels.registry import make_kernel

    X, Q = _incomplete(80, 4, 0), _incomplete(10, 4, 1)
    k = make_kernel("rbf", X, sigma=1.3)
    assert k.params["missing_values"] == "expected"
    model = MissingValueModel.fit(X)  # deterministic: the kernel's own
    np.testing.assert_allclose(k(Q, X), expected_rbf(Q, X, sigma=1.3, model=model))
    np.testing.assert_allclose(np.exp(k.log(Q, X)), k(Q, X), rtol=1e-12)
    # the same formula on the diagonal (two draws): a_x², every block of a blocked kernel agrees
    D = expected_sq_distances(X, X[:], model=model)
    np.testing.assert_allclose(k(X, X[:].copy()), np.exp(-D / (2 * 1.3**2)), rtol=1e-12)
    # the rule-of-thumb width: a fraction of the median expected distance
    auto = make_kernel("rbf", X, sigma_fraction=0.5)
    DX = expected_sq_distances(X)
    med = np.sqrt(np.median(DX[np.triu_indices(80, 1)]))
    assert auto.params["sigma"] == pytest.approx(0.5 * med)


@pytest.mark.parametrize("kind", ["knn", "knn_mean", "local_scaling"])
def test_registry_radius_kernels_of_rows_with_nan_match_brute_force(kind):
    from dkernel.kernels.registry import make_kernel, neighbor_parameter

    X, Q = _incomplete(60, 3, 2), _incomplete(7, 3, 3)
    k = make_kernel(kind, X, n_reference=None, **{neighbor_parameter(kind): 5})
    model = MissingValueModel.fit(X)  # its fill is tested in test_missing_model.py

    def expected(A, B):  # E‖a − b‖² for distinct draws, the obvious way
        (fa, ra), (fb, rb) = model.fill(A), model.fill(B)
        D = ((fa[:, None, :] - fb[None, :, :]) ** 2).sum(-1)
        if kind != "local_scaling":  # the k-NN graphs rank by the conditional means alone
            return D
        return D + ra[:, None] + rb[None, :]

    def radius(A):  # 5th nearest reference row, copies (the row itself too) skipped
        D = expected(A, X)
        same = [
            [np.array_equal(a, b, equal_nan=True) for b in X] for a in A
        ]  # the same values observed, the same columns missing
        D = np.where(np.array(same), np.inf, D)
        return np.sqrt(np.sort(D, axis=1)[:, 4])

    D, ra, rb = expected(Q, X), radius(Q), radius(X)
    if kind == "local_scaling":
        want = np.exp(-D / np.outer(ra, rb))
    else:
        wx, wy = D <= ra[:, None] ** 2 * (1 + 1e-9), D <= rb[None, :] ** 2 * (1 + 1e-9)
        want = (wx | wy).astype(float) if kind == "knn" else 0.5 * wx + 0.5 * wy
    np.testing.assert_allclose(k(Q, X), want, rtol=1e-9, atol=1e-12)
    G = k(X, X)
    np.testing.assert_array_equal(np.diag(G), 1.0)  # a row with itself: coinciding points


@pytest.mark.parametrize("kind", ["knn", "local_scaling"])
def test_a_large_reference_of_rows_with_nan_takes_the_index_with_the_same_kernel(kind, monkeypatch):
    from dkernel.kernels import adaptive
    from dkernel.kernels.registry import make_kernel, neighbor_parameter

    X, Q = _incomplete(150, 3, 2), _incomplete(9, 3, 3)
    X[:6] = X[6]  # copies
    params = {"n_reference": None, neighbor_parameter(kind): 5}
    brute = make_kernel(kind, X, **params)
    monkeypatch.setattr(adaptive, "INDEX_MIN_REFERENCE", 100)
    indexed = make_kernel(kind, X, **params)
    assert indexed.block._index is not None and brute.block._index is None
    np.testing.assert_allclose(indexed.block.radius(X), brute.block.radius(X), rtol=1e-12)
    np.testing.assert_allclose(indexed(Q, X), brute(Q, X), rtol=1e-9, atol=1e-12)


def test_dask_input_gets_the_model_of_the_same_rows_as_numpy(monkeypatch):
    """Above ``MISSING_MODEL_SAMPLE`` rows the model is fitted on evenly spaced rows: of Dask
    input only those are read, and the model (so every kernel of it) is NumPy's."""
    import dask.array as da

    from dkernel.kernels import missing_model as mm
    from dkernel.kernels.registry import make_kernel

    monkeypatch.setattr(mm, "MISSING_MODEL_SAMPLE", 300)
    X = _incomplete(700, 3, 5)
    X[:, 2] += np.nan_to_num(X[:, 0])  # correlated, and no row left empty
    lazy = da.from_array(X, chunks=(500, 3))
    a, b = make_kernel("rbf", X), make_kernel("rbf", lazy)  # NaN found in the width's sample
    assert not a.block.model.independent
    np.testing.assert_array_equal(a.block.model.covariance, b.block.model.covariance)
    Q = _incomplete(5, 3, 6)
    np.testing.assert_array_equal(a(Q, X[:50]), b(Q, X[:50]))
    # a given width: NaN is looked for in the same sample, and the kernel is NumPy's
    c, d = make_kernel("rbf", X, sigma=1.0), make_kernel("rbf", lazy, sigma=1.0)
    assert d.params["missing_values"] == "expected"
    np.testing.assert_array_equal(c(Q, X[:50]), d(Q, X[:50]))


@pytest.mark.parametrize("kind", ["rbf", "knn"])
def test_dask_input_with_nan_outside_the_width_sample_gets_the_missing_value_kernel(kind):
    """NaN in rows that the width rule's (or the reference's) sample does not hold: the kernel
    of Dask input is still the expected-distance one, as for the same rows in memory (a
    complete-row kernel would refuse the NaN in the middle of the computation)."""
    import dask.array as da

    from dkernel.kernels.registry import _sample_rows, make_kernel
    from dkernel.kernels.widths import RULE_OF_THUMB_SAMPLE

    rng = np.random.default_rng(7)
    X = rng.normal(size=(2600, 3))
    marked = X.copy()
    marked[:, 0] = np.arange(len(X))  # which rows the sample takes
    size = RULE_OF_THUMB_SAMPLE if kind == "rbf" else 500
    taken = set(_sample_rows(marked, size, 0)[:, 0].astype(int))
    outside = [i for i in range(len(X)) if i not in taken][:3]
    X[outside, 1] = np.nan
    params = {"n_reference": 500} if kind == "knn" else {}
    a = make_kernel(kind, X, **params)
    b = make_kernel(kind, da.from_array(X, chunks=(1000, 3)), **params)
    if kind == "rbf":
        assert a.params["missing_values"] == b.params["missing_values"] == "expected"
        assert b.params["sigma"] == a.params["sigma"]
    Q = X[outside + [0, 1]]
    np.testing.assert_allclose(b(Q, X[:300]), a(Q, X[:300]), rtol=1e-12)
    assert np.isfinite(b(Q, Q)).all()
