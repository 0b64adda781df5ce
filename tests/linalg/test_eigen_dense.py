import numpy as np
import pytest

from dkernel.errors import NumericalWarning
from dkernel.linalg.eigen import dense_eigh, fix_signs


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
