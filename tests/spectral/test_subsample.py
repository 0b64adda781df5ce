"""The subsample-then-one-pass embeddings against the exact feature-map embeddings."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest

from dkernel.errors import InvalidInputError
from dkernel.spectral.feature_map import choose_solver, feature_map_kpca, feature_map_normalized
from dkernel.spectral.subsample import subsample_kpca, subsample_normalized, subsample_rows


def _phi(n, f, rank, noise=0.0, seed=0):
    rng = np.random.default_rng(seed)
    Phi = rng.random((n, rank)) @ rng.random((rank, f))
    return Phi + noise * rng.random((n, f))


def _close_up_to_sign(A, B, atol):
    for j in range(A.shape[1]):
        s = np.sign(A[:, j] @ B[:, j]) or 1.0
        np.testing.assert_allclose(A[:, j], s * B[:, j], atol=atol)


ROUTES = [(subsample_kpca, feature_map_kpca), (subsample_normalized, feature_map_normalized)]


@pytest.mark.parametrize("kind", ["numpy", "dask"])
@pytest.mark.parametrize("route, exact", ROUTES)
def test_whole_sample_gives_the_exact_embedding(kind, route, exact):
    """m = N: span V is the randomized range of Φ itself, so the one-pass Rayleigh–Ritz step
    gives the exact eigenpairs (clear spectral gap)."""
    Phi = _phi(300, 70, rank=6, noise=1e-3)
    X = Phi if kind == "numpy" else da.from_array(Phi, chunks=(64, 70))
    ref = exact(Phi, 4, solver="exact")
    got = route(X, Phi, 4, random_state=0)
    assert got.solver == "subsample"
    np.testing.assert_allclose(got.eigenvalues, ref.eigenvalues, rtol=1e-7)
    _close_up_to_sign(got.embedding, ref.embedding, 1e-6)
    if ref.degrees is not None:
        np.testing.assert_allclose(got.degrees, ref.degrees, rtol=1e-12)


@pytest.mark.parametrize("route, exact", ROUTES)
def test_small_sample_of_low_rank_map_is_exact(route, exact):
    """Rank-5 Φ: 40 of 400 rows span its (centred) row space, so V contains it and the
    projected problem is the full one; the mean and degrees come from all rows."""
    Phi = _phi(400, 90, rank=5)
    rows = subsample_rows(400, 40, random_state=1)
    assert rows.size == 40 and np.all(np.diff(rows) > 0)
    ref = exact(Phi, 3, solver="exact")
    got = route(da.from_array(Phi, chunks=(100, 90)), Phi[rows], 3, random_state=0)
    np.testing.assert_allclose(got.eigenvalues, ref.eigenvalues, rtol=1e-8)
    _close_up_to_sign(got.embedding, ref.embedding, 1e-7)


@pytest.mark.parametrize("route, exact", ROUTES)
def test_small_sample_of_noisy_map_is_close(route, exact):
    """Full-rank Φ (rank 5 + noise): a 10 % sample still finds the leading subspace to within
    the noise, in float32 as the PCK posteriors are."""
    Phi = _phi(2000, 120, rank=5, noise=0.02, seed=3).astype(np.float32)
    rows = subsample_rows(2000, 200, random_state=2)
    ref = exact(Phi, 3, solver="exact")
    got = route(Phi, Phi[rows], 3, random_state=0)
    np.testing.assert_allclose(got.eigenvalues, ref.eigenvalues, rtol=1e-3)
    cosines = np.linalg.svd(ref.eigenvectors.T @ got.eigenvectors, compute_uv=False)
    assert cosines.min() > 1 - 1e-4


def test_sparse_sample_and_map():
    from scipy.sparse import csr_matrix

    Phi = _phi(300, 80, rank=4)
    Phi[np.random.default_rng(1).random(Phi.shape) < 0.6] = 0
    S = csr_matrix(Phi)
    rows = subsample_rows(300, 150, random_state=0)
    for route in (subsample_kpca, subsample_normalized):
        ref = route(Phi, Phi[rows], 3, random_state=0)
        got = route(S, S[rows], 3, random_state=0)
        np.testing.assert_allclose(got.eigenvalues, ref.eigenvalues, rtol=1e-10)
        _close_up_to_sign(got.embedding, ref.embedding, 1e-10)


@pytest.mark.parametrize("route, passes", [(subsample_kpca, 1), (subsample_normalized, 2)])
def test_a_dask_map_is_read_once(route, passes):
    """KPCA: Φ V and the column sum from one pass; normalised: the column sum, then Φ V and
    the degrees. Every chunk is computed once per pass."""
    calls = []
    Phi = _phi(200, 40, rank=3, noise=0.1)

    def chunk(block, block_info=None):
        calls.append(block_info[None]["chunk-location"][0])
        return block

    lazy = da.from_array(Phi, chunks=(50, 40)).map_blocks(chunk, dtype=Phi.dtype)
    with dask.config.set(scheduler="sync"):
        route(lazy, Phi[:60], 2, random_state=0)
    assert sorted(calls) == sorted(list(range(4)) * passes)


def test_errors_and_rows():
    Phi = _phi(50, 20, rank=3)
    with pytest.raises(InvalidInputError, match="columns"):
        subsample_kpca(Phi, Phi[:, :10], 2)
    with pytest.raises(InvalidInputError, match="n_components"):
        subsample_kpca(Phi, Phi[:3], 4)
    with pytest.raises(InvalidInputError, match="not positive"):
        subsample_normalized(Phi - Phi.mean(axis=0), Phi[:10], 2)
    # degrees d = Φ Φᵀ 1 = (0, 0, 0, 1), those of the first three rows alone (3, 3, 3)
    bad = np.array([[1.0, 0.0], [1.0, 0.0], [1.0, 0.0], [-3.0, 1.0]])
    with pytest.raises(InvalidInputError, match=r"^3 degrees of K = Φ Φᵀ are not positive"):
        subsample_normalized(bad, bad[:3], 1)
    with pytest.raises(InvalidInputError, match=r"^1 degrees of K = Φ Φᵀ on the sample are"):
        subsample_normalized(bad, bad[2:], 1)
    np.testing.assert_array_equal(subsample_rows(10, 20, 0), np.arange(10))
    np.testing.assert_array_equal(subsample_rows(1000, 30, 5), subsample_rows(1000, 30, 5))


def test_auto_picks_the_subsample_for_a_lazy_map_with_a_sample():
    assert choose_solver((10**6, 13920), 8, is_dask=True)[0] == "randomized"
    solver, why = choose_solver((10**6, 13920), 8, is_dask=True, sample_rows=20_000)
    assert solver == "subsample" and "subsample of 20000 rows + 1 pass" in why
    # a sample of nearly every row saves nothing; in-memory maps ignore the sample
    assert choose_solver((20_000, 13920), 8, is_dask=True, sample_rows=20_000)[0] == "randomized"
    assert choose_solver((50_000, 13920), 8, sample_rows=20_000)[0] == "randomized"
