"""One kernel path (issue 33, item 3): the registry resolves every kernel of the package.

The ranking estimators resolve through it, the kernel decomposition's log-domain kernels are
its entries' log forms, and the rule-of-thumb width is one function with one default.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.distance import pdist
from sklearn.preprocessing import MinMaxScaler

from dkernel.decomposition.kernels import (
    KERNELS as DECOMPOSITION_KERNELS,
)
from dkernel.decomposition.kernels import (
    density_log_kernel,
    fit_local_scales,
    gaussian_log_normalizer,
    knn_log_kernel,
)
from dkernel.errors import InvalidInputError
from dkernel.kernels.pairwise import SKLEARN_KERNELS
from dkernel.kernels.registry import Kernel, available_kernels, make_kernel, neighbor_parameter
from dkernel.kernels.widths import (
    DEFAULT_SIGMA_FRACTION,
    RULE_OF_THUMB_SAMPLE,
    median_distance,
    sigma_rule_of_thumb,
)
from dkernel.ranking.kernelmap import (
    ADAPTIVE,
    KERNEL_NAMES,
    BlockKernel,
    FeatureMapKernel,
    RegistryBlock,
    resolve_kernel,
)


@pytest.fixture
def rng():
    return np.random.default_rng(7)


# -- the rule of thumb -------------------------------------------------------------------------


def test_rule_of_thumb_against_the_obvious_median(rng):
    X = rng.normal(size=(60, 3))
    d = [np.linalg.norm(X[i] - X[j]) for i in range(60) for j in range(i + 1, 60)]
    assert median_distance(X) == pytest.approx(np.median(d), rel=1e-12)
    assert sigma_rule_of_thumb(X) == pytest.approx(DEFAULT_SIGMA_FRACTION * np.median(d))
    assert make_kernel("rbf", X).params["sigma"] == sigma_rule_of_thumb(X)


def test_large_n_width_is_the_same_sample_in_every_path(rng):
    """Above the sample size the registry samples first (sorted rows, so Dask input is read
    once); the set of rows, hence the median, is that of ``sigma_rule_of_thumb``."""
    n = RULE_OF_THUMB_SAMPLE + 500
    X = rng.normal(size=(n, 2))
    idx = np.random.default_rng(3).choice(n, size=RULE_OF_THUMB_SAMPLE, replace=False)
    reference = 0.2 * np.median(pdist(X[idx]))
    assert sigma_rule_of_thumb(X, fraction=0.2, seed=3) == reference
    assert make_kernel("rbf", X, sigma_fraction=0.2, seed=3).params["sigma"] == reference
    kern, params = resolve_kernel(
        "rbf", X, sigma=None, sigma_fraction=0.2, dtype="float64", seed=3, owner="KPPR"
    )
    assert params == {"kernel": "rbf", "sigma": reference}


# -- log forms: the kernel decomposition's kernels ----------------------------------------------


def test_log_forms_against_the_log_of_the_kernel(rng):
    X, Y = rng.normal(size=(30, 3)), rng.normal(size=(11, 3))
    for name, params in [
        ("rbf", {"sigma": 0.9}),
        ("local_scaling", {"scale_neighbors": 4, "n_reference": None}),
        ("cosine", {}),
    ]:
        k = make_kernel(name, X, **params)
        with np.errstate(divide="ignore"):  # log 0 = -inf where a cosine is <= 0
            np.testing.assert_allclose(k.log(Y, X), np.log(np.clip(k(Y, X), 0, None)), atol=1e-12)
        np.testing.assert_allclose(k.log(X), k.log(X, X))
    for name in ("knn", "knn_mean"):
        with pytest.raises(InvalidInputError, match="no log form"):
            make_kernel(name, X, n_neighbors=3).log(X)


def test_decomposition_kernels_are_registered_log_forms(rng):
    assert set(DECOMPOSITION_KERNELS) <= set(available_kernels())
    Xt, Xq = rng.normal(size=(40, 3)), rng.normal(size=(9, 3))
    h = 0.6
    rbf = make_kernel("rbf", sigma=h)
    np.testing.assert_array_equal(
        density_log_kernel(Xq, Xt, kernel="rbf", sigma=h),
        rbf.log(Xq, Xt) + gaussian_log_normalizer(3, h),
    )
    C = np.abs(Xt)
    np.testing.assert_array_equal(
        density_log_kernel(C[:9], C, kernel="cosine"), make_kernel("cosine").log(C[:9], C)
    )
    # the self-tuning scales of the decomposition (a neighbour search over the training
    # points) are the registry's neighbour radii with every training point a reference
    k = 5
    d = np.sort(np.sqrt(((Xt[:, None] - Xt[None]) ** 2).sum(-1)), axis=1)
    scales = fit_local_scales(d[:, : k + 1], k)
    local = make_kernel("local_scaling", Xt, scale_neighbors=k, n_reference=None)
    np.testing.assert_allclose(
        density_log_kernel(Xq, Xt, kernel="local_scaling", sigma=scales),
        local.log(Xq, Xt),
        rtol=1e-10,
    )


def test_knn_rows_use_the_same_log_forms(rng):
    Xt, Xq = rng.normal(size=(50, 2)), rng.normal(size=(7, 2))
    h = 0.4
    ind, logK = knn_log_kernel(Xq, Xt, kernel="rbf", sigma=h, n_neighbors=6)
    full = make_kernel("rbf", sigma=h).log(Xq, Xt) + gaussian_log_normalizer(2, h)
    np.testing.assert_allclose(logK, np.take_along_axis(full, ind, axis=1), atol=1e-12)
    # the former name gives the same rows (the estimators warn; the functions do not)
    ind2, logK2 = knn_log_kernel(Xq, Xt, kernel="gaussian", sigma=h, n_neighbors=6)
    np.testing.assert_array_equal(ind, ind2)
    np.testing.assert_array_equal(logK, logK2)


# -- what the ranking estimators needed from the registry ---------------------------------------


def test_transformer_is_a_feature_map_kernel(rng):
    X = rng.normal(size=(20, 3))
    k = make_kernel(MinMaxScaler(), X)
    assert isinstance(k.feature_map, MinMaxScaler) and hasattr(k.feature_map, "data_min_")
    F = MinMaxScaler().fit_transform(X)
    np.testing.assert_allclose(k(X[:4], X), F[:4] @ F.T, atol=1e-12)
    with pytest.raises(InvalidInputError, match="not fitted"):
        make_kernel(MinMaxScaler())
    with pytest.raises(InvalidInputError, match="feature map"):
        make_kernel(MinMaxScaler(), X, sigma=1.0)


def test_pck_by_name_fits_a_default_model_on_x(rng):
    from dkernel.gmm.pck import ProbabilisticClusterKernel

    X = rng.normal(size=(80, 2))
    k = make_kernel("pck", X, seed=0)
    assert isinstance(k.feature_map, ProbabilisticClusterKernel)
    same = ProbabilisticClusterKernel(random_state=0).fit(X)
    G = np.asarray(same.transform(X), dtype=np.float64)
    np.testing.assert_allclose(k(X[:5], X), G[:5] @ G.T, rtol=1e-6)


@pytest.mark.parametrize("name", [n for n in KERNEL_NAMES if n != "precomputed"])
def test_ranking_kernels_resolve_through_the_registry(rng, name):
    X = rng.normal(size=(80, 3))  # PCK's half-subsample holds its 30 components
    if name in SKLEARN_KERNELS or name == "cosine":
        # non-negative data: the chi2 kernels need it, and the others are >= 0 on it
        X = np.abs(X)
    params = {"n_neighbors": 5} if name in ADAPTIVE else {}
    kernel_params = {"n_landmarks": 8, "n_neighbors": 3} if name == "landmark" else None
    kern, description = resolve_kernel(
        name,
        X,
        sigma=None,
        sigma_fraction=0.2,
        dtype="float64",
        seed=0,
        owner="KPPR",
        kernel_params=kernel_params,
        **params,
    )
    reference = make_kernel(
        name,
        X,
        # the kernels that draw a sample take the seed
        **({"seed": 0} if name in ("rbf", "landmark", "pck", *ADAPTIVE) else {}),
        **({"sigma_fraction": 0.2} if name == "rbf" else {}),
        # resolve_kernel's n_neighbors is local_scaling's scale_neighbors
        **({neighbor_parameter(name): 5} if name in ADAPTIVE else {}),
        **(kernel_params or {}),
    )
    if name in ("landmark", "pck"):
        assert isinstance(kern, FeatureMapKernel)
        np.testing.assert_allclose(kern.gram(), reference(X), rtol=1e-6, atol=1e-12)
    elif name == "additive_chi2":
        # <= 0 everywhere: not an affinity, refused naming why
        with pytest.raises(InvalidInputError, match="random walk needs an affinity >= 0"):
            kern.gram()
    else:
        assert isinstance(kern, BlockKernel) and isinstance(kern.fn, RegistryBlock)
        assert isinstance(kern.fn.kernel, Kernel) and kern.fn.kernel.name == name
        np.testing.assert_array_equal(kern.gram(), reference(X))
        assert description == {"kernel": name, **reference.params}


def test_ranking_kernels_take_scikit_learn_parameters(rng):
    X = np.abs(rng.normal(size=(30, 3)))
    kern, description = resolve_kernel(
        "poly", X, sigma=None, sigma_fraction=0.2, dtype="float64", seed=0, owner="KPPR",
        kernel_params={"degree": 2, "gamma": 0.5},
    )  # fmt: skip
    assert description == {"kernel": "poly", "gamma": 0.5, "degree": 2, "coef0": 1}
    rbf, description = resolve_kernel(
        "rbf", X, sigma=None, sigma_fraction=0.2, dtype="float64", seed=0, owner="KPPR",
        kernel_params={"gamma": 2.0},
    )  # fmt: skip
    assert description["sigma"] == pytest.approx(0.5)
    with pytest.raises(InvalidInputError, match="it takes coef0, degree, gamma"):
        resolve_kernel(
            "poly", X, sigma=None, sigma_fraction=0.2, dtype="float64", seed=0, owner="KPPR",
            kernel_params={"sigma": 1.0},
        )  # fmt: skip
