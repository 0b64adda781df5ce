"""Hostile and careless input (issue 19, items 2–6 and 9), through the real ``dkernel`` entry
point: every case exits 2 with a short message naming what is wrong, no traceback, before any
cluster starts or any store is created."""

from __future__ import annotations

import io
import os
import re
import time
import tracemalloc
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import numpy as np
import pytest
import yaml

from dkernel.cli import main
from dkernel.jobs.registry import METHODS, Method
from dkernel.jobs.runner import HANDLES_MISSING
from dkernel.jobs.spec import MAX_SPEC_BYTES
from dkernel.schema.params import REQUIRED
from tests.limits import REFUSAL_S

#: Limits for hostile YAML (the seconds a hang guard: tests/limits.py).
MAX_SECONDS, MAX_MIB, MAX_MESSAGE = REFUSAL_S, 200, 500


@pytest.fixture()
def work(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DKERNEL_OUTPUT_ROOT", raising=False)
    rng = np.random.default_rng(0)
    rows = rng.normal(size=(80, 3)).round(4)
    (tmp_path / "data.csv").write_text("\n".join(",".join(map(str, r)) for r in rows) + "\n")
    return tmp_path


def _spec(**top) -> dict:
    spec = {
        "name": "hostile",
        "data": {"reader": "csv", "path": "data.csv"},
        "method": "rbf-spectral",
        "params": {"n_clusters": 2},
        "output": "out.zarr",
    }
    spec.update(top)
    return spec


def cli(work: Path, spec: dict | str, command: str = "validate", *extra: str) -> tuple[int, str]:
    path = work / "job.yaml"
    path.write_text(spec if isinstance(spec, str) else yaml.safe_dump(spec, sort_keys=False))
    args = [command, str(path), *extra]
    if command == "run":
        args += ["--no-progress", "--workers", "1", "--threads", "1"]
    err = io.StringIO()
    with redirect_stderr(err), redirect_stdout(io.StringIO()):
        code = main(args)
    return code, err.getvalue()


def refused(work: Path, spec: dict | str, pattern: str, command: str = "validate") -> str:
    code, err = cli(work, spec, command)
    assert code == 2, f"exit {code}: {err}"
    assert re.search(pattern, err), f"{pattern!r} not in {err!r}"
    assert "Traceback" not in err
    assert not (work / "out.zarr").exists(), "a store was created"
    return err


# ------------------------------------------------------------------------------------------
# 2. YAML with limits
# ------------------------------------------------------------------------------------------


def _bomb(levels: int = 9, width: int = 9) -> str:
    names = "abcdefghijklmnop"
    parts = [f"&a [{','.join(['1'] * width)}]"]
    for i in range(1, levels):
        parts.append(f"&{names[i]} [{','.join(['*' + names[i - 1]] * width)}]")
    return "[" + ", ".join(parts) + "]"


@pytest.mark.parametrize("where", ["params.sigma", "params.seeds", "name"])
def test_alias_bomb_is_refused_fast_small_and_briefly(work, where) -> None:
    bomb = _bomb()
    if where == "params.sigma":
        text = "name: b\ndata: {reader: csv, path: data.csv}\nmethod: rbf-spectral\n"
        text += f"params:\n  n_clusters: 2\n  sigma: {bomb}\noutput: out.zarr\n"
    elif where == "params.seeds":
        text = "name: b\ndata: {reader: csv, path: data.csv}\nmethod: kppr\n"
        text += f"params:\n  seeds: {{s: {bomb}}}\noutput: out.zarr\n"
    else:
        text = f"name: {bomb}\n"
    assert len(text) < 600
    tracemalloc.start()
    t = time.perf_counter()
    err = refused(work, text, r"expands to more than 100,000 YAML nodes")
    seconds = time.perf_counter() - t
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    assert seconds < MAX_SECONDS and peak < MAX_MIB and len(err) < MAX_MESSAGE, (
        seconds,
        peak,
        len(err),
    )


def test_a_bomb_just_under_the_node_cap_is_shown_briefly(work) -> None:
    # 9**5 = 59,049 leaves: allowed by the cap, then refused by the type check, with the
    # value cut to a few items and its length
    spec = _spec()
    text = yaml.safe_dump(spec, sort_keys=False).replace(
        "n_clusters: 2", f"n_clusters: 2\n  sigma: {_bomb(levels=5)}"
    )
    err = refused(work, text, r"params\.sigma: must be a number .*\(list, length 5\)")
    assert len(err) < MAX_MESSAGE


def test_recursive_alias_is_refused(work) -> None:
    refused(work, "name: &a [*a]\n", r"recursive YAML alias at line 1")


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        ("name: a\nmethod: x\nname: b\n", r"duplicate key 'name' at line 3 \(first at line 1\)"),
        (
            "name: a\ndata:\n  reader: csv\n  path: x\n  reader: npy\n",
            r"duplicate key 'reader' at line 5 \(first at line 3\)",
        ),
    ],
)
def test_duplicate_keys_are_refused_with_lines(work, text, pattern) -> None:
    refused(work, text, pattern)


def test_merge_keys_are_not_duplicates(work) -> None:
    text = (
        "name: m\ndata: {reader: csv, path: data.csv}\nmethod: rbf-spectral\n"
        "params: {<<: {n_clusters: 3, n_init: 4}, n_clusters: 2}\noutput: out.zarr\n"
    )
    code, err = cli(work, text)
    assert code == 0, err


def test_oversized_document_is_refused(work) -> None:
    text = "name: a\ndescription: " + "x" * (MAX_SPEC_BYTES + 10) + "\n"
    err = refused(work, text, r"the job spec is 1,048,[0-9]{3} bytes; at most 1,048,576")
    assert len(err) < MAX_MESSAGE


def test_deep_nesting_is_refused(work) -> None:
    err = refused(
        work, "name: " + "[" * 5000 + "]" * 5000 + "\n", r"nested too deeply|maximum nesting depth"
    )
    assert len(err) < MAX_MESSAGE


def test_long_values_are_cut_with_type_and_length(work) -> None:
    err = refused(work, _spec(name="x y" * 5000), r"\(str, length 15000\)")
    assert len(err) < MAX_MESSAGE
    err = refused(work, _spec(params={"n_clusters": list(range(10_000))}), r"length 10000")
    assert len(err) < MAX_MESSAGE


def test_huge_integer_literal_is_refused(work) -> None:
    refused(work, "name: a\nseed: " + "9" * 5000 + "\n", r"could not be read|must be")


# ------------------------------------------------------------------------------------------
# 3. tracebacks that are now messages
# ------------------------------------------------------------------------------------------


def test_zero_byte_npy(work) -> None:
    (work / "x.npy").write_bytes(b"")
    refused(work, _spec(data={"reader": "npy", "path": "x.npy"}), r"x\.npy is empty \(0 bytes\)")


def test_truncated_and_pickled_npy(work) -> None:
    np.save(work / "x.npy", np.ones((30, 3)))
    (work / "x.npy").write_bytes((work / "x.npy").read_bytes()[:40])
    refused(work, _spec(data={"reader": "npy", "path": "x.npy"}), r"could not read .*x\.npy")
    np.save(work / "o.npy", np.array([{"a": 1}] * 3, dtype=object), allow_pickle=True)
    refused(work, _spec(data={"reader": "npy", "path": "o.npy"}), r"numpy\.save")


def test_bool_npy_is_read_as_zeros_and_ones(work) -> None:
    rng = np.random.default_rng(0)
    np.save(work / "b.npy", rng.random((30, 3)) > 0.5)
    code, err = cli(work, _spec(data={"reader": "npy", "path": "b.npy"}))
    assert code == 0, err


def test_bad_memory_limit_is_refused_before_the_cluster(work) -> None:
    refused(work, _spec(runtime={"memory_limit": "banana"}), r"runtime\.memory_limit", "run")


@pytest.mark.parametrize("unwritable", ["chmod", "proc"])
def test_unwritable_output_is_found_by_validate(work, unwritable) -> None:
    if unwritable == "chmod":
        if os.geteuid() == 0:
            pytest.skip("root may write anywhere")
        locked = work / "locked"
        locked.mkdir()
        locked.chmod(0o500)
        out, extra = "locked/out.zarr", ()
    else:
        if not Path("/proc").is_dir():
            pytest.skip("no /proc")
        out, extra = "/proc/dkernel-test/out.zarr", ("--output-root", "/proc")
    path = work / "job.yaml"
    path.write_text(yaml.safe_dump(_spec(output=out)))
    for command in ("validate", "run"):
        err = io.StringIO()
        with redirect_stderr(err), redirect_stdout(io.StringIO()):
            code = main([command, str(path), *extra])
        assert code == 2, err.getvalue()
        assert "cannot write the results store" in err.getvalue()


# ------------------------------------------------------------------------------------------
# 4. silent nonsense
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("option", "pattern"),
    [
        ({"label_column": 10}, r"data\.label_column: column 10 does not exist .* 3 columns"),
        ({"label_column": -4}, r"column -4 does not exist"),
        ({"skip_columns": [0, 3]}, r"data\.skip_columns: column 3 does not exist"),
    ],
)
def test_columns_out_of_range_do_not_wrap(work, option, pattern) -> None:
    refused(work, _spec(data={"reader": "csv", "path": "data.csv", **option}), pattern)


def test_negative_columns_count_from_the_end(work) -> None:
    data = {"reader": "csv", "path": "data.csv", "label_column": -1}
    code, err = cli(work, _spec(data=data))
    assert code == 0, err


@pytest.mark.parametrize("seed", [-1, [0, -3]])
def test_kppr_negative_seed_rows(work, seed) -> None:
    refused(
        work, _spec(method="kppr", params={"seeds": {"s": seed}}), r"no negative rows|\[0, 80\)"
    )


def test_all_nan_file_is_reported_as_missing(work) -> None:
    (work / "data.csv").write_text("nan,nan\n?,nan\nNA,nan\n")
    refused(work, _spec(method="pck-spectral"), r"every value of .*data\.csv is missing")


# ------------------------------------------------------------------------------------------
# 5. non-finite values, for every method that does not handle them
# ------------------------------------------------------------------------------------------

#: A value for a required parameter, by kind (fine for the 80 × 3 table below).
REQUIRED_VALUES = {"int": 2, "int_list": [2]}


def _required_params(method: Method) -> dict:
    """The method's required parameters, each set to :data:`REQUIRED_VALUES` of its kind;
    fails naming a kind without one, so that a new method cannot skip these checks."""
    params = {}
    for p in method.params:
        if p.default is REQUIRED:
            assert p.kind in REQUIRED_VALUES, (
                f"method {method.name!r} requires params.{p.name} of kind {p.kind!r}: give "
                "REQUIRED_VALUES in tests/ops/test_hostile_input.py a value for it"
            )
            params[p.name] = REQUIRED_VALUES[p.kind]
    return params


#: Every registered method that reads tables, with its required parameters.
METHOD_PARAMS = {
    name: _required_params(method) for name, method in METHODS.items() if not method.needs_raster
}
#: The table methods that handle missing values, with the kernel they need for it (None: any).
HANDLED = {m: k for m, k in HANDLES_MISSING.items() if m in METHOD_PARAMS}
#: ... of which these handle them with any kernel.
NATIVE = {m for m, kernel in HANDLED.items() if kernel is None}


def _with(work: Path, value: str, row: int = 7, col: int = 1) -> None:
    lines = (work / "data.csv").read_text().splitlines()
    cells = lines[row].split(",")
    cells[col] = value
    lines[row] = ",".join(cells)
    (work / "data.csv").write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize("method", sorted(METHOD_PARAMS))
def test_infinite_values_are_refused_naming_row_and_column(work, method) -> None:
    _with(work, "inf")
    refused(
        work,
        _spec(method=method, params=METHOD_PARAMS[method]),
        r"1 infinite values.* row 7, column 1",
        "run" if method == "kppr" else "validate",
    )


@pytest.mark.parametrize("method", sorted(set(METHOD_PARAMS) - NATIVE))
def test_missing_values_are_refused_unless_handled(work, method) -> None:
    _with(work, "nan", row=4, col=2)
    refused(
        work,
        _spec(method=method, params=METHOD_PARAMS[method]),
        r"does not handle missing values \(1 NaN found\).* row 4, column 2",
    )


@pytest.mark.parametrize("method", sorted(HANDLED))
def test_missing_values_pass_where_handled(work, method) -> None:
    _with(work, "nan", row=4, col=2)
    params = dict(METHOD_PARAMS[method])
    if HANDLED[method] is not None:
        params["kernel"] = HANDLED[method]
    code, err = cli(work, _spec(method=method, params=params))
    assert code == 0, err


def test_nonfinite_check_on_dask_data_is_chunkwise(work) -> None:
    from dataclasses import replace

    import dask.array as da

    from dkernel.errors import InvalidInputError
    from dkernel.io.data import LoadedData
    from dkernel.jobs.runner import check_finite
    from dkernel.jobs.spec import validate_spec

    X = np.ones((1000, 4))
    X[613, 3] = np.nan
    spec = validate_spec(_spec(method="esn", params={"washout": 10}))  # refuses NaN
    data = LoadedData(X=da.from_array(X, chunks=(100, 4)), meta={"source": "lazy"})
    with pytest.raises(InvalidInputError, match="row 613, column 3"):
        check_finite(spec, data)
    check_finite(replace(spec, method="pck-spectral"), data)  # handled
    X[77, 0] = np.inf  # a method that models NaN still needs finite values
    data = LoadedData(X=da.from_array(X, chunks=(100, 4)), meta={"source": "lazy"})
    with pytest.raises(InvalidInputError, match="1 infinite values.*row 77, column 0"):
        check_finite(replace(spec, method="pck-spectral"), data)


# ------------------------------------------------------------------------------------------
# 6. count parameters are capped
# ------------------------------------------------------------------------------------------


@pytest.fixture()
def image_spec(work, ops) -> dict:
    ops.synthetic_image(work / "image.npy")
    return _spec(
        method="mssc",
        data={"reader": "npy-raster", "path": "image.npy"},
        params={"n_clusters": 4, "write_geotiff": False, "write_png": False},
    )


def test_mssc_n_init_is_capped(work, image_spec) -> None:
    image_spec["params"]["n_init"] = 1_000_000_000
    refused(work, image_spec, r"params\.n_init: must be an int >= 1 and <= 10000", "run")


def test_n_rff_as_text_is_explained(work, image_spec) -> None:
    text = yaml.safe_dump(image_spec, sort_keys=False).replace(
        "n_clusters: 4", "n_clusters: 4\n  n_rff: 1e9"
    )
    refused(work, text, r"YAML reads 1e9 as text; write the number out \(1000000000\)")


def test_too_costly_count_names_an_alternative(work, image_spec) -> None:
    image_spec["params"]["n_rff"] = 900_000
    image_spec["limits"] = {"max_memory": "1GiB"}
    refused(work, image_spec, r"Scalable alternative: lower params\.n_rff \(900,000; default")


@pytest.mark.parametrize(
    ("params", "pattern"),
    [
        ({"n_clusters": 2, "n_init": 10**6}, r"n_init: must be an int >= 1 and <= 10000"),
        ({"n_clusters": 10**12}, r"n_clusters: must be an int >= 1 and <= 100000"),
        ({"n_clusters": 2, "block_rows": 2**40}, r"block_rows: must be an int >= 16"),
    ],
)
def test_every_integer_is_bounded(work, params, pattern) -> None:
    refused(work, _spec(params=params), pattern)


# ------------------------------------------------------------------------------------------
# 9. every reader failure is a DKernelError naming the file
# ------------------------------------------------------------------------------------------


def test_garbage_geotiff_is_a_message(work) -> None:
    (work / "scene.tif").write_bytes(b"not a tiff at all" * 10)
    spec = _spec(method="mssc", data={"reader": "geotiff", "path": "scene.tif"}, params={})
    refused(work, spec, r"scene\.tif")


def test_non_utf8_csv_is_a_message(work) -> None:
    (work / "data.csv").write_bytes(b"\xff\xfe\x00garbage\n")
    refused(work, _spec(), r"data\.csv")


# ------------------------------------------------------------------------------------------
# 8. data-root confinement, no file contents in messages, relative stored tracebacks
# ------------------------------------------------------------------------------------------


def test_data_root_refuses_paths_outside(work, monkeypatch) -> None:
    inside = work / "data"
    inside.mkdir()
    (inside / "ok.csv").write_text((work / "data.csv").read_text())
    (inside / "escape.csv").symlink_to(work / "data.csv")
    monkeypatch.setenv("DKERNEL_DATA_ROOT", str(inside))
    refused(work, _spec(), r"data\.path: .*data\.csv is outside the data root")
    refused(work, _spec(data={"reader": "csv", "path": "data/escape.csv"}), r"outside the data")
    code, err = cli(work, _spec(data={"reader": "csv", "path": "data/ok.csv"}))
    assert code == 0, err
    refused(work, _spec(runtime={"data_root": str(work)}), r"may only narrow the data root")


def test_spec_data_root(work) -> None:
    (work / "data").mkdir()
    refused(work, _spec(runtime={"data_root": "data"}), r"outside the data root")


def test_messages_do_not_quote_file_contents(work) -> None:
    secret = "root:x:0:0:root:/root:/bin/bash"
    (work / "passwd").write_text(f"{secret}\ndaemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n")
    err = refused(work, _spec(data={"reader": "csv", "path": "passwd"}), r"31-character text")
    assert "root:" not in err and "daemon" not in err


def test_stored_tracebacks_have_relative_paths(tmp_path) -> None:
    import sys

    from dkernel.storage.store import ResultsStore

    store = ResultsStore.create(tmp_path / "s.zarr", job={"name": "x"}, seed=0)
    try:
        np.linalg.cholesky(-np.eye(2))  # raises inside numpy (site-packages)
    except Exception as exc:  # noqa: BLE001
        store.mark_failed(exc)
    tb = store.attrs["traceback"]
    assert "LinAlgError" in tb and "<python>/numpy/" in tb, tb
    repo = str(Path(__file__).resolve().parents[2])
    for prefix in {sys.prefix, repo, str(Path.home())}:
        assert prefix + os.sep not in tb, prefix


def test_unexpected_errors_print_no_traceback_unless_debug(tmp_path, monkeypatch) -> None:
    """An unexpected error inside ``dkernel show``: exit 1 with one line naming the error;
    ``--log-level debug`` shows the traceback. (Hand-edited attributes no longer trip ``show``:
    tests/ops/test_show_hostile.py.)"""
    import dkernel.storage
    from dkernel.storage.store import ResultsStore

    def odd(path):
        raise ValueError("odd store")

    monkeypatch.setattr(dkernel.storage, "describe_store", odd)
    store = ResultsStore.create(tmp_path / "odd.zarr", job={"name": "x"}, seed=0)
    err = io.StringIO()
    with redirect_stderr(err), redirect_stdout(io.StringIO()):
        code = main(["show", str(store.path)])
    assert code == 1, err.getvalue()
    assert "unexpected error" in err.getvalue() and "--log-level debug" in err.getvalue()
    assert "Traceback" not in err.getvalue()
    with pytest.raises(ValueError), redirect_stdout(io.StringIO()):
        main(["show", str(store.path), "--log-level", "debug"])
