"""Reliability and security (issue 54): the quick-look helper process, transient
results stores, change detection of a scene against itself, and RBF widths beyond what the
numerics can do. Jobs run through ``dkernel.cli.main``; each case asserts the exit code, the
message, no traceback and bounded time.
"""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

import numpy as np
import pytest
import yaml
import zarr

from tests.cli_run import run_cli
from tests.limits import JOB_S, REFUSAL_S

# ------------------------------------------------------------------------------------------
# helpers
# ------------------------------------------------------------------------------------------


def _geotiff(path: Path, data: np.ndarray) -> Path:
    """``data`` (band, y, x) as a float32 GeoTIFF in EPSG:32618."""
    import rasterio
    from affine import Affine

    profile = dict(driver="GTiff", width=data.shape[2], height=data.shape[1])
    profile |= dict(count=data.shape[0], dtype="float32", crs="EPSG:32618")
    profile |= dict(transform=Affine(30.0, 0, 500000.0, 0, -30.0, 4e6))
    with rasterio.open(path, "w", **profile) as dst:
        dst.write(data.astype(np.float32))
    return path


def _scene(rows: int = 24, cols: int = 28) -> np.ndarray:
    """Three bands, four flat regions plus noise."""
    rng = np.random.default_rng(0)
    centres = np.array([[0.1, 0.2, 0.8], [0.8, 0.1, 0.2], [0.3, 0.9, 0.4], [0.9, 0.8, 0.9]])
    region = (np.arange(rows)[:, None] >= rows // 2) * 2 + (np.arange(cols)[None] >= cols // 2)
    return centres[region].transpose(2, 0, 1) + rng.normal(scale=0.03, size=(3, rows, cols))


_run = run_cli


def _write_spec(path: Path, method: str, data: dict, params: dict, output: str) -> Path:
    body = {"name": "round4", "seed": 0, "method": method, "data": data}
    body |= {"params": params, "output": output}
    path.write_text(yaml.safe_dump(body, sort_keys=False))
    return path


def _status(store: Path) -> str | None:
    return zarr.open_group(str(store), mode="r").attrs.get("status")


def _fresh_helper() -> None:
    """No shared helper left from an earlier test: the next job starts its own."""
    from dkernel import _helper

    helper = _helper.shared_helper(start=False)
    if helper is not None:
        helper.close()


MSSC_IMAGE = {
    "n_clusters": 4,
    "n_seeds": 60,
    "density_max_samples": 600,
    "n_rff": 200,
    "n_init": 5,
    "write_geotiff": False,
    "write_png": True,
}


@pytest.fixture()
def image_job(tmp_path, monkeypatch, client):
    """An MSSC job drawing a quick-look (the helper's work) of a 24 × 28 GeoTIFF, run from
    ``tmp_path / 'cwd'`` into ``tmp_path / 'root'``."""
    monkeypatch.delenv("DKERNEL_OUTPUT_ROOT", raising=False)
    cwd, root = tmp_path / "cwd", tmp_path / "root"
    cwd.mkdir()
    root.mkdir()
    tif = _geotiff(tmp_path / "image.tif", _scene())
    data = {"reader": "geotiff", "path": str(tif), "coord_scale": 0.25}
    spec = _write_spec(tmp_path / "job.yaml", "mssc", data, MSSC_IMAGE, "job.zarr")
    monkeypatch.chdir(cwd)
    args = ["run", str(spec), "--output-root", str(root), "--no-progress"]
    args += ["--scheduler", client.scheduler.address]
    return {"cwd": cwd, "root": root, "args": args}


# ------------------------------------------------------------------------------------------
# 1. the helper process: nothing from the working directory runs, a stopped one cannot block
# ------------------------------------------------------------------------------------------


def test_a_package_planted_in_the_working_directory_never_runs_in_the_helper(
    image_job, tmp_path, monkeypatch
):
    """A ``dkernel/`` package and a ``numpy.py`` in the working directory (a shared folder
    such as /tmp): the helper imports neither (it draws the quick-look), the job completes."""
    from dkernel import _helper

    marker = tmp_path / "planted-code-ran"
    planted = image_job["cwd"] / "dkernel"
    planted.mkdir()
    (planted / "__init__.py").write_text(
        f"open({str(marker)!r}, 'a').write('dkernel/__init__.py ran\\n')\n"
    )
    (planted / "_helper.py").write_text(f"open({str(marker)!r}, 'a').write('_helper ran\\n')\n")
    (image_job["cwd"] / "numpy.py").write_text(
        f"open({str(marker)!r}, 'a').write('numpy.py ran\\n')\n"
        "raise ImportError('a planted numpy')\n"
    )
    # relative PYTHONPATH entries name the working directory too
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(["", ".", "dkernel"]))
    _fresh_helper()
    code, text = _run(image_job["args"])
    assert code == 0, text
    assert not marker.exists(), marker.read_text()
    store = image_job["root"] / "job.zarr"
    assert _status(store) == "complete"
    assert (image_job["root"] / "job.quicklook.png").stat().st_size > 0
    # the helper drew it and is still there, in the planted folder, with the real packages
    helper = _helper.shared_helper(start=False)
    assert helper is not None, "the helper died: the job drew the quick-look itself"
    assert helper.call(os.getcwd) == str(image_job["cwd"])
    assert not marker.exists()


def _plant_as_nobody(folder: Path, marker: Path) -> None:
    """Another local user (uid 65534) plants ``dkernel/`` and ``numpy.py`` in ``folder``."""
    import shutil
    import subprocess
    import sys

    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("setpriv is not installed (util-linux): cannot act as another user")
    if os.geteuid() != 0:
        pytest.skip("acting as another uid needs root")
    payload = (
        "import os\n"
        f"open({str(marker)!r}, 'a').write(__name__ + ' ran as ' + str(os.getuid()) + '\\n')\n"
    )
    plant = (
        "import os, sys\n"
        "folder, payload = sys.argv[1], sys.argv[2]\n"
        "os.mkdir(os.path.join(folder, 'dkernel'))\n"
        "for name in ('dkernel/__init__.py', 'dkernel/_helper.py', 'numpy.py'):\n"
        "    with open(os.path.join(folder, name), 'w') as f:\n"
        "        f.write(payload)\n"
        "print('planted as', os.getuid())\n"
    )
    proc = subprocess.run(
        [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-c"]
        + [plant, str(folder), payload],
        capture_output=True,
        text=True,
        timeout=60,
        cwd="/",
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/tmp"},
    )
    assert "planted as 65534" in proc.stdout, proc.stdout + proc.stderr


def test_a_package_another_user_plants_in_a_shared_folder_never_runs(image_job, monkeypatch):
    """Two real users: uid 65534 plants ``dkernel/`` and ``numpy.py`` in a world-writable
    folder (as /tmp is); this user runs an image job from there. The control proves the plant
    is live (a plain ``python -c 'import dkernel'`` there runs it); the job never does."""
    import subprocess
    import sys
    import tempfile

    shared = Path(tempfile.mkdtemp(prefix="dkernel-shared-", dir="/tmp"))
    try:
        shared.chmod(0o1777)
        marker = shared / "planted-code-ran"
        _plant_as_nobody(shared, marker)
        control = subprocess.run(
            [sys.executable, "-c", "import dkernel"], cwd=shared, timeout=120, check=False
        )
        assert control.returncode == 0 and "dkernel ran as 0" in marker.read_text()
        marker.unlink()
        monkeypatch.chdir(shared)
        _fresh_helper()
        code, text = _run(image_job["args"])
        assert code == 0, text
        assert not marker.exists(), marker.read_text()
        assert _status(image_job["root"] / "job.zarr") == "complete"
        assert (image_job["root"] / "job.quicklook.png").stat().st_size > 0
    finally:
        import shutil

        shutil.rmtree(shared, ignore_errors=True)


def test_a_stopped_helper_does_not_block_the_job(image_job, monkeypatch):
    """A helper stopped with SIGSTOP: the job waits REPLY_TIMEOUT_S for it, kills it, draws
    the quick-look itself and completes."""
    from dkernel import _helper

    monkeypatch.setattr(_helper, "REPLY_TIMEOUT_S", 3.0)
    _fresh_helper()
    helper = _helper.shared_helper()
    assert helper is not None
    os.kill(helper._process.pid, signal.SIGSTOP)
    try:
        code, text = _run(image_job["args"], limit=JOB_S)
        assert code == 0, text
        assert "failed" not in text
        assert _status(image_job["root"] / "job.zarr") == "complete"
        assert (image_job["root"] / "job.quicklook.png").stat().st_size > 0
        assert helper._process.poll() is not None, "the stopped helper was left behind"
        assert _helper.shared_helper(start=False) is None
    finally:
        if helper._process.poll() is None:
            helper._process.kill()
            helper._process.wait()


def test_call_within_kills_a_helper_that_does_not_reply():
    import operator

    from dkernel._helper import HelperProcess, HelperUnavailable

    helper = HelperProcess()
    try:
        assert helper.call_within(30, operator.add, 1, 2) == 3
        os.kill(helper._process.pid, signal.SIGSTOP)
        t = time.perf_counter()
        with pytest.raises(HelperUnavailable, match=r"did not reply within 1 s"):
            helper.call_within(1.0, operator.add, 2, 3)
        assert time.perf_counter() - t < 15
        assert helper._process.wait(timeout=10) == -signal.SIGKILL
        with pytest.raises(HelperUnavailable):
            helper.call(operator.add, 1, 1)
    finally:
        helper.close()


def test_closing_a_stopped_helper_in_the_middle_of_a_call_returns():
    """close() (also the exit hook) with a call in flight on a stopped helper: it kills the
    helper instead of waiting for the streams forever."""
    import operator

    from dkernel._helper import HelperProcess

    helper = HelperProcess()
    os.kill(helper._process.pid, signal.SIGSTOP)
    future = helper.submit(operator.add, 1, 2)
    time.sleep(0.2)  # the call is writing or waiting for its reply
    t = time.perf_counter()
    helper.close()
    assert time.perf_counter() - t < 30
    assert helper._process.returncode is not None
    assert future.exception(timeout=10) is not None


# ------------------------------------------------------------------------------------------
# 2. memory:// results stores: refused before any work
# ------------------------------------------------------------------------------------------


@pytest.fixture()
def table_job(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DKERNEL_OUTPUT_ROOT", raising=False)
    rng = np.random.default_rng(0)
    np.savetxt(tmp_path / "data.csv", rng.normal(size=(30, 3)), delimiter=",", fmt="%.4f")

    def spec(output: str = "out.zarr") -> Path:
        data = {"reader": "csv", "path": "data.csv"}
        return _write_spec(tmp_path / "job.yaml", "rbf-spectral", data, {"n_clusters": 2}, output)

    return spec


MEMORY_FIX = (
    r"'memory://bkt/\S+': a memory:// store lives in this process's memory only.*vanish.*"
    r"local path or an object-store URL"
)


@pytest.mark.parametrize(
    "how",
    ["--output", "spec output", "--output-root", "DKERNEL_OUTPUT_ROOT", "validate"],
)
def test_a_memory_results_store_is_refused_before_any_work(table_job, tmp_path, monkeypatch, how):
    url = "memory://bkt/x.zarr"
    command = ["validate"] if how == "validate" else ["run", "--workers", "1", "--threads", "1"]
    spec = table_job(url if how in ("spec output", "validate") else "out.zarr")
    args = [*command, str(spec)]
    if how == "--output":
        args += ["--output", url]
    elif how == "--output-root":
        args += ["--output-root", "memory://bkt/results"]
    elif how == "DKERNEL_OUTPUT_ROOT":
        monkeypatch.setenv("DKERNEL_OUTPUT_ROOT", "memory://bkt/results")
    if command[0] == "run":
        args += ["--no-progress"]
    code, text = _run(args, limit=REFUSAL_S)
    assert code == 2, text
    assert re.search(MEMORY_FIX, text, re.S), text
    assert not (tmp_path / "out.zarr").exists()


def test_a_memory_store_is_still_a_library_store():
    """Python callers keep in-process memory:// stores (notebooks, tests)."""
    from dkernel.storage.remote import as_location

    assert as_location("memory://bkt/x.zarr") == "memory://bkt/x.zarr"


# ------------------------------------------------------------------------------------------
# 3. change detection of a scene against itself: no change
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["mad", "irmad", "kernel"])
def test_identical_dates_give_no_changed_pixel(tmp_path, monkeypatch, client, method):
    """Before and after the same file, and the after date a gain and an offset of it (which
    MAD ignores): every valid pixel is 'no change', through the job."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DKERNEL_OUTPUT_ROOT", raising=False)
    scene = _scene(36, 40)
    before = _geotiff(tmp_path / "before.tif", scene)
    for name, after in [
        ("same", before),
        ("gain", _geotiff(tmp_path / "gain.tif", 2.0 * scene + 0.5)),
    ]:
        data = {"reader": "geotiff-pair", "path": str(before), "after_path": str(after)}
        params = {"method": method, "n_landmarks": 60, "max_samples": 800}
        params |= {"write_geotiff": False, "write_png": False}
        spec = _write_spec(tmp_path / f"{name}.yaml", "change-detection", data, params, name)
        args = ["run", str(spec), "--output", str(tmp_path / f"{name}.zarr"), "--no-progress"]
        code, text = _run([*args, "--scheduler", client.scheduler.address])
        assert code == 0, text
        from dkernel.storage import open_results

        labels = open_results(tmp_path / f"{name}.zarr")["change"].to_dataset()["labels"].values
        assert (labels >= 0).all()
        attrs = zarr.open_group(str(tmp_path / f"{name}.zarr"), mode="r")["change"].attrs
        assert attrs["no_change"] is True and attrs["threshold"] is None
        assert int((labels == 1).sum()) == 0, f"{method}/{name}: {(labels == 1).mean():.1%}"


@pytest.mark.parametrize("method", ["mad", "irmad", "kernel"])
@pytest.mark.parametrize("threshold", ["otsu", "mixture", 11.34])
def test_identical_dates_give_no_change_with_every_threshold(tmp_path, method, threshold):
    import dkernel

    before = _geotiff(tmp_path / "before.tif", _scene(36, 40))
    kw = {"n_landmarks": 60} if method == "kernel" else {}
    out = dkernel.detect_change(before, before, method=method, threshold=threshold, **kw)
    assert int((out["labels"].values == 1).sum()) == 0


def test_a_real_change_is_still_found_and_unchanged(tmp_path, monkeypatch):
    """The no-change test leaves a pair with real change alone: it says 'change', and the
    labels, intensities and threshold are those of the fit without the test."""
    import dkernel
    from dkernel.change import estimator

    scene = _scene(36, 40)
    rng = np.random.default_rng(1)
    after = 1.5 * scene + 0.2 + rng.normal(scale=0.02, size=scene.shape)
    after[:, 4:12, 5:15] = after[:, 4:12, 5:15][::-1]
    truth = np.zeros(scene.shape[1:], bool)
    truth[4:12, 5:15] = True
    b = _geotiff(tmp_path / "b.tif", scene)
    a = _geotiff(tmp_path / "a.tif", after)
    methods = ("mad", "irmad", "kernel")
    kw = {"n_landmarks": 60, "random_state": 0}
    now = {m: dkernel.detect_change(b, a, method=m, **kw) for m in methods}
    monkeypatch.setattr(estimator, "same_up_to_affine", lambda X, Y: False)
    for method in methods:
        without = dkernel.detect_change(b, a, method=method, **kw)
        found = now[method]["labels"].values == 1
        assert now[method].attrs["no_change"] is False
        assert (found & truth).sum() >= 0.8 * truth.sum(), method
        np.testing.assert_array_equal(now[method]["labels"].values, without["labels"].values)
        np.testing.assert_array_equal(now[method]["intensity"].values, without["intensity"].values)
        assert now[method].attrs["threshold"] == without.attrs["threshold"]


def test_the_no_change_test_tells_an_affine_copy_from_a_faint_change():
    from dkernel.change.mad import same_up_to_affine

    rng = np.random.default_rng(0)
    X = rng.uniform(0, 1, (2000, 4))
    A = rng.normal(size=(4, 4))
    assert same_up_to_affine(X, X)
    assert same_up_to_affine(X, (X @ A + 3.0).astype(np.float32))
    faint = X @ A + 3.0
    faint[7] += 1e-3  # one pixel in 2000, by a thousandth
    assert not same_up_to_affine(X, faint)
    assert not same_up_to_affine(X, X @ A + 1e-4 * rng.normal(size=X.shape))


# ------------------------------------------------------------------------------------------
# 4. RBF widths the numerics cannot use
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("sigma", [1e-300, 1e300, 1e-20, 1e20])
def test_kernel_kmeans_with_an_unusable_sigma_fails_with_a_message(table_job, sigma):
    spec = table_job()
    body = yaml.safe_load(spec.read_text())
    body["method"] = "kernel-kmeans"
    body["params"] = {"n_clusters": 2, "sigma": sigma}
    spec.write_text(yaml.safe_dump(body, sort_keys=False))
    args = ["run", str(spec), "--workers", "1", "--threads", "1", "--no-progress"]
    code, text = _run(args)
    assert code == 2, text
    # refused by the job's parameter check, derived from KernelKMeans' constraints
    assert re.search(r"params\.sigma: must be a number >= 1e-18 and <= 1e\+18", text), text
    assert "ZeroDivisionError" not in text and "OverflowError" not in text


@pytest.mark.parametrize("sigma", [1e-300, 1e300])
def test_the_rbf_kernel_refuses_an_unusable_sigma(sigma):
    from dkernel.errors import InvalidInputError
    from dkernel.kernels.registry import make_kernel

    with pytest.raises(InvalidInputError, match=r"must lie in \[1e-18, 1e\+18\]"):
        make_kernel("rbf", sigma=sigma)
    assert make_kernel("rbf", sigma=1e-18).params["sigma"] == 1e-18
