from pathlib import Path

import numpy as np
import pytest

from dkernel.errors import InvalidInputError, ResourceLimitError
from dkernel.jobs.outputs import Group
from dkernel.jobs.registry import METHODS, Method, register_method
from dkernel.jobs.runner import JobFailedError, run_job
from dkernel.jobs.spec import validate_spec
from dkernel.schema.params import Param
from dkernel.storage import open_results

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wine_store(tmp_path_factory, client):
    out = tmp_path_factory.mktemp("wine") / "wine.zarr"
    return run_job(REPO / "jobs" / "wine-rbf-kpca.yaml", output=out, client=client, progress=False)


def test_wine_job_writes_a_complete_store(wine_store):
    tree = open_results(wine_store)
    assert tree.attrs["status"] == "complete"
    assert set(tree.attrs["timings"]) >= {"kernel", "total"}
    assert tree["kernel"]["kernel"].dims == ("sample", "sample_")
    K = tree["kernel"]["kernel"].values
    np.testing.assert_allclose(K, K.T, atol=1e-12)
    assert tree["embedding"]["embedding"].shape == (178, 3)
    assert tree["labels"]["labels"].shape == (178,)
    assert float(tree["metrics"]["acc"]) >= 0.90


def _spec(**params):
    return validate_spec(
        {
            "name": "t",
            "data": {"reader": "sklearn", "name": "iris"},
            "method": "rbf-spectral",
            "params": {"n_clusters": 3, **params},
            "output": "unused.zarr",
        }
    )


def test_limits_refuse_before_any_store_is_written(tmp_path, monkeypatch):
    monkeypatch.setenv("DKERNEL_MAX_MEMORY", "100kB")
    with pytest.raises(ResourceLimitError, match=r"needs about .* above the limit .*Nyström"):
        run_job(_spec(), output=tmp_path / "x.zarr")
    assert not (tmp_path / "x.zarr").exists()


def test_too_many_clusters_is_invalid_input(tmp_path):
    with pytest.raises(InvalidInputError, match="n_clusters .* larger than the number of samples"):
        run_job(_spec(n_clusters=1000), output=tmp_path / "x.zarr")


@pytest.fixture()
def failing_method():
    def compute(ctx):
        import xarray as xr

        yield Group("partial", xr.Dataset({"a": (("sample",), np.zeros(3))}))
        raise RuntimeError("worker exploded halfway")

    register_method(
        Method(name="test-fails-midway", params=(Param("x", "int", default=1),), compute=compute)
    )
    yield
    del METHODS["test-fails-midway"]


def test_job_failing_midway_is_marked_failed(tmp_path, client, failing_method):
    spec = validate_spec(
        {
            "name": "f",
            "data": {"reader": "sklearn", "name": "iris"},
            "method": "test-fails-midway",
            "output": str(tmp_path / "f.zarr"),
        }
    )
    with pytest.raises(JobFailedError, match="worker exploded halfway"):
        run_job(spec, client=client, progress=False)
    with pytest.warns(UserWarning, match="failed"):
        tree = open_results(tmp_path / "f.zarr")
    assert tree.attrs["status"] == "failed"
    assert "worker exploded halfway" in tree.attrs["error"]


def test_cli_exit_code_1_when_a_job_fails_midway(tmp_path, failing_method, capsys):
    from dkernel.cli import main

    spec = tmp_path / "fails.yaml"
    spec.write_text(
        "name: f\nmethod: test-fails-midway\ndata: {reader: sklearn, name: iris}\n"
        f"output: {tmp_path / 'f.zarr'}\n"
    )
    assert main(["run", str(spec), "--workers", "1", "--threads", "1", "--no-progress"]) == 1
    assert "worker exploded halfway" in capsys.readouterr().err
    with pytest.warns(UserWarning, match="failed"):
        assert open_results(tmp_path / "f.zarr").attrs["status"] == "failed"


def test_prepare_job_bounds_the_gdal_cache_before_reading(monkeypatch):
    """The reader's statistics pass decodes every tile in this process: GDAL's block cache is
    bounded before the data are read, not only once a cluster is up."""
    from rasterio.env import get_gdal_config, set_gdal_config

    from dkernel.io.gdal import GDAL_CACHE_MB
    from dkernel.jobs import prepare, runner

    seen = []

    def load_data(spec):
        seen.append(get_gdal_config("GDAL_CACHEMAX"))
        return real_load_data(spec)

    real_load_data = prepare.load_data
    monkeypatch.setattr(prepare, "load_data", load_data)
    before = get_gdal_config("GDAL_CACHEMAX")
    set_gdal_config("GDAL_CACHEMAX", 512)
    try:
        runner.prepare_job(
            validate_spec(
                {
                    "name": "cache",
                    "data": {"reader": "demo-landsat"},
                    "method": "mssc",
                    "params": {"n_clusters": 3},
                    "output": "unused.zarr",
                }
            )
        )
    finally:
        set_gdal_config("GDAL_CACHEMAX", before)
    assert seen == [GDAL_CACHE_MB]


def test_a_cluster_slow_to_stop_is_logged_not_a_failed_job(caplog):
    """Closing the job's own cluster after the store is finished: a worker slow to stop (seen
    on a loaded machine as ``TimeoutError`` from ``Client.close``) is a warning, not an error."""
    from dkernel.jobs import runner

    class SlowToStop:
        def close(self):
            raise TimeoutError

    with caplog.at_level("WARNING", logger="dkernel.jobs.runner"):
        runner._close_quietly(SlowToStop())
    assert "took too long to stop" in caplog.text
