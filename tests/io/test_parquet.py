"""Reader ``parquet`` (pyarrow) against pandas reading the same file."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dkernel.errors import InvalidInputError, SpecError
from dkernel.io.readers.parquet import load_parquet
from dkernel.jobs.spec import validate_spec


@pytest.fixture()
def frame() -> pd.DataFrame:
    rng = np.random.default_rng(3)
    df = pd.DataFrame(rng.normal(size=(50, 3)), columns=["x", "y", "z"])
    df["count"] = pd.array(rng.integers(0, 9, 50), dtype="Int64")
    df.loc[[3, 7], "count"] = pd.NA
    df["flag"] = rng.random(50) > 0.5
    df["name"] = [f"site {i % 4}" for i in range(50)]
    return df


def test_parquet_equals_pandas(tmp_path, frame) -> None:
    path = tmp_path / "t.parquet"
    frame.to_parquet(path)
    data = load_parquet(str(path), columns=["x", "y", "z", "count", "flag"], label_column="name")
    expected = frame[["x", "y", "z", "count", "flag"]].astype("float64").to_numpy(na_value=np.nan)
    np.testing.assert_array_equal(data.X, expected)
    assert np.isnan(data.X[[3, 7], 3]).all() and data.meta["missing"] == 2
    assert data.feature_names == ["x", "y", "z", "count", "flag"]
    np.testing.assert_array_equal(data.y, pd.factorize(frame["name"], sort=True)[0])


def test_parquet_folder_is_one_table(tmp_path, frame) -> None:
    folder = tmp_path / "parts"
    folder.mkdir()
    frame.iloc[:20].to_parquet(folder / "part-0.parquet")
    frame.iloc[20:].to_parquet(folder / "part-1.parquet")
    data = load_parquet(str(folder), columns=["x", "y"])
    np.testing.assert_array_equal(data.X, frame[["x", "y"]].to_numpy())


def test_text_column_is_named(tmp_path, frame) -> None:
    frame.to_parquet(tmp_path / "t.parquet")
    with pytest.raises(
        InvalidInputError, match=r"column 'name' holds (large_)?string, not numbers"
    ):
        load_parquet(str(tmp_path / "t.parquet"))
    with pytest.raises(InvalidInputError, match=r"has no column 'w'; its columns are x, y"):
        load_parquet(str(tmp_path / "t.parquet"), columns=["w"])


def test_not_parquet_is_a_message(tmp_path) -> None:
    (tmp_path / "t.parquet").write_text("a,b\n1,2\n")
    with pytest.raises(InvalidInputError, match=r"could not read .*t\.parquet as Parquet"):
        load_parquet(str(tmp_path / "t.parquet"))


def test_parquet_reader_is_registered_and_validated(tmp_path, frame, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    frame.to_parquet(tmp_path / "t.parquet")
    spec = {
        "name": "p",
        "data": {"reader": "parquet", "path": "t.parquet", "columns": ["x", "y"]},
        "method": "spectral-clustering",
        "params": {"n_clusters": 2},
        "output": "out.zarr",
    }
    assert validate_spec(spec).data["path"] == str(tmp_path / "t.parquet")
    spec["data"]["path"] = "missing.parquet"
    with pytest.raises(SpecError, match="file not found"):
        validate_spec(spec)
