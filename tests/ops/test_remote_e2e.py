"""Jobs whose inputs AND results store live on S3 (issue 30), end to end: real ``dkernel run``
subprocesses against a real S3-compatible server (moto, the ``s3_server`` fixture).

* a GeoTIFF on S3 → ``mssc`` → the store and its label COG on S3, with the source's CRS;
* a Zarr cube on S3 → ``zarr-raster`` → ``mssc`` → the store on S3, on a worker process;
* a CSV and a Parquet table on S3 → ``spectral-clustering`` → the store on S3, read back lazily
  by ``open_results`` in a fresh process.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

#: end to end (dkernel run subprocesses against an S3 server): tasks.py test --fast skips it
pytestmark = pytest.mark.slow

pytest.importorskip("s3fs", reason="needs the cloud extra: pip install -e '.[cloud]'")

REPO = Path(__file__).resolve().parents[2]
JOB_TIMEOUT = 300
MSSC_PARAMS = {
    "n_clusters": 2,
    "n_seeds": 40,
    "density_max_samples": 400,
    "n_rff": 100,
    "n_init": 3,
}


def _fs():
    import s3fs

    return s3fs.S3FileSystem(skip_instance_cache=True)


def _run(tmp: Path, spec: dict, output: str, *, workers: bool = False) -> str:
    """``dkernel run`` of ``spec`` into ``output``: at its default for these small jobs (on
    threads of its own process), or with ``workers`` on an embedded cluster of one worker
    process."""
    path = tmp / "job.yaml"
    path.write_text(yaml.safe_dump({"name": "e2e", "seed": 0, **spec, "output": "x.zarr"}))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
    proc = subprocess.run(
        [sys.executable, "-m", "dkernel.cli", "run", str(path), "--output", output]
        + ["--no-progress"]
        + (["--workers", "1", "--threads", "1"] if workers else []),
        cwd=tmp,
        env=env,
        capture_output=True,
        text=True,
        timeout=JOB_TIMEOUT,
    )
    assert proc.returncode == 0, proc.stderr
    assert not (tmp / "s3:").exists()
    return proc.stderr


def _two_region_image() -> np.ndarray:
    """A 3-band 40 × 50 scene: a bright left half and a dark right half, with noise."""
    rng = np.random.default_rng(0)
    image = rng.normal(0.0, 0.05, size=(3, 40, 50))
    image[:, :, :25] += 1.0
    return image.astype(np.float32)


def _geotiff(path: Path) -> None:
    import rasterio
    from rasterio.transform import from_origin

    image = _two_region_image()
    profile = {
        "driver": "GTiff",
        "width": 50,
        "height": 40,
        "count": 3,
        "dtype": "float32",
        "crs": "EPSG:32618",
        "transform": from_origin(500_000.0, 4_000_000.0, 30.0, 30.0),
        "tiled": True,
        "blockxsize": 16,
        "blockysize": 16,
    }
    with rasterio.open(path, "w", **profile) as dst:
        dst.write(image)


def _labels(url: str) -> np.ndarray:
    """The store's labels, read in a fresh process through ``open_results`` (lazily)."""
    code = (
        "import sys, numpy as np, dkernel\n"
        "tree = dkernel.open_results(sys.argv[1])\n"
        "group = 'mssc' if 'mssc' in tree.children else 'labels'\n"
        "np.save(sys.stdout.buffer, np.asarray(tree[group]['labels'].values))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, url], capture_output=True, timeout=120, check=True
    )
    import io

    return np.load(io.BytesIO(out.stdout))


def test_geotiff_on_s3_to_mssc_store_and_label_cog_on_s3(s3_bucket, tmp_path) -> None:
    import rasterio

    _geotiff(tmp_path / "scene.tif")
    fs = _fs()
    fs.put_file(str(tmp_path / "scene.tif"), f"{s3_bucket}/in/scene.tif")
    spec = {
        "data": {"reader": "geotiff", "path": f"s3://{s3_bucket}/in/scene.tif"},
        "method": "mssc",
        "params": {**MSSC_PARAMS, "write_geotiff": True, "write_png": False},
    }
    url = f"s3://{s3_bucket}/out/scene.zarr"
    _run(tmp_path, spec, url)
    labels = _labels(url)
    assert labels.shape == (40, 50)
    # the two halves are the two classes
    assert len(set(labels[:, :25].ravel())) == 1 and len(set(labels[:, 25:].ravel())) == 1
    assert labels[0, 0] != labels[0, -1]
    fs.get_file(f"{s3_bucket}/out/scene.labels.tif", str(tmp_path / "labels.tif"))
    with rasterio.open(tmp_path / "labels.tif") as src:
        assert src.crs.to_epsg() == 32618
        np.testing.assert_array_equal(src.read(1), labels)


def test_zarr_cube_on_s3_to_mssc_store_on_s3(s3_bucket, tmp_path) -> None:
    import rioxarray  # noqa: F401  (the .rio accessor)
    import xarray as xr

    cube = xr.DataArray(
        _two_region_image(),
        dims=("band", "y", "x"),
        coords={"y": 4_000_000.0 - 30.0 * np.arange(40), "x": 500_000.0 + 30.0 * np.arange(50)},
        name="image",
    ).rio.write_crs("EPSG:32618")
    cube.to_dataset().chunk({"y": 20}).to_zarr(tmp_path / "cube.zarr")
    _fs().put(str(tmp_path / "cube.zarr"), f"{s3_bucket}/in/cube.zarr", recursive=True)
    spec = {
        "data": {"reader": "zarr-raster", "path": f"s3://{s3_bucket}/in/cube.zarr"},
        "method": "mssc",
        "params": {**MSSC_PARAMS, "write_geotiff": False, "write_png": False},
    }
    url = f"s3://{s3_bucket}/out/cube.zarr"
    _run(tmp_path, spec, url, workers=True)
    labels = _labels(url)
    assert labels[0, 0] != labels[0, -1] and len(np.unique(labels)) == 2


@pytest.mark.parametrize("kind", ["csv", "parquet"])
def test_table_on_s3_to_spectral_clustering_store_on_s3(s3_bucket, tmp_path, kind) -> None:
    from sklearn.datasets import make_blobs
    from sklearn.metrics import adjusted_rand_score

    X, y = make_blobs(n_samples=300, centers=3, cluster_std=0.5, random_state=0)
    local = tmp_path / f"table.{kind}"
    if kind == "csv":
        np.savetxt(local, X, delimiter=",")
        data = {"reader": "csv"}
    else:
        import pandas as pd

        pd.DataFrame(X, columns=["a", "b"]).to_parquet(local)
        data = {"reader": "parquet"}
    _fs().put_file(str(local), f"{s3_bucket}/in/{local.name}")
    spec = {
        "data": {**data, "path": f"s3://{s3_bucket}/in/{local.name}"},
        "method": "spectral-clustering",
        "params": {"n_clusters": 3, "n_init": 5},
    }
    url = f"s3://{s3_bucket}/out/{kind}.zarr"
    _run(tmp_path, spec, url)
    assert adjusted_rand_score(y, _labels(url)) > 0.95
