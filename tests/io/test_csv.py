"""Reader ``csv`` (pandas.read_csv): quoting, encodings, and errors naming the right row,
against a slow obvious reference (Python's ``csv`` module)."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from dkernel.errors import InvalidInputError
from dkernel.io.readers.tables import load_csv


def reference(path, delimiter=",", header=False, label_column=None):
    """Python's csv module, float() of every field but the labels."""
    with open(path, newline="", encoding="utf-8") as fh:
        rows = [r for r in csv.reader(fh, delimiter=delimiter) if r]
    rows = rows[1:] if header else rows
    keep = [
        c
        for c in range(len(rows[0]))
        if c != (label_column % len(rows[0]) if label_column is not None else None)
    ]
    return np.array([[float(r[c]) for c in keep] for r in rows])


def test_quoted_field_with_the_delimiter_parses(tmp_path) -> None:
    path = tmp_path / "t.csv"
    path.write_text('x,y,site\n1.5,2,"field, north"\n3,4e-1,"field, south"\n-1,0,plain\n')
    data = load_csv(str(path), header=True, label_column=2)
    np.testing.assert_array_equal(data.X, reference(path, header=True, label_column=2))
    assert data.y.tolist() == [0, 1, 2] and data.feature_names == ["x", "y"]


def test_random_table_equals_the_reference(tmp_path) -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(500, 6))
    path = tmp_path / "t.csv"
    np.savetxt(path, X, delimiter=",", fmt="%.17g")
    np.testing.assert_array_equal(load_csv(str(path)).X, reference(path))


def test_bad_value_names_its_row_after_a_quoted_field(tmp_path) -> None:
    path = tmp_path / "t.csv"
    path.write_text('x,site\n1,"a, b"\n2,"c, d"\nthree,"e, f"\n')
    with pytest.raises(InvalidInputError, match=r"row 4, column 0 \('x'\) holds 'three'"):
        load_csv(str(path), header=True, label_column=1)


def test_short_and_long_rows_are_named(tmp_path) -> None:
    (tmp_path / "s.csv").write_text("1,2,3\n\n4,5,6\n7,8\n")
    with pytest.raises(InvalidInputError, match=r"row 3 has 2 fields, expected 3"):
        load_csv(str(tmp_path / "s.csv"))
    (tmp_path / "l.csv").write_text("1,2\n3,4\n5,6,7\n")
    with pytest.raises(InvalidInputError, match=r"line 3 has 3 fields, expected 2"):
        load_csv(str(tmp_path / "l.csv"))
    # an empty last field is a missing value, not a short row
    (tmp_path / "e.csv").write_text("1,2,3\n4,5,\n")
    assert np.isnan(load_csv(str(tmp_path / "e.csv")).X[1, 2])


def test_encodings(tmp_path) -> None:
    path = tmp_path / "t.csv"
    path.write_bytes("température,b\n1,2\n3,4\n".encode("latin-1"))
    with pytest.raises(InvalidInputError, match=r"could not read .*codec.*data\.encoding"):
        load_csv(str(path), header=True)
    data = load_csv(str(path), header=True, encoding="latin-1")
    assert data.feature_names == ["température", "b"]


def test_whitespace_delimiter_and_missing_values(tmp_path) -> None:
    path = tmp_path / "t.txt"
    path.write_text("1  2 ?\n 3 4   5\n")
    data = load_csv(str(path), delimiter=None)
    np.testing.assert_array_equal(data.X, [[1, 2, np.nan], [3, 4, 5]])


def test_columns_by_header_name_equal_columns_by_index(tmp_path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("id,x,species,y\n1,0.5,a,2\n2,1.5,b,3\n3,2.5,a,4\n")
    by_name = load_csv(str(path), header=True, label_column="species", skip_columns=["id"])
    by_index = load_csv(str(path), header=True, label_column=2, skip_columns=[0])
    np.testing.assert_array_equal(by_name.X, by_index.X)
    np.testing.assert_array_equal(by_name.y, by_index.y)
    assert by_name.feature_names == ["x", "y"] and by_name.y.tolist() == [0, 1, 0]


@pytest.mark.parametrize(
    ("header", "label_column", "match"),
    [
        (False, "species", r"read without a header; set data.header: true"),
        (True, "specie", r"no column named 'specie'.*Did you mean 'species'\?"),
        (True, "x", r"2 columns named 'x'; give the column's index"),
    ],
)
def test_column_names_are_checked_against_the_header(tmp_path, header, label_column, match):
    path = tmp_path / "t.csv"
    path.write_text("x,x,species\n1,2,a\n3,4,b\n")
    with pytest.raises(InvalidInputError, match=match):
        load_csv(str(path), header=header, label_column=label_column)
