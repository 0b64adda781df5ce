import numpy as np
import pytest

from dkernel.errors import InvalidInputError, NumericalWarning
from dkernel.linalg.eigen import dense_eigh, fix_signs, leading_eigenpairs


def test_dense_eigh_sorted_descending_with_fixed_signs(rng):
    A = rng.normal(size=(30, 30))
    K = A @ A.T
    values, vectors = dense_eigh(K, 5)
    ref = np.sort(np.linalg.eigvalsh(K))[::-1][:5]
    np.testing.assert_allclose(values, ref, rtol=1e-10)
    np.testing.assert_allclose(K @ vectors, vectors * values, atol=1e-8)
    idx = np.argmax(np.abs(vectors), axis=0)
    assert np.all(vectors[idx, np.arange(5)] > 0)


def test_fix_signs_is_idempotent(rng):
    V = rng.normal(size=(10, 3))
    np.testing.assert_array_equal(fix_signs(fix_signs(V)), fix_signs(V))
    np.testing.assert_array_equal(np.abs(fix_signs(V)), np.abs(V))


def test_negative_eigenvalues_are_clipped_with_a_warning():
    K = np.diag([3.0, 1.0, -0.5])
    with pytest.warns(NumericalWarning, match="clipped"):
        values, _ = dense_eigh(K)
    np.testing.assert_array_equal(values, [3.0, 1.0, 0.0])


def test_roundoff_negative_eigenvalues_clip_silently():
    K = np.diag([3.0, 1.0, -1e-15])
    values, _ = dense_eigh(K)
    assert values.min() == 0.0


def test_leading_eigenpairs_keep_the_numerical_range(rng):
    """Against the obvious reference: the pairs of eigenvalue above rtol · max, one by one."""
    B = rng.normal(size=(12, 4))
    K = B @ B.T - 0.5 * np.eye(12)  # rank 4 plus a negative shift: 4 positive eigenvalues
    values, vectors = dense_eigh(K, clip=False)
    kept_values, kept_vectors = leading_eigenpairs(values, vectors, rtol=1e-3, degenerate="x")
    ref = [i for i in range(values.size) if values[i] > 1e-3 * values[0]]
    assert ref == list(range(4))
    np.testing.assert_array_equal(kept_values, values[ref])
    np.testing.assert_array_equal(kept_vectors, vectors[:, ref])


def test_leading_eigenpairs_refuse_a_matrix_without_positive_eigenvalue():
    values, vectors = dense_eigh(-np.eye(3), clip=False)
    with pytest.raises(InvalidInputError, match="degenerate here"):
        leading_eigenpairs(values, vectors, rtol=1e-10, degenerate="degenerate here")
    with pytest.raises(InvalidInputError, match="empty"):
        leading_eigenpairs(np.empty(0), np.empty((3, 0)), rtol=1e-10, degenerate="empty")


@pytest.mark.parametrize("k", [3, 7, 8, 40])  # 8 of 32: the subset solver; 40: all (capped)
def test_dense_eigh_subset_and_full_solvers_agree_with_numpy(rng, k):
    """Both LAPACK paths (a subset up to a quarter of the pairs, one solve of all above)
    give numpy's leading eigenpairs, descending, signs fixed."""
    A = rng.normal(size=(32, 32))
    K = A @ A.T
    values, vectors = dense_eigh(K, k)
    ref_values, ref_vectors = np.linalg.eigh(K)
    kk = min(k, 32)
    np.testing.assert_allclose(values, ref_values[::-1][:kk], rtol=1e-10)
    np.testing.assert_allclose(
        np.abs(vectors.T @ ref_vectors[:, ::-1][:, :kk]), np.eye(kk), atol=1e-8
    )
    idx = np.argmax(np.abs(vectors), axis=0)
    assert np.all(vectors[idx, np.arange(kk)] > 0)


def _rbf(X: np.ndarray, sigma: float) -> np.ndarray:
    sq = (X**2).sum(1)
    return np.exp(-np.maximum(sq[:, None] + sq[None, :] - 2 * X @ X.T, 0) / (2 * sigma**2))


def test_iterative_leading_pairs_equal_lapack_s():
    from dkernel.spectral.dense import center_kernel

    X = np.random.default_rng(3).normal(size=(2400, 4))
    K = center_kernel(_rbf(X, 1.5))
    want_values, want_vectors = dense_eigh(K, 7)
    values, vectors = dense_eigh(K, 7, iterative=True)
    np.testing.assert_allclose(values, want_values, rtol=1e-10)
    np.testing.assert_allclose(vectors, want_vectors, atol=1e-8)
    # past LANCZOS_MAX_FRACTION of the pairs, and below LANCZOS_MIN_ROWS rows: LAPACK
    np.testing.assert_array_equal(dense_eigh(K, 200, iterative=True)[0], dense_eigh(K, 200)[0])
    np.testing.assert_array_equal(
        dense_eigh(K[:500, :500], 3, iterative=True)[1], dense_eigh(K[:500, :500], 3)[1]
    )


def test_lanczos_finds_repeated_eigenvalues_or_says_it_missed_one():
    from scipy import linalg

    from dkernel.linalg.eigen import lanczos_leading

    block = _rbf(np.random.default_rng(4).normal(size=(700, 3)), 1.0)
    K = linalg.block_diag(block, block, block)  # every eigenvalue three times
    want = dense_eigh(K, 6)[0]
    np.testing.assert_allclose(want[:3], want[0])
    np.testing.assert_allclose(want[3:], want[3])
    np.testing.assert_allclose(dense_eigh(K, 6, iterative=True)[0], want, rtol=1e-10)
    # a start vector zero outside the first block stays there exactly (round-off cannot
    # bring the other blocks' copies in): it finds only that block's pairs, and the check,
    # from its own start, notices the missed ones
    confined = np.zeros(len(K))
    confined[: len(block)] = 1.0
    assert lanczos_leading(K, 6, start=confined) is None


def test_lanczos_that_runs_out_of_restarts_gives_way_to_lapack(monkeypatch):
    from dkernel.linalg import eigen

    K = _rbf(np.random.default_rng(5).normal(size=(2100, 3)), 1.0)
    want = dense_eigh(K, 5)
    monkeypatch.setattr(eigen, "LANCZOS_MAX_RESTARTS", 1)
    assert eigen.lanczos_leading(K, 5) is None
    values, vectors = dense_eigh(K, 5, iterative=True)
    np.testing.assert_array_equal(values, want[0])
    np.testing.assert_array_equal(vectors, want[1])


def test_lanczos_that_runs_past_its_products_gives_way_to_lapack(monkeypatch):
    """Four groups of one feature under a kernel as wide as their spacing: past the first
    few, the 64 leading eigenvalues crowd near 0 and Lanczos took 1 553 products of 2 000
    rows (130 at a width of 0.5), each a fraction of a LAPACK solve; past
    LANCZOS_PRODUCTS_PER_ROW per row, LAPACK solves it."""
    from dkernel.linalg import eigen

    rng = np.random.default_rng(0)
    X = (8.0 * rng.integers(0, 4, 2000) + rng.normal(size=2000))[:, None]
    K = _rbf(X, 8.0)
    taken = []
    real = eigen._budgeted

    def counted(K, products):
        taken.append(products)
        return real(K, products)

    monkeypatch.setattr(eigen, "_budgeted", counted)
    assert eigen.lanczos_leading(K, 64) is None
    assert taken == [int(eigen.LANCZOS_PRODUCTS_PER_ROW * 2000)]
    want = dense_eigh(K, 64)
    values, vectors = dense_eigh(K, 64, iterative=True)
    np.testing.assert_array_equal(values, want[0])
    np.testing.assert_array_equal(vectors, want[1])
    # a kernel Lanczos converges on within the budget keeps its Lanczos pairs
    assert eigen.lanczos_leading(_rbf(X, 0.5), 64) is not None
