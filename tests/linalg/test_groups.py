from __future__ import annotations

import numpy as np

from dkernel.linalg import label_sums


def test_label_sums(rng):
    X = rng.normal(size=(50, 3))
    labels = rng.integers(-1, 4, 50)
    X[labels == -1] = np.nan  # nodata rows have no partition and do not count
    sums, counts = label_sums(X, labels, 5)
    for i in range(5):
        np.testing.assert_allclose(sums[i], X[labels == i].sum(axis=0), atol=1e-12)
        assert counts[i] == (labels == i).sum()
    assert counts[4] == 0 and (sums[4] == 0).all()
    # labels at or above n_labels are left out (a class table of fewer classes)
    sums3, counts3 = label_sums(X, labels, 3)
    np.testing.assert_array_equal(sums3, sums[:3])
    np.testing.assert_array_equal(counts3, counts[:3])
