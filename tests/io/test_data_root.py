"""Where the datasets are found: DKERNEL_DATA, else ../shared/data beside the checkout."""

from __future__ import annotations

import pytest

import dkernel.io.data as data
from dkernel.errors import InvalidInputError, SpecError
from dkernel.io.tables import load_statlog_landsat
from dkernel.jobs.spec import expand_env


def test_variable_wins(tmp_path, monkeypatch):
    monkeypatch.setenv("DKERNEL_DATA", str(tmp_path))
    assert data.data_root() == tmp_path
    assert expand_env("${DKERNEL_DATA}/x.csv", "data.path") == f"{tmp_path}/x.csv"


def test_checkout_fallback(tmp_path, monkeypatch):
    checkout = tmp_path / "dkernel"
    checkout.mkdir()
    (checkout / "pyproject.toml").write_text("")
    (tmp_path / "shared" / "data").mkdir(parents=True)
    monkeypatch.delenv("DKERNEL_DATA", raising=False)
    monkeypatch.setattr(data, "CHECKOUT", checkout)
    assert data.data_root() == tmp_path / "shared" / "data"
    assert data.expand_data_path("$DKERNEL_DATA/a") == tmp_path / "shared" / "data" / "a"


def test_no_data_names_the_variable_and_never_prints_it_unexpanded(tmp_path, monkeypatch):
    monkeypatch.delenv("DKERNEL_DATA", raising=False)
    monkeypatch.setattr(data, "CHECKOUT", tmp_path)
    assert data.data_root(required=False) is None
    with pytest.raises(SpecError, match="Set DKERNEL_DATA to the folder") as err:
        expand_env("${DKERNEL_DATA}/sat.trn", "data.path")
    assert "uses ${DKERNEL_DATA}, which is not set" in str(err.value)
    with pytest.raises(InvalidInputError, match="DKERNEL_DATA is not set") as err:
        load_statlog_landsat("${DKERNEL_DATA}")
    assert "not found under ${DKERNEL_DATA}" not in str(err.value)
