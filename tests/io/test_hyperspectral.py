"""Tests of the Samson / Jasper Ridge loaders against the MANIFEST facts."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.io import loadmat

from dkernel.errors import InvalidInputError
from dkernel.io.hyperspectral import load_jasper, load_samson


def _neighbour_agreement(labels: np.ndarray) -> float:
    same = (labels[1:, :] == labels[:-1, :]).sum() + (labels[:, 1:] == labels[:, :-1]).sum()
    total = labels[1:, :].size + labels[:, 1:].size
    return same / total


def test_samson_shape_counts_and_order(data_dir):
    cube, labels = load_samson(data_dir)
    assert cube.shape == (95, 95, 156) and cube.dtype == np.float32
    assert labels.shape == (95, 95)
    assert np.bincount(labels.ravel()).tolist() == [3015, 3666, 2344]
    assert 0.0 <= cube.min() and cube.max() <= 1.0
    # pixel p of Y is (p % nRow, p // nRow): check one by hand
    Y = loadmat(str(data_dir / "hyperspectral_unmixing_samson_jasper" / "Samson.mat"))["Y"]
    p = 95 * 7 + 3
    np.testing.assert_allclose(cube[3, 7], Y[:, p].astype(np.float32))
    assert _neighbour_agreement(labels) > 0.9


def test_jasper_shape_counts_scaling(data_dir):
    cube, labels = load_jasper(data_dir / "hyperspectral_unmixing_samson_jasper")
    assert cube.shape == (100, 100, 198) and cube.dtype == np.float32
    assert np.bincount(labels.ravel()).tolist() == [3493, 3326, 2428, 753]
    assert cube.max() == pytest.approx(5437 / 5000, rel=1e-6)
    assert _neighbour_agreement(labels) > 0.8


def test_missing_dir_is_clear(tmp_path):
    with pytest.raises(InvalidInputError, match="Samson.mat"):
        load_samson(tmp_path)
    with pytest.raises(InvalidInputError, match="does not exist"):
        load_jasper(tmp_path / "nope")
