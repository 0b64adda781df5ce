"""Shared fixtures: the data directory, a distributed LocalCluster, small datasets."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]


def _data_dir() -> Path | None:
    env = os.environ.get("DKERNEL_DATA")
    if env:
        return Path(env)
    candidate = REPO.parent / "shared" / "data"
    return candidate if candidate.exists() else None


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The real datasets (``DKERNEL_DATA``, default ``../shared/data``)."""
    path = _data_dir()
    if path is None or not path.exists():
        pytest.fail("DKERNEL_DATA is not set and ../shared/data does not exist")
    os.environ.setdefault("DKERNEL_DATA", str(path))
    return path


@pytest.fixture(scope="session")
def client():
    """A distributed LocalCluster with two single-threaded process workers on 127.0.0.1."""
    from dkernel.runtime import connect

    c = connect(n_workers=2, threads_per_worker=1, quiet=True)
    try:
        yield c
    finally:
        c.close()


@pytest.fixture()
def rng() -> np.random.Generator:
    return np.random.default_rng(0)


@pytest.fixture(params=["numpy", "dask"])
def array_kind(request) -> str:
    """Run a test on NumPy input and on Dask input."""
    return request.param
