"""UCI table loaders on the real files in DKERNEL_DATA."""

from __future__ import annotations

import numpy as np
import pytest

from dkernel.errors import InvalidInputError
from dkernel.io.registry import get_reader
from dkernel.io.tables import load_ecoli, load_statlog_landsat, load_wisconsin


def test_wisconsin_real_missing_values(data_dir):
    d = load_wisconsin(data_dir)
    assert d.X.shape == (699, 9)
    nan = np.isnan(d.X)
    assert nan.sum() == 16 and nan[:, 5].sum() == 16  # all in 'bare nuclei'
    assert np.bincount(d.y).tolist() == [458, 241]
    assert np.nanmin(d.X) == 1 and np.nanmax(d.X) == 10


def test_statlog_landsat(data_dir):
    tr = load_statlog_landsat(data_dir, "train")
    te = load_statlog_landsat(data_dir, "test")
    both = load_statlog_landsat(data_dir)
    assert tr.X.shape == (4435, 36) and te.X.shape == (2000, 36) and both.X.shape == (6435, 36)
    assert np.bincount(tr.y).tolist() == [1072, 479, 961, 415, 470, 1038]
    assert tr.X[0, :4].tolist() == [92, 115, 120, 94]
    assert both.meta["classes"]["5"] == "very damp grey soil"
    with pytest.raises(InvalidInputError, match="split"):
        load_statlog_landsat(data_dir, "val")


def test_ecoli(data_dir):
    d = load_ecoli(data_dir)
    assert d.X.shape == (336, 7)
    counts = dict(zip(d.meta["classes"].values(), np.bincount(d.y).tolist(), strict=True))
    assert counts == {
        "cp": 143,
        "im": 77,
        "imL": 2,
        "imS": 2,
        "imU": 35,
        "om": 20,
        "omL": 5,
        "pp": 52,
    }


def test_registered_readers(data_dir):
    d = get_reader("wisconsin").load(data_dir=str(data_dir))
    assert d.X.shape == (699, 9)
    assert (
        get_reader("statlog-landsat").load(data_dir=str(data_dir), split="test").X.shape[0] == 2000
    )
    assert get_reader("ecoli").load(data_dir=str(data_dir)).y.max() == 7


def test_missing_folder_is_a_clear_error(tmp_path):
    with pytest.raises(InvalidInputError, match="not found"):
        load_wisconsin(tmp_path)
