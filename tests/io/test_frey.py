"""Frey faces reader."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.io import loadmat

from dkernel.errors import InvalidInputError
from dkernel.io.frey import frey_images, load_frey_faces
from dkernel.io.registry import get_reader


def test_load_frey_faces(data_dir):
    data = load_frey_faces()
    assert data.X.shape == (1965, 560)
    assert data.y is None
    assert data.meta["image_shape"] == [28, 20]
    assert 0.0 <= data.X.min() and data.X.max() <= 1.0
    raw = loadmat(str(data_dir / "frey_faces" / "frey_rawface.mat"))["ff"]
    imgs = frey_images(data.X)
    # image 0 equals the first column of ff reshaped row-major (MANIFEST §7)
    np.testing.assert_allclose(imgs[0] * 255.0, raw[:, 0].reshape(28, 20))
    unscaled = load_frey_faces(str(data_dir), scale=False)
    assert unscaled.X.max() == raw.max() and unscaled.X.min() == raw.min()


def test_reader_registered_and_errors(tmp_path, data_dir):
    reader = get_reader("frey-faces")
    assert reader.load(path=None, scale=True).X.shape == (1965, 560)
    with pytest.raises(InvalidInputError, match="not found"):
        load_frey_faces(str(tmp_path / "missing.mat"))
    bad = tmp_path / "bad.mat"
    from scipy.io import savemat

    savemat(str(bad), {"other": np.zeros((2, 2))})
    with pytest.raises(InvalidInputError, match="no variable 'ff'"):
        load_frey_faces(str(bad))
