"""Feature-map spectral embeddings against dense eigen-decompositions of K = Φ Φᵀ."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest

from dkernel.errors import InvalidInputError
from dkernel.linalg.eigen import dense_eigh
from dkernel.linalg.kmeans import normalize_rows
from dkernel.spectral.dense import center_kernel, kpca_embedding
from dkernel.spectral.feature_map import feature_map_kpca, feature_map_normalized


def _phi(n=120, f=40, seed=0, rank=None):
    rng = np.random.default_rng(seed)
    if rank is None:
        return rng.random((n, f))
    return rng.random((n, rank)) @ rng.random((rank, f))


def _same_subspace(A, B, atol):
    # compare column by column up to sign
    for j in range(A.shape[1]):
        s = np.sign(A[:, j] @ B[:, j]) or 1.0
        np.testing.assert_allclose(A[:, j], s * B[:, j], atol=atol)


@pytest.mark.parametrize("shape", [(120, 40), (40, 120)])
def test_exact_kpca_matches_dense_kernel(shape):
    Phi = _phi(*shape)
    K = Phi @ Phi.T
    ref = kpca_embedding(K, 4)
    got = feature_map_kpca(Phi, 4, solver="exact")
    assert got.solver == "exact"
    np.testing.assert_allclose(got.eigenvalues, ref.eigenvalues, rtol=1e-8)
    _same_subspace(got.embedding, ref.embedding, 1e-8)
    unc = feature_map_kpca(Phi, 3, centered=False, solver="exact")
    np.testing.assert_allclose(unc.eigenvalues, dense_eigh(K, 3)[0], rtol=1e-8)


def test_randomized_kpca_numpy_and_dask_match_exact():
    Phi = _phi(300, 60, rank=8) + 1e-3 * _phi(300, 60, seed=2)
    ref = feature_map_kpca(Phi, 3, solver="exact")
    rnd = feature_map_kpca(Phi, 3, solver="randomized", random_state=0)
    np.testing.assert_allclose(rnd.eigenvalues, ref.eigenvalues, rtol=1e-6)
    _same_subspace(rnd.embedding, ref.embedding, 1e-5)
    lazy = feature_map_kpca(da.from_array(Phi, chunks=(70, 60)), 3, random_state=0)
    assert lazy.solver == "randomized"
    np.testing.assert_allclose(lazy.eigenvalues, ref.eigenvalues, rtol=1e-6)
    _same_subspace(lazy.embedding, ref.embedding, 1e-5)


@pytest.mark.parametrize("kind", ["numpy", "dask"])
def test_normalized_embedding_matches_dense(kind):
    Phi = _phi(150, 30, rank=5) + 0.01
    K = Phi @ Phi.T
    d = K.sum(axis=1)
    Kn = K / np.sqrt(np.outer(d, d))
    vals, vecs = dense_eigh(Kn, 3)
    X = Phi if kind == "numpy" else da.from_array(Phi, chunks=(40, 30))
    got = feature_map_normalized(X, 3, random_state=0)
    np.testing.assert_allclose(got.degrees, d, rtol=1e-10)
    np.testing.assert_allclose(got.eigenvalues, vals, rtol=1e-6)
    assert abs(got.eigenvalues[0] - 1.0) < 1e-8  # top eigenvalue of the normalised kernel
    _same_subspace(got.eigenvectors, vecs, 1e-5)
    U = normalize_rows(got.embedding)
    np.testing.assert_allclose(np.linalg.norm(U, axis=1), 1.0)


def test_centering_matches_center_kernel():
    Phi = _phi(50, 200)
    got = feature_map_kpca(Phi, 5, solver="exact")
    vals = dense_eigh(center_kernel(Phi @ Phi.T), 5)[0]
    np.testing.assert_allclose(got.eigenvalues, vals, rtol=1e-8, atol=1e-10)


def test_errors():
    Phi = _phi(20, 5)
    with pytest.raises(InvalidInputError, match="n_components"):
        feature_map_kpca(Phi, 6)
    with pytest.raises(InvalidInputError, match="solver"):
        feature_map_kpca(Phi, 2, solver="lanczos")
    with pytest.raises(InvalidInputError, match="not positive"):
        feature_map_normalized(np.array([[1.0, 0.0], [1.0, 0.0], [-3.0, 1.0]]), 1)
    big = da.zeros((5000, 4100), chunks=(1000, 4100))
    with pytest.raises(InvalidInputError, match="randomized"):
        feature_map_kpca(big, 2, solver="exact")


def _svd_reference(Phi, k, *, centered=False, normalized=False):
    """The obvious route: a full SVD of the explicitly centred / scaled float64 matrix."""
    A = np.asarray(Phi, dtype=np.float64)
    if centered:
        A = A - A.mean(axis=0)
    if normalized:
        d = A @ A.sum(axis=0)
        A = A / np.sqrt(d)[:, None]
    U, s, _ = np.linalg.svd(A, full_matrices=False)
    return U[:, :k], s[:k] ** 2


@pytest.mark.parametrize("shape", [(90, 300), (300, 90)])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_gram_route_matches_svd_route(shape, dtype, monkeypatch):
    """Gram route (syrk in slices, centring / scaling on the N × N or F × F matrix, partial
    eigh) against the SVD of the explicitly centred / scaled matrix, float32 Φ included."""
    import dkernel.spectral.feature_map as fm

    monkeypatch.setattr(fm, "_GRAM_SLICE", 64)  # several syrk slices summed in float64
    Phi = (_phi(*shape, rank=6) + 0.05 * _phi(*shape, seed=4)).astype(dtype)
    tol = 1e-9 if dtype == np.float64 else 2e-5
    U, lam = _svd_reference(Phi, 4, centered=True)
    got = feature_map_kpca(Phi, 4, solver="exact")
    np.testing.assert_allclose(got.eigenvalues, lam, rtol=tol)
    _same_subspace(got.eigenvectors, U, 10 * tol)
    U, lam = _svd_reference(Phi, 4, normalized=True)
    got = feature_map_normalized(Phi, 4, solver="exact")
    np.testing.assert_allclose(got.eigenvalues, lam, rtol=tol)
    _same_subspace(got.eigenvectors, U, 10 * tol)


@pytest.mark.parametrize("kind", ["numpy", "dask"])
def test_randomized_float32_map_matches_svd_route(kind):
    """The F-side subspace iteration keeps a float32 Φ in float32 (no float64 copy) and still
    matches the float64 SVD to float32 precision on a map with a clear spectral gap."""
    Phi = (_phi(400, 150, rank=5) + 1e-3 * _phi(400, 150, seed=9)).astype(np.float32)
    X = Phi if kind == "numpy" else da.from_array(Phi, chunks=(90, 150))
    U, lam = _svd_reference(Phi, 3, centered=True)
    got = feature_map_kpca(X, 3, solver="randomized", random_state=1)
    np.testing.assert_allclose(got.eigenvalues, lam, rtol=1e-5)
    _same_subspace(got.eigenvectors, U, 1e-4)
    U, lam = _svd_reference(Phi, 3, normalized=True)
    got = feature_map_normalized(X, 3, solver="randomized", random_state=1)
    np.testing.assert_allclose(got.eigenvalues, lam, rtol=1e-5)
    _same_subspace(got.eigenvectors, U, 1e-4)


def test_randomized_streams_a_dask_map_once_per_pass():
    """n_power_iter + 2 passes over a lazy Φ, each computing every chunk once (plus one pass
    for the column mean)."""
    calls = []
    Phi = _phi(200, 40)

    def chunk(block, block_info=None):
        calls.append(block_info[None]["chunk-location"][0])
        return block

    lazy = da.from_array(Phi, chunks=(50, 40)).map_blocks(chunk, dtype=Phi.dtype)
    # in this process (a client left by another test would run the chunks in its workers)
    with dask.config.set(scheduler="sync"):
        feature_map_kpca(lazy, 2, solver="randomized", n_power_iter=3, random_state=0)
    assert len(calls) == 4 * (1 + 3 + 2)  # 4 chunks; mean + (n_power_iter + 1) + 1 passes


def test_auto_picks_the_cheaper_route():
    """Gram route for small N (and for F < N), randomized once the N² F Gram costs more than
    the passes; Dask input is streamed; the choice comes with its cost line."""
    from dkernel.spectral.feature_map import choose_solver

    assert choose_solver((500, 13920), 8)[0] == "exact"
    solver, why = choose_solver((3800, 13920), 8)
    assert solver == "randomized" and "Gram route" in why and "passes" in why
    assert choose_solver((100_000, 60), 8)[0] == "exact"  # a 60 × 60 Gram matrix
    assert choose_solver((500, 13920), 8, is_dask=True)[0] == "randomized"
    assert feature_map_kpca(_phi(60, 30), 3).solver == "exact"


def test_sparse_map_matches_dense():
    """A SciPy sparse Φ (a thresholded PCK transform) gives the dense map's embeddings."""
    from scipy.sparse import csr_matrix

    Phi = _phi(300, 80, rank=4)
    Phi[np.random.default_rng(1).random(Phi.shape) < 0.6] = 0  # mostly zeros, like Γ
    S = csr_matrix(Phi.astype(np.float32))
    for fn in (feature_map_kpca, feature_map_normalized):
        for solver in ("randomized", "exact"):
            ref = fn(S.toarray(), 3, solver=solver, random_state=0)
            got = fn(S, 3, solver=solver, random_state=0)
            np.testing.assert_allclose(got.eigenvalues, ref.eigenvalues, rtol=1e-6)
            _same_subspace(got.eigenvectors, ref.eigenvectors, 1e-5)
