"""Shared validation helpers."""

import warnings

import numpy as np
import pytest

from dkernel._validation import aligned, resolve_n_components
from dkernel.errors import InvalidInputError


def _unaligned_copy(a: np.ndarray) -> np.ndarray:
    buf = np.empty(a.nbytes + a.itemsize, dtype=np.uint8)
    out = buf[1 : 1 + a.nbytes].view(a.dtype).reshape(a.shape)
    out[...] = a
    return out


def test_aligned_restores_blas_rounding_for_arrays_at_odd_offsets():
    # what dask.distributed can hand back: the same values at an odd byte offset
    F = np.random.default_rng(0).normal(size=(4, 200)) * 1e3
    G = _unaligned_copy(F)
    assert not G.flags.aligned  # NumPy multiplies it with its own loop, which may round
    H = aligned(G)
    assert H.flags.aligned and np.array_equal(F @ F.T, H @ H.T)


def test_aligned_passes_aligned_arrays_and_non_arrays_through():
    F = np.ones((3, 2))
    assert aligned(F) is F
    assert aligned([1, 2]) == [1, 2]


def test_resolve_n_components_follows_n_clusters_and_checks_both():
    assert resolve_n_components("Est", 10, 3, None) == 3
    assert resolve_n_components("Est", 10, 3, 5) == 5
    with pytest.raises(InvalidInputError, match=r"'n_clusters' parameter of Est must be <= "):
        resolve_n_components("Est", 10, 11, 2)
    with pytest.raises(InvalidInputError, match=r"'n_components' parameter of Est .*Got 12"):
        resolve_n_components("Est", 10, 3, 12)


def test_a_dask_array_split_along_its_features_is_joined_into_whole_rows():
    """It was refused ("needs one chunk along the feature axis"); every method reads whole
    rows, so the columns are joined and the row blocks kept."""
    import dask.array as da

    from dkernel import SpectralClustering
    from dkernel._validation import check_2d_array

    X = np.random.default_rng(0).normal(size=(300, 4))
    split = da.from_array(X, chunks=(97, 3))
    joined = check_2d_array(split, "owner")
    assert joined.chunks == ((97, 97, 97, 9), (4,))
    np.testing.assert_array_equal(joined.compute(), X)
    labels = SpectralClustering(2, random_state=0).fit(split).labels_
    np.testing.assert_array_equal(labels, SpectralClustering(2, random_state=0).fit(X).labels_)


@pytest.mark.parametrize("lazy", [False, True])
def test_complex_input_is_refused_by_dtype_with_the_fix_not_printed(lazy):
    import dask.array as da

    from dkernel import EchoStateNetwork, SpectralClustering

    X = np.ones((400, 2)) + 1j
    X = da.from_array(X, chunks=100) if lazy else X
    for est, args in ((SpectralClustering(2), ()), (EchoStateNetwork(), (np.ones((400, 1)),))):
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no ComplexWarning on the way to the error
            with pytest.raises(InvalidInputError, match=r"complex128\. Pass real values") as info:
                est.fit(X, *args)
        assert "[" not in str(info.value)  # the array is not printed
