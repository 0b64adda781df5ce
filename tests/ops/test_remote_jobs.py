"""Jobs whose results store is on S3 (issue 30, part A), with real ``dkernel`` subprocesses
and a real S3 server (moto, the ``s3_server`` fixture) on 127.0.0.1.

* a job written to ``--output-root s3://bucket/`` with a relative output (joined as a URL,
  no local ``s3:`` folder), its storage options (with a secret) from the spec: the secret is
  neither logged nor stored; ``dkernel show s3://...`` reads it back;
* ``--resume`` of a SIGKILLed job whose store is on S3 gives identical arrays;
* two writers racing on one S3 store: exactly one wins, the other exits 2 naming it;
* bad outputs (unknown scheme, read-only scheme, missing bucket, wrong credentials, an
  unreachable endpoint): exit 2 at once, a clear message, no traceback, nothing written.

The inputs are local (scikit-learn's wine table): remote inputs are part B's.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
import zarr

REPO = Path(__file__).resolve().parents[2]
JOB_TIMEOUT = 300
SECRET = "dkernel-test"  # the moto fixture's secret key: must appear in no log or object
_AWS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL", "AWS_S3_ENDPOINT")


def _spec(tmp: Path, endpoint: str | None = None, output: str = "results/wine.zarr") -> Path:
    spec = {
        "name": "wine-s3",
        "data": {"reader": "sklearn", "name": "wine", "standardize": True},
        "method": "rbf-spectral",
        "params": {"n_clusters": 3, "n_init": 5},
        "output": output,
    }
    if endpoint:
        spec["store_options"] = {"endpoint": endpoint, "key": SECRET, "secret": SECRET}
    path = tmp / "wine-s3.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def _cli(spec: Path | str, *args: str, env: dict | None = None, command: str = "run"):
    env = {**os.environ, **(env or {})}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
    cmd = [sys.executable, "-m", "dkernel.cli", command, str(spec), *args]
    if command == "run":
        cmd += ["--no-progress", "--workers", "1", "--threads", "1"]
    return subprocess.Popen(
        cmd,
        cwd=spec.parent if isinstance(spec, Path) else None,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _finish(proc: subprocess.Popen, timeout: float = JOB_TIMEOUT) -> tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        raise
    return proc.returncode, out, err


def _fs():
    import s3fs

    return s3fs.S3FileSystem(skip_instance_cache=True)


def _wait_for(key: str, proc: subprocess.Popen) -> None:
    fs, deadline = _fs(), time.monotonic() + JOB_TIMEOUT
    while not fs.exists(key):
        if proc.poll() is not None:
            pytest.fail(f"the writer ended before {key} appeared: {proc.stderr.read()}")
        if time.monotonic() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            pytest.fail(f"{key} did not appear")
        time.sleep(0.1)
        fs.invalidate_cache()


@pytest.fixture(scope="module")
def reference(s3_server, tmp_path_factory):
    """One job written to S3 with ``--output-root s3://BUCKET/`` and the spec's
    ``store_options`` (the environment holds no credentials): (url, stderr, tmp)."""
    tmp = tmp_path_factory.mktemp("remote")
    bucket = f"dk-ref-{os.getpid()}"
    _fs().mkdir(bucket)
    spec = _spec(tmp, endpoint=s3_server)
    env = {key: "" for key in _AWS}  # only the spec's options can reach the server
    code, _, err = _finish(_cli(spec, "--output-root", f"s3://{bucket}/", env=env))
    assert code == 0, err
    return f"s3://{bucket}/results/wine.zarr", err, tmp


def test_job_writes_its_store_to_s3(reference) -> None:
    url, err, tmp = reference
    assert "complete in" in err and url in err
    assert not (tmp / "s3:").exists() and not (tmp / "results").exists()
    root = zarr.open_group(url, mode="r")
    assert root.attrs["status"] == "complete"
    assert root.attrs["job"]["store_options"] == {"endpoint": "***", "key": "***", "secret": "***"}
    fs = _fs()
    keys = fs.find(url)
    assert any(k.endswith("labels/labels/zarr.json") for k in keys)
    assert not any(k.endswith("dkernel.lease") for k in keys)  # released
    for key in keys:  # the secret in no metadata object (chunks are binary numbers)
        if key.endswith("zarr.json"):
            assert SECRET.encode() not in fs.cat(key), key
    assert SECRET not in err


def test_show_reads_the_store_on_s3(reference) -> None:
    url, _, tmp = reference
    code, out, err = _finish(_cli(url, command="show"), timeout=120)
    assert code == 0, err
    assert "status:   complete" in out and "/labels/labels" in out


def test_resume_of_a_sigkilled_job_on_s3(reference, s3_bucket, tmp_path, ops) -> None:
    ref_url, _, _ = reference
    url = f"s3://{s3_bucket}/killed.zarr"
    spec = _spec(tmp_path)
    first = _cli(spec, "--output", url)
    _wait_for(f"{s3_bucket}/killed.zarr/kernel/zarr.json", first)
    os.killpg(first.pid, signal.SIGKILL)
    first.wait(timeout=30)
    assert zarr.open_group(url, mode="r").attrs["status"] == "running"
    assert _fs().exists(f"{s3_bucket}/killed.zarr/dkernel.lease")  # outlives its writer
    code, _, err = _finish(_cli(spec, "--output", url, "--resume"))
    assert code == 0, err
    assert f"took over the stale lease of pid {first.pid}" in err
    assert zarr.open_group(url, mode="r").attrs["status"] == "complete"
    ops.assert_stores_identical(url, ref_url)


def test_two_writers_race_on_one_s3_store(s3_bucket, tmp_path) -> None:
    url = f"s3://{s3_bucket}/race.zarr"
    spec = _spec(tmp_path)
    procs = [_cli(spec, "--output", url, "--overwrite") for _ in range(2)]
    results = [_finish(p) for p in procs]
    codes = sorted(code for code, _, _ in results)
    assert codes == [0, 2], results
    winner = next(p for p, r in zip(procs, results, strict=True) if r[0] == 0)
    loser_err = next(r[2] for r in results if r[0] == 2)
    assert f"is being written by pid {winner.pid} on host {socket.gethostname()}" in loser_err
    assert "Traceback" not in loser_err
    assert zarr.open_group(url, mode="r").attrs["status"] == "complete"


@pytest.mark.parametrize(
    ("output", "message"),
    [
        ("ftp://host/x.zarr", "unknown URL scheme 'ftp'"),
        ("s3://dk-no-such-bucket/x.zarr", "the bucket 'dk-no-such-bucket' does not exist"),
        ("https://host/x.zarr", "read-only"),
    ],
)
def test_bad_output_exits_2_writing_nothing(s3_server, tmp_path, output, message) -> None:
    spec = _spec(tmp_path, output=output)
    code, _, err = _finish(_cli(spec), timeout=120)
    assert code == 2, err
    assert message in err and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["wine-s3.yaml"]


def test_unreachable_endpoint_exits_2_in_bounded_time(tmp_path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}", "AWS_ACCESS_KEY_ID": "x"}
    env["AWS_SECRET_ACCESS_KEY"] = "y"
    spec = _spec(tmp_path, output="s3://dk-bucket/x.zarr")
    t = time.monotonic()
    code, _, err = _finish(_cli(spec, env=env), timeout=120)
    assert code == 2, err
    assert "endpoint cannot be reached" in err and "Traceback" not in err
    assert time.monotonic() - t < 60
    assert sorted(p.name for p in tmp_path.iterdir()) == ["wine-s3.yaml"]


def test_image_job_writes_store_and_map_files_to_s3(s3_bucket, tmp_path, ops) -> None:
    """MSSC on a local image (remote inputs are part B's) into a store on S3: the label COG,
    class table and quick-look are written locally, then uploaded beside the store."""
    body = ops.method_specs(tmp_path)["mssc"]
    body["params"].update(write_geotiff=True, write_png=True)
    url = f"s3://{s3_bucket}/maps/img.zarr"
    spec = ops.write_spec(tmp_path / "img.yaml", "mssc", body, Path("unused.zarr"))
    code, _, err = _finish(_cli(spec, "--output", url))
    assert code == 0, err
    fs = _fs()
    names = sorted(k.rsplit("/", 1)[-1] for k in fs.ls(f"{s3_bucket}/maps"))
    assert names == [
        "img.labels.classes.csv",
        "img.labels.tif",
        "img.quicklook.png",
        "img.zarr",
    ], names
    assert fs.cat(f"{s3_bucket}/maps/img.labels.tif")[:4] in (b"II*\0", b"MM\0*")
    assert fs.cat(f"{s3_bucket}/maps/img.quicklook.png")[:4] == b"\x89PNG"
    root = zarr.open_group(url, mode="r")
    assert root.attrs["status"] == "complete"
    recorded = [g.attrs.get("label_geotiff") for _, g in root.groups()]
    assert "../img.labels.tif" in recorded, recorded
    assert sorted(root.attrs["side_files"]) == [
        "../img.labels.classes.csv",
        "../img.labels.tif",
        "../img.quicklook.png",
    ]
    assert not [k for k in fs.find(f"{s3_bucket}/maps") if ".scratch" in k]  # removed
    assert not (tmp_path / "s3:").exists()


def test_foreign_object_beside_an_s3_store_is_refused_before_the_job(
    s3_bucket, tmp_path, ops
) -> None:
    """An object at a map file's name that no store recorded: `dkernel validate` and `run`
    exit 2 naming it, before any cluster starts; the object is kept and no store written."""
    body = ops.method_specs(tmp_path)["mssc"]
    body["params"].update(write_geotiff=True, write_png=True)
    url = f"s3://{s3_bucket}/maps/img.zarr"
    spec = ops.write_spec(tmp_path / "img.yaml", "mssc", body, Path("unused.zarr"))
    fs = _fs()
    fs.pipe(f"{s3_bucket}/maps/img.quicklook.png", b"someone else's")
    for command, args in (("validate", ("--output-root", f"s3://{s3_bucket}/maps/")), ("run", ())):
        if command == "validate":
            spec = ops.write_spec(tmp_path / "img.yaml", "mssc", body, Path("img.zarr"))
        else:
            args = ("--output", url)
        code, out, err = _finish(_cli(spec, *args, command=command), timeout=120)
        assert code == 2, (command, out, err)
        assert f"s3://{s3_bucket}/maps/img.quicklook.png exists" in err, err
        assert "Traceback" not in err
    fs.invalidate_cache()
    assert fs.cat(f"{s3_bucket}/maps/img.quicklook.png") == b"someone else's"
    assert not fs.exists(f"{s3_bucket}/maps/img.zarr")


def test_wrong_credentials_exit_2_writing_nothing(tmp_path, ops) -> None:
    """A moto server of its own that checks credentials (INITIAL_NO_AUTH_ACTION_COUNT=0)."""
    import shutil

    server = shutil.which("moto_server", path=str(Path(sys.executable).parent))
    if server is None:
        pytest.skip("needs moto[server] (test extra)")
    port = ops.free_port()
    env = {**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": "0"}
    proc = subprocess.Popen(
        [server, "-H", "127.0.0.1", "-p", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert time.monotonic() < deadline, "moto_server did not start"
            time.sleep(0.2)
        wrong = {
            "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
            "AWS_ACCESS_KEY_ID": "not-a-key",
            "AWS_SECRET_ACCESS_KEY": "not-a-secret",
        }
        spec = _spec(tmp_path, output="s3://dk-bucket/x.zarr")
        code, _, err = _finish(_cli(spec, env=wrong), timeout=120)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert code == 2, err
    assert "cannot write the results store s3://dk-bucket/x.zarr" in err
    assert "access denied" in err and "check the credentials" in err
    assert "not-a-secret" not in err and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["wine-s3.yaml"]
