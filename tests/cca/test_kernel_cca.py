"""``KernelCCA`` and its numerics: against scikit-learn's linear CCA, a naive dense solve of
the regularised dual eigenproblem, a non-linear shared signal, NumPy vs Dask, errors."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import linalg
from sklearn.cross_decomposition import CCA

from dkernel import KernelCCA
from dkernel.cca.dual import moments, regularized_cca
from dkernel.errors import InvalidInputError, ResourceLimitError
from dkernel.kernels.rbf import rbf_block
from dkernel.schema.estimator import EstimatorSchema
from dkernel.testing import as_kind


def linear(A, B):
    return A @ B.T


def _np(a):
    return np.asarray(a.compute() if hasattr(a, "compute") else a)


def _corr(a, b):
    return float(np.corrcoef(a, b)[0, 1])


@pytest.fixture(scope="module")
def linear_views():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 4))
    Y = X[:, :3] @ rng.normal(size=(3, 3)) + 0.8 * rng.normal(size=(300, 3))
    return X, Y


@pytest.fixture(scope="module")
def shared_signal():
    """Y depends on X only through t², which no linear map of X correlates with."""
    rng = np.random.default_rng(1)
    t = rng.uniform(-1, 1, 800)
    X = np.c_[t, rng.normal(size=800)]
    Y = np.c_[t**2 + 0.05 * rng.normal(size=800), rng.normal(size=800)]
    return X, Y


@pytest.mark.parametrize("regularization", [0.0, 1e-10])
@pytest.mark.parametrize("kernel", ["linear", linear])
@pytest.mark.parametrize("solver", ["exact", "nystrom"])
def test_linear_kernel_is_scikit_learn_cca(linear_views, solver, kernel, regularization):
    """scikit-learn's kernel name and the callable alike, in the limit κ → 0 (0 itself when
    each view has more rows than features, so that its covariance is invertible)."""
    X, Y = linear_views
    ours = KernelCCA(
        3, kernel=kernel, regularization=regularization, solver=solver, n_landmarks=50
    ).fit(X, Y)
    xs, ys = CCA(3, max_iter=5000, tol=1e-12).fit(X, Y).transform(X, Y)
    expected = [_corr(xs[:, j], ys[:, j]) for j in range(3)]
    np.testing.assert_allclose(ours.canonical_correlations_, expected, atol=1e-6)
    zx, zy = ours.transform(X, Y)
    for j in range(3):  # the same variates, up to sign and scale
        assert abs(_corr(zx[:, j], xs[:, j])) == pytest.approx(1.0, abs=1e-6)
        assert abs(_corr(zy[:, j], ys[:, j])) == pytest.approx(1.0, abs=1e-6)


def test_one_row_pair_transforms(linear_views):
    X, Y = linear_views
    est = KernelCCA(2, kernel="linear").fit(X, Y)
    zx, zy = est.transform(X[:1], Y[:1])
    full_x, full_y = est.transform(X, Y)
    np.testing.assert_allclose(zx, full_x[:1], rtol=1e-10)
    np.testing.assert_allclose(zy, full_y[:1], rtol=1e-10)


def test_regularization_is_ridge_cca_that_tends_to_cca(linear_views):
    """κ > 0 is ridge CCA (scikit-learn's CCA has no regularisation): its objective stays below
    the unregularised correlations and both tend to them as κ → 0."""
    X, Y = linear_views
    exact = KernelCCA(3, kernel="linear", regularization=0.0).fit(X, Y).canonical_correlations_
    fits = [KernelCCA(3, kernel="linear", regularization=k).fit(X, Y) for k in (1e-1, 1e-2, 1e-4)]
    objective_gaps = [exact - est.regularized_correlations_ for est in fits]
    assert all(np.all(g > 0) for g in objective_gaps)
    assert objective_gaps[0].min() > objective_gaps[1].max() > objective_gaps[2].max()
    correlation_gaps = [np.abs(exact - est.canonical_correlations_).max() for est in fits]
    assert correlation_gaps[0] > correlation_gaps[1] > correlation_gaps[2]
    assert correlation_gaps[2] < 1e-8


def _naive_dual(Kx, Ky, kappa):
    """The dual generalized eigenproblem, dense: [[0, KxKy], [KyKx, 0]] v = ρ B v with
    B = diag(Kx² + nκKx, Ky² + nκKy) (a 1e-9 ridge makes B definite)."""
    n = Kx.shape[0]
    Z = np.zeros((n, n))
    A = np.block([[Z, Kx @ Ky], [Ky @ Kx, Z]])
    B = np.block([[Kx @ Kx + n * kappa * Kx, Z], [Z, Ky @ Ky + n * kappa * Ky]])
    values, vectors = linalg.eigh(A, B + 1e-9 * np.eye(2 * n))
    order = np.argsort(-values)
    return values[order], vectors[:, order]


def test_exact_solver_solves_the_dual_problem():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(50, 2))
    Y = np.c_[np.sin(2 * X[:, 0]), X[:, 1] ** 2] + 0.3 * rng.normal(size=(50, 2))
    kappa = 0.05
    est = KernelCCA(
        2,
        kernel_params={"sigma": 1.0},
        kernel_params_y={"sigma": 1.0},
        kernel_y="rbf",
        regularization=kappa,
        solver="exact",
    ).fit(X, Y)
    H = np.eye(50) - 1 / 50
    Kx, Ky = H @ rbf_block(X, X, 1.0) @ H, H @ rbf_block(Y, Y, 1.0) @ H
    rho, V = _naive_dual(Kx, Ky, kappa)
    np.testing.assert_allclose(est.regularized_correlations_, rho[:2], rtol=1e-5)
    zx, zy = est.transform(X, Y)
    for j in range(2):  # the naive α, β give the same variates up to a common sign and scale
        sign = np.sign(_corr(zx[:, j], Kx @ V[:50, j]))
        assert sign * _corr(zx[:, j], Kx @ V[:50, j]) == pytest.approx(1.0, abs=1e-5)
        assert sign * _corr(zy[:, j], Ky @ V[50:, j]) == pytest.approx(1.0, abs=1e-5)
    # f(x) = k_c(x)ᵀ α with the dual coefficients
    np.testing.assert_allclose(zx, Kx @ est.x_dual_coef_, atol=1e-8)


@pytest.mark.parametrize("solver", ["exact", "nystrom"])
def test_training_rows_out_of_sample_are_the_fitted_variates(shared_signal, solver):
    X, Y = shared_signal[0][:300], shared_signal[1][:300]
    est = KernelCCA(2, solver=solver, n_landmarks=100, random_state=0).fit(X, Y)
    zx, zy = est.transform(X, Y)
    # unit variance, and the correlations fit reported
    np.testing.assert_allclose(zx.std(axis=0), 1.0, rtol=1e-8)
    np.testing.assert_allclose(zy.std(axis=0), 1.0, rtol=1e-8)
    np.testing.assert_allclose(zx.mean(axis=0), 0.0, atol=1e-8)
    corr = [_corr(zx[:, j], zy[:, j]) for j in range(2)]
    np.testing.assert_allclose(corr, est.canonical_correlations_, atol=1e-8)
    np.testing.assert_array_equal(est.transform(X), zx)


def test_nonlinear_shared_signal(shared_signal):
    X, Y = shared_signal
    train, test = slice(0, 400), slice(400, None)
    est = KernelCCA(1, random_state=0).fit(X[train], Y[train])
    zx, zy = est.transform(X[test], Y[test])
    assert _corr(zx[:, 0], zy[:, 0]) >= 0.9
    assert abs(_corr(zx[:, 0], X[test, 0] ** 2)) >= 0.9
    lx, ly = CCA(1).fit(X[train], Y[train]).transform(X[test], Y[test])
    assert abs(_corr(lx[:, 0], ly[:, 0])) < 0.3


def test_every_point_a_landmark_is_exact(shared_signal):
    X, Y = shared_signal[0][:200], shared_signal[1][:200]
    exact = KernelCCA(2, solver="exact", random_state=0).fit(X, Y)
    nystrom = KernelCCA(2, solver="nystrom", n_landmarks=1000, random_state=0).fit(X, Y)
    np.testing.assert_allclose(
        nystrom.canonical_correlations_, exact.canonical_correlations_, rtol=1e-6
    )
    np.testing.assert_allclose(nystrom.transform(X), exact.transform(X), atol=1e-5)


@pytest.mark.parametrize("solver", ["exact", "nystrom"])
def test_dask_input_equals_numpy_input(shared_signal, solver):
    X, Y = shared_signal[0][:300], shared_signal[1][:300]
    kw = dict(solver=solver, n_landmarks=60, random_state=0)
    ref = KernelCCA(2, **kw).fit(X, Y)
    est = KernelCCA(2, **kw).fit(as_kind(X, "dask", 64), as_kind(Y, "dask", 100))
    np.testing.assert_allclose(est.canonical_correlations_, ref.canonical_correlations_, rtol=1e-10)
    zx, zy = est.transform(as_kind(X, "dask", 90), as_kind(Y, "dask", 90))
    assert hasattr(zx, "dask") and hasattr(zy, "dask")
    rx, ry = ref.transform(X, Y)
    np.testing.assert_allclose(_np(zx), rx, atol=1e-9)
    np.testing.assert_allclose(_np(zy), ry, atol=1e-9)


def test_binary_second_view_has_one_pair():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(120, 3))
    y = (X[:, 0] > 0).astype(int)
    est = KernelCCA(2, random_state=0).fit(X, y)
    assert est.canonical_correlations_[0] > 0.5 and est.canonical_correlations_[1] == 0.0
    assert np.all(est.transform(X)[:, 1] == 0.0)


def test_auto_solver():
    rng = np.random.default_rng(4)
    X, Y = rng.normal(size=(300, 2)), rng.normal(size=(300, 2))
    assert KernelCCA(1, n_landmarks=500).fit(X, Y).solver_ == "exact"
    assert KernelCCA(1, n_landmarks=50).fit(X, Y).solver_ == "nystrom"
    with pytest.raises(ResourceLimitError, match="solver='nystrom'"):
        KernelCCA(1, solver="exact", max_memory="10kB").fit(X, Y)


def test_whitened_svd_against_a_generalized_eigensolver():
    rng = np.random.default_rng(5)
    Px, Py = rng.normal(size=(200, 4)), rng.normal(size=(200, 3))
    Py[:, 0] += Px[:, 0]
    Cxx, Cyy, Cxy, _, _ = moments(Px, Py).covariances()
    sol = regularized_cca(Cxx, Cyy, Cxy, 2, 0.1)
    Z = np.zeros
    A = np.block([[Z((4, 4)), Cxy], [Cxy.T, Z((3, 3))]])
    B = np.block([[Cxx + 0.1 * np.eye(4), Z((4, 3))], [Z((3, 4)), Cyy + 0.1 * np.eye(3)]])
    values = np.sort(linalg.eigh(A, B, eigvals_only=True))[::-1]
    np.testing.assert_allclose(sol.regularized_correlations, values[:2], rtol=1e-10)


def test_schema_derives_from_the_estimator():
    params = {p.name: p for p in EstimatorSchema(KernelCCA).params}
    assert params["regularization"].kind == "float" and params["regularization"].low == 0
    assert params["kernel_y"].nullable


def test_bad_input(shared_signal):
    X, Y = shared_signal
    with pytest.raises(InvalidInputError, match="requires y to be passed"):
        KernelCCA().fit(X)
    with pytest.raises(InvalidInputError, match="same rows"):
        KernelCCA().fit(X, Y[:-1])
    est = KernelCCA(1, random_state=0).fit(X[:100], Y[:100])
    with pytest.raises(InvalidInputError, match="Y has 3 features"):
        est.transform(X[:5], np.zeros((5, 3)))
    with pytest.raises(InvalidInputError, match="'regularization' parameter of KernelCCA"):
        KernelCCA(regularization=-1.0).fit(X, Y)
