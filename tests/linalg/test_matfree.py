"""Matrix-free eigen-solvers, alone and streaming over a Zarr-stored kernel."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
import xarray as xr
from scipy import linalg

from dkernel.errors import InvalidInputError, NumericalWarning, StoreError
from dkernel.kernels.rbf import rbf_block
from dkernel.linalg.eigen import fix_signs
from dkernel.linalg.matfree import matrix_free_eigh
from dkernel.storage.kernel_operator import ZarrKernelOperator
from dkernel.storage.store import ResultsStore


@pytest.fixture(scope="module")
def kernel():
    X = np.random.default_rng(1).normal(size=(400, 3))
    return rbf_block(X, X, 1.0)


def _reference(K, k):
    w, V = linalg.eigh(K)
    return w[::-1][:k], fix_signs(V[:, ::-1][:, :k])


@pytest.mark.parametrize("method", ["subspace", "lobpcg", "lanczos"])
def test_matches_dense_eigh(kernel, method):
    w, V = _reference(kernel, 6)
    res = matrix_free_eigh(lambda B: kernel @ B, 400, 6, method=method, tol=1e-9)
    assert res.converged and res.method == method
    np.testing.assert_allclose(res.values, w, rtol=1e-9)
    np.testing.assert_allclose(res.vectors, V, atol=1e-6)
    assert np.all(np.diff(res.values) <= 0)
    assert res.residuals.max() < 1e-9
    # residuals are true relative residuals of the returned pairs
    R = kernel @ res.vectors - res.vectors * res.values
    np.testing.assert_allclose(np.linalg.norm(R, axis=0) / res.values, res.residuals, atol=1e-10)


def test_block_method_uses_few_passes(kernel):
    res = matrix_free_eigh(lambda B: kernel @ B, 400, 6, method="subspace", block_size=30)
    lan = matrix_free_eigh(lambda B: kernel @ B, 400, 6, method="lanczos")
    assert res.n_passes < lan.n_passes


def test_negative_eigenvalues_are_clipped_with_warning():
    A = np.diag(np.r_[2.0, 1.0, -np.linspace(0.5, 3.0, 28)])
    with pytest.warns(NumericalWarning, match="clipped"):
        res = matrix_free_eigh(lambda B: A @ B, 30, 3, method="lanczos")
    np.testing.assert_allclose(res.values, [2.0, 1.0, 0.0], atol=1e-10)


def test_bad_arguments():
    with pytest.raises(InvalidInputError, match="'method'"):
        matrix_free_eigh(lambda B: B, 10, 2, method="arnoldi")
    with pytest.raises(InvalidInputError, match="n_components"):
        matrix_free_eigh(lambda B: B, 10, 10)
    with pytest.raises(InvalidInputError, match="shape"):
        matrix_free_eigh(lambda B: B[:5], 10, 2)


@pytest.fixture(scope="module")
def stored_kernel(tmp_path_factory):
    X = np.random.default_rng(2).normal(size=(300, 2))
    K = rbf_block(X, X, 0.7, dtype=np.float32)
    path = tmp_path_factory.mktemp("k") / "store.zarr"
    store = ResultsStore.create(path, job={"method": "test"}, seed=0)
    Kd = da.from_array(K, chunks=(64, 64))
    store.write("kernel", xr.Dataset({"kernel": (("sample", "sample_"), Kd)}))
    return path, K.astype(np.float64)


def test_zarr_operator_streams_blocks(stored_kernel):
    path, K = stored_kernel
    op = ZarrKernelOperator.from_store(path)
    assert op.shape == (300, 300) and op.row_block == 64
    V = np.random.default_rng(0).normal(size=(300, 4))
    np.testing.assert_allclose(op.matmat(V), K @ V, rtol=1e-10)
    np.testing.assert_allclose(op.matmat(V[:, 0]), K @ V[:, 0], rtol=1e-10)
    assert op.n_passes == 2 and op.bytes_read == 2 * 300 * 300 * 4
    np.testing.assert_allclose(op.diagonal(), np.diagonal(K))


def test_eigenpairs_of_stored_kernel(stored_kernel):
    path, K = stored_kernel
    op = ZarrKernelOperator.from_store(path, row_block=50)
    res = matrix_free_eigh(op.matmat, 300, 5, tol=1e-8)
    w, V = _reference(K, 5)
    assert res.converged and res.residuals.max() < 1e-8
    np.testing.assert_allclose(res.values, w, rtol=1e-8)
    np.testing.assert_allclose(res.vectors, V, atol=1e-6)
    assert op.n_passes == res.n_passes


def test_operator_errors(stored_kernel, tmp_path):
    path, _ = stored_kernel
    with pytest.raises(StoreError, match="no array"):
        ZarrKernelOperator.from_store(path, name="nope")
    with pytest.raises(StoreError, match="cannot open group"):
        ZarrKernelOperator.from_store(path, group="embedding")
    with pytest.raises(InvalidInputError, match="square"):
        ZarrKernelOperator(np.zeros((3, 4)))
