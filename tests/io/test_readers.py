"""The table readers of ``dkernel.io.readers.tables``."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from dkernel.io.readers.tables import SKLEARN_DATASETS, load_sklearn


@pytest.mark.parametrize("name", SKLEARN_DATASETS)
def test_sklearn_reader_gives_what_sklearn_gives(name):
    """Read from scikit-learn's files without scikit-learn: the same table, classes and column
    names as ``sklearn.datasets.load_<name>``."""
    from sklearn import datasets

    bunch = getattr(datasets, f"load_{name}")()
    data = load_sklearn(name)
    np.testing.assert_array_equal(data.X, bunch.data)
    assert data.X.dtype == np.float64 and data.X.flags.c_contiguous
    np.testing.assert_array_equal(data.y, bunch.target)
    assert data.y.dtype == bunch.target.dtype
    assert data.feature_names == [str(f) for f in bunch.feature_names]
    assert data.meta == {"source": f"sklearn.datasets.load_{name}"}


def test_sklearn_reader_does_not_import_sklearn():
    code = (
        "import sys\n"
        "from dkernel.io.registry import get_reader\n"
        "data = get_reader('sklearn').load(name='wine')\n"
        "print(data.X.shape, 'sklearn' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["(178,", "13)", "False"]


def test_the_image_readers_load_their_implementation_on_first_use():
    code = (
        "import sys\n"
        "from dkernel.io.registry import get_reader\n"
        "reader = get_reader('demo-landsat')\n"
        "print('dkernel.io.raster' in sys.modules)\n"
        "data = reader.load(coord_scale=0.0)\n"
        "print('dkernel.io.raster' in sys.modules, data.raster.shape)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True", "(3,", "718,", "791)"]
