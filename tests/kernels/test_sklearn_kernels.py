"""scikit-learn's kernel names in the registry (issue 53, item 3): each against its formula
written as a loop, with scikit-learn's parameters and defaults, in the blocked Dask writer, and
accepted (or refused with the property the method needs) by every estimator with a ``kernel``.
"""

from __future__ import annotations

import inspect
import pickle
import warnings

import dask.array as da
import numpy as np
import pytest
from sklearn.base import BaseEstimator
from sklearn.metrics.pairwise import PAIRWISE_KERNEL_FUNCTIONS, pairwise_kernels

import dkernel
from dkernel.errors import InvalidInputError, NumericalWarning
from dkernel.graphs.blocked import blocked_kernel
from dkernel.kernels.pairwise import SKLEARN_KERNELS
from dkernel.kernels.registry import available_kernels, make_kernel
from dkernel.ranking.jrc import DegenerateClusterWarning

SKLEARN_NAMES = sorted(PAIRWISE_KERNEL_FUNCTIONS)


def _loop(name, X, Y, gamma=None, degree=3, coef0=1.0):
    """The kernel's formula, one pair at a time (scikit-learn's documented defaults)."""
    p = X.shape[1]
    g = (1.0 if name == "chi2" else 1.0 / p) if gamma is None else gamma
    out = np.empty((len(X), len(Y)))
    for i, x in enumerate(X):
        for j, y in enumerate(Y):
            dot = float(np.sum(x * y))
            if name == "linear":
                v = dot
            elif name in ("poly", "polynomial"):
                v = (g * dot + coef0) ** degree
            elif name == "sigmoid":
                v = np.tanh(g * dot + coef0)
            elif name == "rbf":
                v = np.exp(-g * np.sum((x - y) ** 2))
            elif name == "laplacian":
                v = np.exp(-g * np.sum(np.abs(x - y)))
            elif name == "cosine":
                v = dot / (np.linalg.norm(x) * np.linalg.norm(y))
            else:
                s = x + y
                terms = np.where(s > 0, (x - y) ** 2 / np.where(s > 0, s, 1), 0.0)
                v = -np.sum(terms) if name == "additive_chi2" else np.exp(-g * np.sum(terms))
            out[i, j] = v
    return out


@pytest.fixture
def data():
    rng = np.random.default_rng(3)
    # non-negative, as chi2 and additive_chi2 need
    return rng.random((25, 4)), rng.random((9, 4))


def test_every_scikit_learn_name_is_registered():
    assert set(SKLEARN_NAMES) <= set(available_kernels())
    assert set(SKLEARN_KERNELS) | {"rbf", "cosine"} == set(SKLEARN_NAMES)


@pytest.mark.parametrize("name", SKLEARN_NAMES)
def test_defaults_are_scikit_learns(name, data):
    X, Y = data
    # rbf keeps dkernel's rule-of-thumb default; scikit-learn's gamma is a parameter
    params = {"gamma": 0.25} if name == "rbf" else {}
    K = make_kernel(name, X, **params)(X, Y)
    np.testing.assert_allclose(K, _loop(name, X, Y, gamma=params.get("gamma")), rtol=1e-12)
    np.testing.assert_allclose(K, pairwise_kernels(X, Y, metric=name, **params), rtol=1e-12)


@pytest.mark.parametrize(
    ("name", "params"),
    [
        ("poly", {"gamma": 0.7, "degree": 2, "coef0": -0.5}),
        ("polynomial", {"degree": 4}),
        ("sigmoid", {"gamma": 2.0, "coef0": 0.0}),
        ("laplacian", {"gamma": 3.0}),
        ("chi2", {"gamma": 0.4}),
        ("rbf", {"gamma": 1.5}),
    ],
)
def test_parameters_mean_what_they_mean_in_scikit_learn(name, params, data):
    X, Y = data
    K = make_kernel(name, X, **params)(X, Y)
    np.testing.assert_allclose(K, _loop(name, X, Y, **params), rtol=1e-12)
    np.testing.assert_allclose(K, pairwise_kernels(X, Y, metric=name, **params), rtol=1e-12)


def test_rbf_sigma_is_gamma_respelled(data):
    X, Y = data
    gamma = 0.8
    by_gamma = make_kernel("rbf", gamma=gamma)
    by_sigma = make_kernel("rbf", sigma=np.sqrt(0.5 / gamma))
    assert by_gamma.params["sigma"] == pytest.approx(np.sqrt(0.5 / gamma))
    np.testing.assert_allclose(by_gamma(X, Y), by_sigma(X, Y), rtol=1e-14)
    with pytest.raises(InvalidInputError, match="two spellings of its width"):
        make_kernel("rbf", sigma=1.0, gamma=0.5)
    with pytest.raises(InvalidInputError, match="'gamma' parameter of the rbf kernel"):
        make_kernel("rbf", gamma=0.0)


def test_resolved_defaults_are_recorded(data):
    X, _ = data
    assert make_kernel("poly", X).params == {"gamma": 0.25, "degree": 3, "coef0": 1}
    assert make_kernel("laplacian", X).params == {"gamma": 0.25}
    assert make_kernel("chi2", X).params == {"gamma": 1.0}
    # without data the gamma is scikit-learn's, chosen per block from the block's features
    assert make_kernel("sigmoid").params == {"gamma": None, "coef0": 1}


@pytest.mark.parametrize(
    ("name", "params", "match"),
    [
        ("poly", {"degree": 0}, "'degree' parameter of the poly kernel"),
        ("laplacian", {"gamma": -1.0}, "'gamma' parameter of the laplacian kernel"),
        ("linear", {"gamma": 1.0}, r"unknown parameters \['gamma'\] for the 'linear' kernel"),
        ("sigmoid", {"sigma": 1.0}, "Valid parameters: coef0, gamma"),
    ],
)
def test_bad_parameters_are_named(name, params, match):
    with pytest.raises(InvalidInputError, match=match):
        make_kernel(name, **params)


@pytest.mark.parametrize("name", ["chi2", "additive_chi2"])
def test_chi2_kernels_name_their_need_for_non_negative_data(name, data):
    X, Y = data
    with pytest.raises(InvalidInputError, match="defined for non-negative data"):
        make_kernel(name, X - 0.5)
    kernel = make_kernel(name)
    with pytest.raises(InvalidInputError, match="defined for non-negative data"):
        kernel(X, Y - 0.5)


@pytest.mark.parametrize("name", ["laplacian", "chi2"])
def test_log_forms_are_the_log_of_the_values(name, data):
    X, Y = data
    kernel = make_kernel(name, X)
    np.testing.assert_allclose(kernel.log(X, Y), np.log(_loop(name, X, Y)), rtol=1e-12)
    assert make_kernel("linear").log_block is None


def test_values_sign_flags(data):
    X, _ = data
    positive = {name for name in SKLEARN_KERNELS if make_kernel(name, X).nonnegative}
    assert positive == {"laplacian", "chi2"}


@pytest.mark.parametrize("name", SKLEARN_KERNELS)
def test_blocked_dask_writer_and_pickling(name, data):
    X, _ = data
    kernel = pickle.loads(pickle.dumps(make_kernel(name, X)))
    K = blocked_kernel(kernel.block, da.from_array(X, chunks=7), block_rows=7)
    np.testing.assert_allclose(K.compute(), _loop(name, X, X), rtol=1e-12)


# -- every estimator that takes a kernel ---------------------------------------------------------

#: The estimators with a ``kernel`` parameter, and what they need of a kernel they refuse.
KERNEL_ESTIMATORS = sorted(
    name
    for name in dkernel.__all__
    if isinstance(getattr(dkernel, name), type)
    and issubclass(getattr(dkernel, name), BaseEstimator)
    and "kernel" in inspect.signature(getattr(dkernel, name)).parameters
)

#: (estimator, kernel) -> the start of the reason it is refused on non-negative data.
REFUSED = {
    **{
        ("KernelDecompositionClustering", name): "KernelDecompositionClustering needs a density"
        for name in (*SKLEARN_KERNELS, "callable")
    },
    # additive_chi2 is <= 0: no random walk, no positive degree
    ("KernelPersonalizedPageRank", "additive_chi2"): "The additive_chi2 kernel takes negative",
    ("JointRankingClustering", "additive_chi2"): "The additive_chi2 kernel takes negative",
    ("SpectralClustering", "additive_chi2"): "The normalized embedding needs positive degrees",
    # its kernel PCA runs on reservoir states, tanh values in (-1, 1)
    **{
        ("EchoStateNetwork", name): "The kernel PCA of EchoStateNetwork runs on the reservoir"
        for name in ("chi2", "additive_chi2")
    },
}


def _linear(A, B):
    return A @ B.T


def _estimator(name, kernel):
    cls = getattr(dkernel, name)
    params = {"kernel": kernel}
    if name in ("KernelKMeans", "SpectralClustering", "KernelDecompositionClustering"):
        params["n_clusters"] = 2
    if name in ("SpectralClustering", "NystromEmbedding"):
        params["n_landmarks"] = 20
    if "random_state" in inspect.signature(cls).parameters:
        params["random_state"] = 0
    return cls(**params)


def test_the_estimators_with_a_kernel():
    # a new estimator with a kernel parameter joins the test below without an edit here
    assert {
        "JointRankingClustering",
        "KECA",
        "KernelCCA",
        "KernelDecompositionClustering",
        "KernelKMeans",
        "KernelPCAEmbedding",
        "KernelPersonalizedPageRank",
        "NystromEmbedding",
        "SpectralClustering",
    } <= set(KERNEL_ESTIMATORS)


@pytest.mark.parametrize("kernel", [*SKLEARN_NAMES, "callable"])
@pytest.mark.parametrize("name", KERNEL_ESTIMATORS)
def test_every_estimator_takes_every_scikit_learn_kernel(name, kernel, data):
    X = np.random.default_rng(0).random((40, 3))
    Y = np.random.default_rng(1).random((40, 2))
    est = _estimator(name, _linear if kernel == "callable" else kernel)
    # the two with a target: KernelCCA's second view, the echo state network's outputs
    fit_args = (X, Y) if name in ("KernelCCA", "EchoStateNetwork") else (X,)
    reason = REFUSED.get((name, kernel))
    with warnings.catch_warnings():
        # kernels that are not positive semi-definite have their negative eigenvalues clipped
        warnings.simplefilter("ignore", NumericalWarning)
        # structureless data: a one-point cluster is rightly reported
        warnings.simplefilter("ignore", DegenerateClusterWarning)
        if reason is not None:
            with pytest.raises(InvalidInputError, match=reason):
                est.fit(*fit_args)
            return
        est.fit(*fit_args)
        # Dask input goes through the same kernel, block by block
        Xd = da.from_array(X, chunks=15)
        if name not in ("KernelCCA", "KernelDecompositionClustering", "EchoStateNetwork"):
            _estimator(name, est.kernel).fit(Xd)
