"""Fixtures for operations tests: a real ``dask scheduler`` + ``dask worker`` processes on
127.0.0.1, small job specs for every method, and store comparison helpers."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
START_TIMEOUT = 60.0
# what a dask nanny sets for its worker (distributed.nanny.pre-spawn-environ): one BLAS thread
# per task thread, so a task's floating-point result cannot depend on the BLAS thread split
WORKER_ENV = {
    **os.environ,
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "MALLOC_TRIM_THRESHOLD_": "65536",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class LoopbackCluster:
    """A scheduler and worker processes started with the ``dask`` command line."""

    address: str
    dashboard: str
    scheduler: subprocess.Popen
    workers: list[subprocess.Popen] = field(default_factory=list)
    log_dir: Path | None = None

    def start_worker(self, name: str, *, nanny: bool = False) -> subprocess.Popen:
        log = open(self.log_dir / f"worker-{name}.log", "w")  # noqa: SIM115
        proc = subprocess.Popen(
            [
                str(BIN / "dask"),
                "worker",
                self.address,
                "--host",
                "127.0.0.1",
                "--nthreads",
                "1",
                "--name",
                name,
                "--memory-limit",
                "2GiB",
                "--nanny" if nanny else "--no-nanny",
                "--no-dashboard",
                "--death-timeout",
                "30",
            ],
            cwd=REPO,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=WORKER_ENV,
        )
        self.workers.append(proc)
        return proc

    def wait_for_workers(self, n: int, timeout: float = START_TIMEOUT) -> None:
        from distributed import Client

        deadline = time.monotonic() + timeout
        with Client(self.address, timeout=timeout) as c:
            while len(c.scheduler_info()["workers"]) < n:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{n} workers did not register within {timeout} s")
                time.sleep(0.2)

    def stop(self) -> None:
        """Kill every process (each runs in its own session, so its children go too)."""
        for proc in [*self.workers, self.scheduler]:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        for proc in [*self.workers, self.scheduler]:
            proc.wait(timeout=30)


def start_loopback_cluster(log_dir: Path, n_workers: int = 2, nanny: bool = False):
    port, dash = free_port(), free_port()
    log = open(log_dir / "scheduler.log", "w")  # noqa: SIM115
    scheduler = subprocess.Popen(
        [
            str(BIN / "dask"),
            "scheduler",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--dashboard-address",
            f"127.0.0.1:{dash}",
        ],
        cwd=REPO,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    cluster = LoopbackCluster(
        address=f"tcp://127.0.0.1:{port}",
        dashboard=f"http://127.0.0.1:{dash}",
        scheduler=scheduler,
        log_dir=log_dir,
    )
    try:
        for i in range(n_workers):
            cluster.start_worker(f"w{i}", nanny=nanny)
        cluster.wait_for_workers(n_workers)
    except BaseException:
        cluster.stop()
        raise
    return cluster


@pytest.fixture(scope="module")
def loopback_cluster(tmp_path_factory):
    """``dask scheduler`` + two single-threaded ``dask worker`` processes on 127.0.0.1."""
    cluster = start_loopback_cluster(tmp_path_factory.mktemp("cluster-logs"))
    try:
        yield cluster
    finally:
        cluster.stop()


# ------------------------------------------------------------------------------------------
# small specs, one per method
# ------------------------------------------------------------------------------------------


def synthetic_image(path: Path, rows: int = 36, cols: int = 40) -> Path:
    """A 3-band image with four flat regions plus noise (``yxb``)."""
    rng = np.random.default_rng(0)
    img = np.zeros((rows, cols, 3), dtype=np.float32)
    centres = np.array([[0.1, 0.2, 0.8], [0.8, 0.1, 0.2], [0.3, 0.9, 0.4], [0.9, 0.8, 0.9]])
    region = (np.arange(rows)[:, None] >= rows // 2) * 2 + (np.arange(cols)[None] >= cols // 2)
    img[:] = centres[region]
    img += rng.normal(scale=0.03, size=img.shape).astype(np.float32)
    np.save(path, img)
    return path


def synthetic_pair(tmp: Path, rows: int = 36, cols: int = 40) -> tuple[Path, Path]:
    """Two 3-band GeoTIFF dates on one grid: the after date is a gain and offset of the
    before date plus noise, with one changed block."""
    import rasterio
    from rasterio.transform import from_origin

    before = np.load(synthetic_image(tmp / "pair-image.npy", rows, cols)).transpose(2, 0, 1)
    rng = np.random.default_rng(1)
    after = 1.5 * before + 0.2 + rng.normal(scale=0.02, size=before.shape)
    after[:, 4:12, 5:15] = after[:, 4:12, 5:15][::-1]  # swap the band order: a new spectrum
    paths = (tmp / "before.tif", tmp / "after.tif")
    for path, data in zip(paths, (before, after), strict=True):
        with rasterio.open(
            path,
            "w",
            driver="GTiff",
            width=cols,
            height=rows,
            count=3,
            dtype="float32",
            crs="EPSG:32618",
            transform=from_origin(500000.0, 4200000.0, 30.0, 30.0),
        ) as dst:
            dst.write(data.astype(np.float32))
    return paths


def method_specs(tmp: Path) -> dict[str, dict]:
    """A small, quick spec per job method (outputs filled in by the caller): each method's own
    example (``Method.example`` on its registry entry), a reader without a file given the
    synthetic image (``npy-raster``) or pair of dates (``geotiff-pair``) here."""
    from dkernel.jobs.registry import METHODS

    METHODS.load()
    files = {
        "npy-raster": lambda: {"path": str(synthetic_image(tmp / "image.npy"))},
        "geotiff-pair": lambda: dict(
            zip(("path", "after_path"), map(str, synthetic_pair(tmp)), strict=True)
        ),
    }
    specs = {}
    for name in METHODS.names():
        example = METHODS[name].example
        assert example, f"method {name!r} declares no example (Method.example): add one"
        data = dict(example["data"])
        if "path" not in data and data["reader"] in files:
            data.update(files[data["reader"]]())
        specs[name] = {"data": data, "params": dict(example.get("params", {}))}
    return specs


def write_spec(path: Path, method: str, body: dict, output: Path, seed: int = 0) -> Path:
    import yaml

    spec = {
        "name": f"ops-{method}",
        "seed": seed,
        "method": method,
        "data": body["data"],
        "params": body["params"],
        "output": str(output),
    }
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def store_arrays(path: Path) -> dict[str, np.ndarray]:
    """Every array of a results store, by ``group/name``."""
    import zarr

    out = {}
    root = zarr.open_group(str(path), mode="r")
    for group_name, group in root.groups():
        for name, arr in group.arrays():
            out[f"{group_name}/{name}"] = np.asarray(arr[...])
    return out


def assert_stores_identical(a: Path, b: Path) -> None:
    """Same arrays, same dtypes, same values bit for bit (NaN equal to NaN)."""
    A, B = store_arrays(a), store_arrays(b)
    assert sorted(A) == sorted(B)
    for key in A:
        assert A[key].dtype == B[key].dtype, key
        assert A[key].shape == B[key].shape, key
        if A[key].dtype.kind in "fc":
            assert np.array_equal(A[key], B[key], equal_nan=True), f"{key} differs"
        else:
            assert np.array_equal(A[key], B[key]), f"{key} differs"


@pytest.fixture(scope="session")
def ops():
    """The helpers above (test modules cannot import a conftest with --import-mode=importlib)."""
    from types import SimpleNamespace

    return SimpleNamespace(
        free_port=free_port,
        start_loopback_cluster=start_loopback_cluster,
        method_specs=method_specs,
        write_spec=write_spec,
        store_arrays=store_arrays,
        assert_stores_identical=assert_stores_identical,
        synthetic_image=synthetic_image,
    )
