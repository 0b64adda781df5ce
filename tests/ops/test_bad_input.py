"""Bad-input suite: malformed specs and data through the real ``dkernel`` entry point.

Every case must exit with code 2, print a specific message naming what is wrong, and leave no
results store marked ``complete``. Nearly all are refused before any cluster starts.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from dkernel.cli import main

REPO = Path(__file__).resolve().parents[2]


# ------------------------------------------------------------------------------------------
# helpers
# ------------------------------------------------------------------------------------------


def _write_csv(path: Path, rows: list[list[object]]) -> Path:
    path.write_text("\n".join(",".join(str(v) for v in r) for r in rows) + ("\n" if rows else ""))
    return path


def _blobs(n: int = 30, p: int = 3) -> list[list[float]]:
    rng = np.random.default_rng(0)
    return rng.normal(size=(n, p)).round(4).tolist()


def _spec(**top) -> dict:
    spec = {
        "name": "bad",
        "data": {"reader": "csv", "path": "data.csv"},
        "method": "rbf-spectral",
        "params": {"n_clusters": 2},
        "output": "out.zarr",
    }
    spec.update(top)
    return spec


def _no_complete_store(root: Path) -> None:
    """No directory under ``root`` is a store marked complete."""
    import zarr

    for zarr_json in root.rglob("zarr.json"):
        try:
            group = zarr.open_group(str(zarr_json.parent), mode="r")
        except Exception:
            continue
        assert group.attrs.get("status") != "complete", f"{zarr_json.parent} marked complete"


@pytest.fixture()
def work(tmp_path, monkeypatch):
    """A scratch output root with a good 30 × 3 table in ``data.csv``."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DKERNEL_OUTPUT_ROOT", raising=False)
    _write_csv(tmp_path / "data.csv", _blobs())
    return tmp_path


def run_cli(work: Path, spec: dict | str, *extra: str, command: str = "run") -> tuple[int, str]:
    import io
    from contextlib import redirect_stderr, redirect_stdout

    path = work / "job.yaml"
    path.write_text(spec if isinstance(spec, str) else yaml.safe_dump(spec, sort_keys=False))
    args = [command, str(path)]
    if command in ("run", "submit"):
        args += ["--no-progress"]
    if command == "run":
        args += ["--workers", "1", "--threads", "1"]
    err, out = io.StringIO(), io.StringIO()
    with redirect_stderr(err), redirect_stdout(out):
        code = main([*args, *extra])
    _no_complete_store(work)
    return code, err.getvalue()


def expect_invalid(work: Path, spec: dict | str, pattern: str, *extra: str, **kw) -> str:
    import re

    code, err = run_cli(work, spec, *extra, **kw)
    assert code == 2, f"exit code {code}, stderr:\n{err}"
    assert re.search(pattern, err), f"{pattern!r} not in:\n{err}"
    assert "Traceback" not in err
    return err


# ------------------------------------------------------------------------------------------
# data problems
# ------------------------------------------------------------------------------------------


def test_empty_data_file(work):
    (work / "data.csv").write_text("")
    expect_invalid(work, _spec(), r"data\.csv holds no data rows")


def test_blank_lines_only(work):
    (work / "data.csv").write_text("\n\n   \n")
    expect_invalid(work, _spec(), r"holds no data rows")


def test_one_row(work):
    _write_csv(work / "data.csv", [[1.0, 2.0, 3.0]])
    expect_invalid(work, _spec(), r"needs at least 2 samples; the data has 1")


def test_nan_where_not_allowed(work):
    rows = _blobs()
    rows[3][1] = "nan"
    _write_csv(work / "data.csv", rows)
    # the cosine kernel does not model NaN (rbf-spectral, the default here, does)
    spec = _spec(method="jrc", params={"n_clusters": 2, "kernel": "cosine"})
    expect_invalid(work, spec, r"does not handle missing values \(1 NaN found\); use kernel: .*pck")


def test_inf_in_data(work):
    rows = _blobs()
    rows[5][0] = "inf"
    _write_csv(work / "data.csv", rows)
    expect_invalid(work, _spec(), r"infinite values")


def test_constant_column_with_standardize(work):
    rows = [[*r[:2], 7.0] for r in _blobs()]
    _write_csv(work / "data.csv", rows)
    spec = _spec(data={"reader": "csv", "path": "data.csv", "standardize": True})
    expect_invalid(work, spec, r"feature\(s\) 2 are constant .*zero variance")


def test_all_constant_data(work):
    _write_csv(work / "data.csv", [[1.0, 1.0, 1.0]] * 20)
    expect_invalid(work, _spec(), r"every sample is identical|constant")


def test_text_in_numeric_column(work):
    rows = _blobs()
    rows[2][2] = "abc"
    _write_csv(work / "data.csv", rows)
    expect_invalid(work, _spec(), r"row 3, column 2 holds 'abc', which is not a number")


def test_text_in_a_named_column_names_it(work):
    rows = _blobs()
    rows[2][2] = "abc"
    _write_csv(work / "data.csv", [["a", "b", "label"], *rows])
    spec = _spec(data={"reader": "csv", "path": "data.csv", "header": True})
    expect_invalid(
        work,
        spec,
        r"row 4, column 2 \('label'\) holds 'abc', which is not a number\. .*"
        r"data\.skip_columns \('label'\)",
    )


def test_a_header_line_without_header_true_names_the_fix(work):
    _write_csv(work / "data.csv", [["a", "b", "c"], *_blobs()])
    expect_invalid(work, _spec(), r"row 1, column 0 holds 'a'.*set data.header: true")


def test_ragged_rows(work):
    rows = _blobs()
    rows[4] = rows[4][:2]
    _write_csv(work / "data.csv", rows)
    expect_invalid(work, _spec(), r"row 5 has 2 fields, expected 3")


def test_npy_wrong_dtype_strings(work):
    np.save(work / "x.npy", np.array([["a", "b"], ["c", "d"], ["e", "f"]]))
    spec = _spec(data={"reader": "npy", "path": "x.npy"})
    expect_invalid(work, spec, r"x\.npy holds .*<U1.*numeric")


def test_npy_complex_dtype(work):
    np.save(work / "x.npy", np.ones((10, 2), dtype=complex))
    spec = _spec(data={"reader": "npy", "path": "x.npy"})
    expect_invalid(work, spec, r"complex128.*numeric")


def test_npy_pickled_objects_are_refused(work):
    np.save(work / "x.npy", np.array([{"a": 1}, None], dtype=object), allow_pickle=True)
    spec = _spec(data={"reader": "npy", "path": "x.npy"})
    expect_invalid(work, spec, r"could not read \S*x\.npy as a \.npy array: .*Python objects")


def test_one_dimensional_data(work):
    np.save(work / "x.npy", np.arange(10.0))
    spec = _spec(data={"reader": "npy", "path": "x.npy"})
    expect_invalid(work, spec, r"returned 1-D data; methods need 2-D")


def test_mismatched_label_shape(work):
    np.save(work / "x.npy", np.random.default_rng(0).normal(size=(20, 3)))
    np.save(work / "y.npy", np.zeros(7, dtype=int))
    spec = _spec(data={"reader": "npy", "path": "x.npy", "labels_path": "y.npy"})
    expect_invalid(work, spec, r"have 7 entries but .*x\.npy has 20 rows")


def test_n_clusters_larger_than_n(work):
    expect_invalid(work, _spec(params={"n_clusters": 31}), r"n_clusters \(31\) is larger than .*30")


def test_pck_spectral_components_not_below_max_samples(work):
    spec = _spec(method="pck-spectral", params={"n_clusters": 2, "max_components": 16})
    expect_invalid(work, spec, r"max_samples \(0\.5\) of 30 rows gives 15 rows, fewer than")


# ------------------------------------------------------------------------------------------
# parameter problems
# ------------------------------------------------------------------------------------------


def test_zero_bandwidth(work):
    expect_invalid(
        work, _spec(params={"n_clusters": 2, "sigma": 0}), r"params\.sigma: must be a number > 0"
    )


def test_negative_bandwidth_mssc(work):
    spec = _spec(data={"reader": "demo-landsat"}, method="mssc", params={"bandwidth": -1.0})
    expect_invalid(work, spec, r"params\.bandwidth: must be a number > 0 .*got -1\.0")


@pytest.mark.parametrize("alpha", [0, 1, 1.5, -0.1])
def test_alpha_outside_open_unit_interval(work, alpha):
    spec = _spec(method="kppr", params={"alpha": alpha})
    expect_invalid(work, spec, rf"params\.alpha: must be a number > 0(\.0)? and < 1.*got {alpha}")


def test_unknown_method(work):
    expect_invalid(work, _spec(method="kmeans-magic"), r"unknown method 'kmeans-magic'. Valid")


def test_unknown_param_key(work):
    spec = _spec(params={"n_clusters": 2, "n_clusterz": 3})
    expect_invalid(work, spec, r"params\.n_clusterz: unknown key .*Did you mean 'n_clusters'")


def test_unknown_top_level_key(work):
    spec = _spec()
    spec["ouptut"] = "x.zarr"
    expect_invalid(work, spec, r"ouptut: unknown key 'ouptut'")


def test_unknown_reader(work):
    expect_invalid(work, _spec(data={"reader": "hdf5"}), r"unknown reader 'hdf5'. Valid readers")


def test_wrong_yaml_type_string_for_int(work):
    spec = _spec(params={"n_clusters": "three"})
    expect_invalid(work, spec, r"params\.n_clusters: must be an int >= 1; got 'three' \(str\)")


def test_wrong_yaml_type_list_for_mapping(work):
    expect_invalid(work, _spec(data=["csv", "data.csv"]), r"data: must be a mapping; got \[")


def test_spec_is_a_list(work):
    expect_invalid(work, "- a\n- b\n", r"a job spec must be a YAML mapping .*got list")


def test_empty_spec_file(work):
    expect_invalid(work, "", r"got an empty file")


def test_yaml_syntax_error(work):
    text = "name: bad\nmethod: rbf-spectral\nparams: {n_clusters: 2\noutput: o.zarr\n"
    expect_invalid(work, text, r"YAML syntax error at line \d+, column \d+")


def test_yaml_python_object_tag_is_refused(work):
    text = "name: !!python/object/apply:os.system ['echo pwned']\nmethod: rbf-spectral\n"
    expect_invalid(work, text, r"YAML syntax error.*could not determine a constructor")


def test_spec_not_utf8(work):
    (work / "job.yaml").write_bytes(b"name: \xff\xfe\x00bad\n")
    code = main(["run", str(work / "job.yaml"), "--no-progress"])
    assert code == 2


def test_bad_job_name(work):
    expect_invalid(work, _spec(name="../evil"), r"name: must be letters, digits")


@pytest.mark.parametrize("seed", [-1, 2**32, 1.5])
def test_seed_out_of_range(work, seed):
    expect_invalid(work, _spec(seed=seed), r"seed: must be an int >= 0 and <= 4294967295")


def test_ranking_seed_rows_out_of_range(work):
    spec = _spec(method="kppr", params={"seeds": {"s": [0, 30]}})
    expect_invalid(work, spec, r"seed 's': rows \[30\] are outside \[0, 30\)")


def test_bad_size_limit(work):
    expect_invalid(
        work, _spec(limits={"max_memory": "lots"}), r"limits\.max_memory: must be a size"
    )


def test_needs_more_memory_than_allowed(work):
    spec = _spec(limits={"max_memory": "10kB"})
    expect_invalid(work, spec, r"needs about .* of memory, above the limit of 9\.77 kiB.*Nyström")


def test_needs_more_memory_than_env_limit(work, monkeypatch):
    monkeypatch.setenv("DKERNEL_MAX_MEMORY", "1kB")
    expect_invalid(work, _spec(), r"above the limit .*DKERNEL_MAX_MEMORY")


def test_raster_method_on_table_reader(work):
    spec = _spec(method="mssc", params={})
    expect_invalid(work, spec, r"method 'mssc' needs an image; reader 'csv' reads tables")


# ------------------------------------------------------------------------------------------
# files
# ------------------------------------------------------------------------------------------


def test_missing_spec_file(work):
    import io
    from contextlib import redirect_stderr

    err = io.StringIO()
    with redirect_stderr(err):
        code = main(["run", str(work / "nope.yaml")])
    assert code == 2 and "job spec" in err.getvalue() and "does not exist" in err.getvalue()


def test_spec_path_is_a_directory(work):
    import io
    from contextlib import redirect_stderr

    err = io.StringIO()
    with redirect_stderr(err):
        code = main(["validate", str(work)])
    assert code == 2 and "is a directory" in err.getvalue()


def test_missing_data_file(work):
    spec = _spec(data={"reader": "csv", "path": "missing.csv"})
    expect_invalid(work, spec, r"data\.path: file not found: 'missing\.csv'")


def test_unset_environment_variable_in_path(work, monkeypatch):
    monkeypatch.delenv("DKERNEL_NOPE", raising=False)
    spec = _spec(data={"reader": "csv", "path": "${DKERNEL_NOPE}/x.csv"})
    expect_invalid(work, spec, r"environment variable 'DKERNEL_NOPE' .* is not set")


def test_unreadable_data_file_directory(work):
    (work / "adir.npy").mkdir()
    spec = _spec(data={"reader": "npy", "path": "adir.npy"})
    expect_invalid(work, spec, r"could not read .*adir\.npy")


def test_unreadable_data_file_binary_csv(work):
    (work / "data.csv").write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe" * 10)
    expect_invalid(work, _spec(), r"could not read .*data\.csv.*codec")


def test_unreadable_data_file_permissions(work, monkeypatch):
    import os

    monkeypatch.setattr(os, "access", lambda *a, **k: False)  # root ignores chmod 000
    expect_invalid(work, _spec(), r"data\.path: file is not readable: .*data\.csv.*permissions")


def test_corrupt_zarr_input(work):
    bad = work / "cube.zarr"
    bad.mkdir()
    (bad / "zarr.json").write_text("{ this is not json")
    spec = _spec(data={"reader": "zarr-raster", "path": "cube.zarr"}, method="mssc", params={})
    expect_invalid(work, spec, r"reader 'zarr-raster' failed on \S*cube\.zarr: ")


def test_foreign_zarr_store_as_output_is_not_replaced(work):
    import zarr

    foreign = zarr.open_group(str(work / "out.zarr"), mode="w")
    foreign.create_array("precious", shape=(3,), dtype="f8")
    expect_invalid(work, _spec(), r"out\.zarr exists and is not a dkernel results store")
    assert "precious" in zarr.open_group(str(work / "out.zarr"), mode="r")


def test_show_foreign_and_corrupt_store(work, capsys):
    import zarr

    zarr.open_group(str(work / "foreign.zarr"), mode="w").attrs["x"] = 1
    assert main(["show", str(work / "foreign.zarr")]) == 2
    assert "not a dkernel results store" in capsys.readouterr().err
    (work / "corrupt.zarr").mkdir()
    (work / "corrupt.zarr" / "zarr.json").write_text("garbage")
    assert main(["show", str(work / "corrupt.zarr")]) == 2
    assert "corrupt.zarr is not a readable Zarr store" in capsys.readouterr().err
    assert main(["show", str(work / "missing.zarr")]) == 2
    assert "no results store at" in capsys.readouterr().err


def _geotiff(path: Path, data: np.ndarray, *, crs: str | None, nodata: float | None) -> Path:
    import rasterio
    from rasterio.transform import from_origin

    profile = {
        "driver": "GTiff",
        "height": data.shape[1],
        "width": data.shape[2],
        "count": data.shape[0],
        "dtype": str(data.dtype),
        "transform": from_origin(500000, 4000000, 30, 30),
    }
    if crs:
        profile["crs"] = crs
    if nodata is not None:
        profile["nodata"] = nodata
    with rasterio.open(path, "w", **profile) as dst:
        dst.write(data)
    return path


def test_geotiff_without_crs(work):
    img = np.random.default_rng(0).integers(1, 255, size=(3, 20, 24)).astype("uint8")
    _geotiff(work / "nocrs.tif", img, crs=None, nodata=None)
    spec = _spec(data={"reader": "geotiff", "path": "nocrs.tif"}, method="mssc", params={})
    expect_invalid(work, spec, r"nocrs\.tif has no CRS.*npy-raster|nocrs\.tif has no CRS")


def test_geotiff_nodata_only(work):
    img = np.zeros((3, 20, 24), dtype="uint8")
    _geotiff(work / "empty.tif", img, crs="EPSG:32618", nodata=0)
    spec = _spec(data={"reader": "geotiff", "path": "empty.tif"}, method="mssc", params={})
    expect_invalid(work, spec, r"every pixel of the image is nodata")


def test_npy_raster_nodata_only(work):
    np.save(work / "cube.npy", np.full((10, 12, 3), -9999.0))
    spec = _spec(
        data={"reader": "npy-raster", "path": "cube.npy", "nodata": -9999.0},
        method="mssc",
        params={},
    )
    expect_invalid(work, spec, r"every pixel of the image is nodata")


# ------------------------------------------------------------------------------------------
# outputs, security, runtime
# ------------------------------------------------------------------------------------------


def test_output_escaping_with_dotdot(work):
    spec = _spec(output="../../escaped.zarr")
    expect_invalid(
        work, spec, r"output: .*escaped\.zarr is outside the output root .*DKERNEL_OUTPUT_ROOT"
    )
    assert not (work.parent.parent / "escaped.zarr").exists()


def test_output_absolute_outside_root(work):
    spec = _spec(output="/etc/dkernel-escaped.zarr")
    expect_invalid(work, spec, r"output: /etc/dkernel-escaped\.zarr is outside the output root")
    assert not Path("/etc/dkernel-escaped.zarr").exists()


def test_output_escaping_through_symlink(work, tmp_path_factory):
    outside = tmp_path_factory.mktemp("outside")
    (work / "link").symlink_to(outside, target_is_directory=True)
    expect_invalid(work, _spec(output="link/x.zarr"), r"is outside the output root")
    assert not (outside / "x.zarr").exists()


def test_output_not_a_zarr_directory_name(work):
    (work / "afile").write_text("keep me")
    expect_invalid(work, _spec(output="afile"), r"afile exists and is not a dkernel results store")
    assert (work / "afile").read_text() == "keep me"


def test_existing_complete_store_needs_overwrite(work):
    import zarr

    from dkernel.storage.store import STORE_FORMAT

    g = zarr.open_group(str(work / "out.zarr"), mode="w", zarr_format=3)
    g.attrs.update({"format": STORE_FORMAT, "status": "complete"})
    import io
    from contextlib import redirect_stderr

    (work / "job.yaml").write_text(yaml.safe_dump(_spec()))
    buf = io.StringIO()
    with redirect_stderr(buf):
        code = main(["run", str(work / "job.yaml"), "--no-progress"])
    assert code == 2
    assert "already holds a complete results store; pass --overwrite" in buf.getvalue()


def test_unreachable_scheduler(work):
    expect_invalid(
        work,
        _spec(),
        r"could not reach the Dask scheduler at tcp://127\.0\.0\.1:9 within 1 s",
        "--scheduler",
        "tcp://127.0.0.1:9",
        "--timeout",
        "1",
        command="submit",
    )


def test_malformed_scheduler_address(work):
    expect_invalid(
        work,
        _spec(),
        r"could not reach the Dask scheduler at not a url",
        "--scheduler",
        "not a url",
        "--timeout",
        "1",
        command="submit",
    )


# ------------------------------------------------------------------------------------------
# through a real subprocess (the installed console entry point's module)
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "pattern"),
    [
        (_spec(method="nope"), "unknown method 'nope'"),
        (_spec(output="../escaped.zarr"), "is outside the output root"),
    ],
)
def test_bad_input_through_subprocess(work, spec, pattern):
    (work / "job.yaml").write_text(yaml.safe_dump(spec))
    proc = subprocess.run(
        [sys.executable, "-m", "dkernel.cli", "run", "job.yaml", "--no-progress"],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert pattern in proc.stderr
    assert proc.stderr.startswith("dkernel: error:")
    assert "Traceback" not in proc.stderr
    _no_complete_store(work)


def test_segments_need_a_georeferenced_image(work):
    np.save(work / "cube.npy", np.random.default_rng(0).uniform(size=(10, 12, 3)))
    spec = _spec(
        data={"reader": "npy-raster", "path": "cube.npy"},
        method="mssc",
        params={"segments": "gpkg"},
    )
    expect_invalid(work, spec, r"params.segments needs a georeferenced image.*no CRS")


def test_segments_on_a_table_refused(work):
    _write_csv(work / "t.csv", _blobs())
    spec = _spec(params={"n_clusters": 2, "segments": "gpkg"})
    expect_invalid(work, spec, r"params.segments needs an image reader")


def test_unknown_segment_format_named(work):
    img = np.random.default_rng(0).integers(1, 255, size=(3, 20, 24)).astype("uint8")
    _geotiff(work / "ok.tif", img, crs="EPSG:32618", nodata=None)
    spec = _spec(
        data={"reader": "geotiff", "path": "ok.tif"}, method="mssc", params={"segments": "shp"}
    )
    expect_invalid(work, spec, r"params.segments: must be one of 'gpkg', 'fgb'; got 'shp'")
