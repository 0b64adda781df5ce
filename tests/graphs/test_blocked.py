import warnings

import dask
import numpy as np
import pytest
from sklearn.metrics.pairwise import rbf_kernel

from dkernel.errors import InvalidInputError
from dkernel.graphs.blocked import blocked_kernel
from dkernel.kernels.rbf import rbf_block, sigma_rule_of_thumb
from dkernel.testing import as_kind


def test_rbf_block_matches_naive_formula(rng):
    X, Y = rng.normal(size=(7, 3)), rng.normal(size=(5, 3))
    naive = np.array([[np.exp(-np.sum((x - y) ** 2) / (2 * 1.3**2)) for y in Y] for x in X])
    np.testing.assert_allclose(rbf_block(X, Y, 1.3), naive, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(rbf_block(X, Y, 1.3, dtype=np.float32), naive, atol=1e-6)


def test_sigma_rule_of_thumb_is_fraction_of_median_distance(rng):
    X = rng.normal(size=(300, 4))
    from scipy.spatial.distance import pdist

    med = np.median(pdist(X))
    assert sigma_rule_of_thumb(X, fraction=0.2) == pytest.approx(0.2 * med)
    with pytest.raises(InvalidInputError, match="pass sigma explicitly"):
        sigma_rule_of_thumb(np.ones((10, 2)))
    # not all rows equal: most of them one repeated value (a nodata pixel), the rest distinct
    mostly_nodata = np.vstack([np.zeros((80, 2)), rng.normal(size=(20, 2))])
    with pytest.raises(InvalidInputError, match="most of them one repeated value"):
        sigma_rule_of_thumb(mostly_nodata)


@pytest.mark.parametrize("scheduler", ["threads", "distributed"])
def test_blocked_rbf_equals_sklearn_when_chunks_do_not_divide_n(
    rng, array_kind, scheduler, request
):
    X = rng.normal(size=(2000, 5))
    sigma = 1.7
    K = blocked_kernel(rbf_block, as_kind(X, array_kind, 333), block_rows=333, sigma=sigma)
    assert K.chunks[0][-1] == 2000 % 333
    expected = rbf_kernel(X, gamma=0.5 / sigma**2)
    if scheduler == "distributed":
        client = request.getfixturevalue("client")
        got = client.compute(K).result()
    else:
        with dask.config.set(scheduler="threads"):
            got = K.compute()
    np.testing.assert_allclose(got, expected, atol=1e-6)


def test_blocked_rbf_float32_and_rectangular(rng):
    X, Y = rng.normal(size=(250, 3)), rng.normal(size=(130, 3))
    K = blocked_kernel(rbf_block, X, Y, block_rows=64, dtype="float32", sigma=2.0)
    assert K.dtype == np.float32 and K.shape == (250, 130)
    np.testing.assert_allclose(K.compute(), rbf_kernel(X, Y, gamma=0.125), atol=1e-6)


def test_default_block_size_targets_64_mib():
    X = np.zeros((10**6, 1))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # n² blocks from n row blocks: by design, no warning
        assert blocked_kernel(rbf_block, X, dtype="float32", sigma=1.0).chunks[0][0] == 4096
    assert blocked_kernel(rbf_block, X[:100], sigma=1.0).chunks == ((100,), (100,))


def test_rows_of_different_widths_are_a_clear_error():
    with pytest.raises(InvalidInputError, match="same columns"):
        blocked_kernel(rbf_block, np.zeros((5, 2)), np.zeros((4, 3)), sigma=1.0)
