"""Inputs confined to the data root and read within limits checked before the work (issue 54):
STAC asset hrefs, Parquet folder members and links checked by the one data-root function;
CSV headers, compressed and remote inputs, delimiters, STAC grids, HTTP responses, declared
array shapes and chunk bombs of results stores, each bounded.

Refusals go through ``dkernel.cli.main``: exit 2, a message naming the problem and the fix,
no traceback, within :data:`MAX_SECONDS` and :data:`MAX_MIB` of Python allocations (the
peak RSS where a C library allocates), before any cluster starts and without creating the
output store.
"""

from __future__ import annotations

import bz2
import gzip
import http.server
import io
import json
import lzma
import re
import resource
import threading
import time
import tracemalloc
import zipfile
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import yaml

from dkernel.cli import main
from tests.limits import REFUSAL_S

#: Bounds of a refusal: Python allocations (MiB), and seconds as a hang guard (tests/limits.py).
MAX_MIB = 500
MAX_SECONDS = REFUSAL_S

MSSC = {"n_clusters": 3, "write_geotiff": False, "write_png": False}


@dataclass
class Outcome:
    code: int
    err: str
    seconds: float
    mib: float


@pytest.fixture()
def work(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for var in ("DKERNEL_OUTPUT_ROOT", "DKERNEL_DATA_ROOT", "DKERNEL_MAX_MEMORY"):
        monkeypatch.delenv(var, raising=False)
    rng = np.random.default_rng(0)
    rows = rng.normal(size=(40, 3)).round(4)
    (tmp_path / "data.csv").write_text("\n".join(",".join(map(str, r)) for r in rows) + "\n")
    return tmp_path


@pytest.fixture(scope="module", autouse=True)
def imported():
    """Import what a job reads with once, outside the measured calls."""
    import pandas  # noqa: F401
    import pyarrow.parquet  # noqa: F401
    import rasterio  # noqa: F401
    import xarray  # noqa: F401

    import dkernel.jobs.runner  # noqa: F401
    from dkernel.io.registry import READERS
    from dkernel.jobs.registry import METHODS

    READERS.names(), METHODS.names()


@pytest.fixture(autouse=True)
def no_cluster(monkeypatch):
    """A refusal comes before any cluster: starting one fails the case (exit 1, not 2)."""

    def refuse(*args, **kwargs):
        raise RuntimeError("a cluster was started")

    monkeypatch.setattr("dkernel.runtime.connect", refuse)


def _spec(**top) -> dict:
    spec = {
        "name": "limits",
        "data": {"reader": "csv", "path": "data.csv"},
        "method": "rbf-spectral",
        "params": {"n_clusters": 2},
        "output": "out.zarr",
    }
    spec.update(top)
    return spec


def _image_spec(data: dict) -> dict:
    return _spec(method="mssc", data=data, params=dict(MSSC))


def cli(work: Path, args: list[str]) -> Outcome:
    err = io.StringIO()
    tracemalloc.start()
    start = time.perf_counter()
    try:
        with redirect_stderr(err), redirect_stdout(io.StringIO()):
            code = main(args)
    finally:
        seconds = time.perf_counter() - start
        peak = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
    return Outcome(code, err.getvalue(), seconds, peak)


def job(work: Path, spec: dict, command: str = "validate") -> Outcome:
    path = work / "job.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    args = [command, str(path)]
    if command == "run":
        args += ["--no-progress", "--workers", "1", "--threads", "1"]
    return cli(work, args)


def refused(work: Path, spec: dict, pattern: str, command: str = "validate") -> str:
    """Exit 2, the message matches, no traceback, bounded, no store."""
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    out = job(work, spec, command)
    grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss) / 1024
    assert out.code == 2, f"exit {out.code}: {out.err}"
    assert re.search(pattern, out.err, re.S), f"{pattern!r} not in {out.err!r}"
    assert "Traceback" not in out.err
    assert out.seconds <= MAX_SECONDS, out.seconds
    assert out.mib <= MAX_MIB and grown <= MAX_MIB, (out.mib, grown)
    assert not (work / "out.zarr").exists(), "a store was created"
    return out.err


def accepted(work: Path, spec: dict) -> None:
    out = job(work, spec)
    assert out.code == 0, out.err


# ------------------------------------------------------------------------------------------
# builders
# ------------------------------------------------------------------------------------------


@pytest.fixture()
def rooted(work, monkeypatch):
    """``work/root`` as DKERNEL_DATA_ROOT, ``work/outside`` beside it."""
    root, outside = work / "root", work / "outside"
    root.mkdir()
    outside.mkdir()
    monkeypatch.setenv("DKERNEL_DATA_ROOT", str(root))
    return root, outside


def stac_item(folder: Path, hrefs: dict[str, str], *, name: str = "item.json", **props) -> Path:
    """A STAC item of the 60 × 80 test scene (bands written beside it when the hrefs name
    them) with ``hrefs`` as its assets; ``props`` override its properties."""
    from tests.io.test_stac import bands, item_dict, write_band

    values = bands()
    for band, v in values.items():
        if not (folder / f"{band}.tif").exists():
            write_band(folder / f"{band}.tif", v)
    doc = item_dict(hrefs)
    doc["properties"].update(props)
    path = folder / name
    path.write_text(json.dumps(doc))
    return path


def parquet_folder(folder: Path, n_files: int = 2) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(1)
    for i in range(n_files):
        table = pa.table({"a": rng.normal(size=20), "b": rng.normal(size=20)})
        pq.write_table(table, folder / f"part-{i}.parquet")
    return folder


# ------------------------------------------------------------------------------------------
# 1. the data root: STAC hrefs, Parquet members and links, through one function
# ------------------------------------------------------------------------------------------

pytest.importorskip("pystac", reason="needs the cloud extra")


def test_stac_file_url_outside_the_root_is_its_local_path(work, rooted, monkeypatch) -> None:
    """The issue's case: ``file:///outside/x.tif`` was resolved as a relative path under the
    working directory (inside the root) and read."""
    root, outside = rooted
    stac_item(outside, {})
    (root / "cwd").mkdir()
    monkeypatch.chdir(root / "cwd")
    href = (outside / "red.tif").as_uri()
    stac_item(root, {"red": href})
    err = refused(
        work,
        _image_spec({"reader": "stac", "path": str(root / "item.json")}),
        r"reader 'stac' would read file://.*outside/red\.tif \(the local file .*outside/red"
        r"\.tif\), which is outside the data root",
    )
    assert "DKERNEL_DATA_ROOT" in err


@pytest.mark.parametrize(
    "href",
    [
        "s3://bucket/scene/red.tif",
        "gs://bucket/red.tif",
        "https://example.invalid/red.tif",
        "/vsicurl/https://example.invalid/red.tif",
        "/vsis3/bucket/red.tif",
        "az://container/red.tif",
    ],
)
def test_stac_remote_asset_under_a_data_root(work, rooted, href) -> None:
    root, _ = rooted
    stac_item(root, {"red": href})
    refused(
        work,
        _image_spec({"reader": "stac", "path": "root/item.json"}),
        r"would read .* is a remote input, and a data root .* confines this job to local files",
    )


def test_stac_relative_href_climbing_out_of_the_root(work, rooted) -> None:
    root, outside = rooted
    stac_item(outside, {})
    stac_item(root, {"red": "../outside/red.tif"})
    refused(
        work,
        _image_spec({"reader": "stac", "path": "root/item.json"}),
        r"would read .*outside/red\.tif, which is outside the data root",
    )


def test_stac_asset_linked_outside_the_root(work, rooted) -> None:
    root, outside = rooted
    stac_item(outside, {})
    (root / "red.tif").symlink_to(outside / "red.tif")
    stac_item(root, {"red": "red.tif"})
    refused(
        work,
        _image_spec({"reader": "stac", "path": "root/item.json"}),
        r"would read .*root/red\.tif \(a link to .*outside/red\.tif\), which is outside",
    )


def test_stac_asset_that_is_a_vrt_of_a_file_outside(work, rooted) -> None:
    """A VRT asset inside the root is an indirection GDAL would follow: refused."""
    root, outside = rooted
    stac_item(outside, {})
    (root / "red.vrt").write_text(
        '<VRTDataset rasterXSize="80" rasterYSize="60"><VRTRasterBand dataType="UInt16" '
        f'band="1"><SimpleSource><SourceFilename relativeToVRT="0">{outside / "red.tif"}'
        "</SourceFilename><SourceBand>1</SourceBand></SimpleSource></VRTRasterBand>"
        "</VRTDataset>"
    )
    stac_item(root, {"red": "red.vrt"})
    refused(work, _image_spec({"reader": "stac", "path": "root/item.json"}), r"red\.vrt")


def test_stac_asset_sidecar_linked_outside_is_not_read(work, rooted) -> None:
    """GDAL would read ``red.tif.aux.xml`` with ``red.tif``; with its sidecar lookup off
    (``dkernel.io.gdal.NETWORK_OFF``) it never opens it, so a link of it leading out is not
    a file the job reads."""
    root, outside = rooted
    stac_item(root, {"red": "red.tif"})
    (outside / "red.tif.aux.xml").write_text("<PAMDataset></PAMDataset>")
    (root / "red.tif.aux.xml").symlink_to(outside / "red.tif.aux.xml")
    accepted(work, _image_spec({"reader": "stac", "path": "root/item.json"}))


def test_stac_assets_inside_the_root_pass(work, rooted) -> None:
    root, _ = rooted
    stac_item(root, {"red": "red.tif", "nir": (root / "nir.tif").as_uri()})
    accepted(work, _image_spec({"reader": "stac", "path": "root/item.json"}))


def test_only_the_assets_read_are_confined(work, rooted) -> None:
    """A thumbnail on the web is not read when data.assets names the bands."""
    root, _ = rooted
    stac_item(root, {"red": "red.tif", "thumbnail": "https://example.invalid/t.png"})
    spec = _image_spec({"reader": "stac", "path": "root/item.json", "assets": ["red"]})
    accepted(work, spec)
    spec["data"].pop("assets")
    refused(work, spec, r"t\.png is a remote input")


def test_stac_document_outside_the_root(work, rooted) -> None:
    _, outside = rooted
    stac_item(outside, {"red": "red.tif"})
    refused(
        work,
        _image_spec({"reader": "stac", "path": "outside/item.json"}),
        r"data\.path: .*outside/item\.json is outside the data root",
    )


@pytest.mark.parametrize("command", ["validate", "run"])
def test_parquet_folder_member_linked_outside_the_root(work, rooted, command) -> None:
    """The issue's case: single files were checked, a folder's members were not."""
    root, outside = rooted
    folder = parquet_folder(root / "table")
    parquet_folder(outside / "secret", 1)
    (folder / "part-9.parquet").symlink_to(outside / "secret" / "part-0.parquet")
    refused(
        work,
        _spec(data={"reader": "parquet", "path": "root/table"}),
        r"reader 'parquet' would read .*part-9\.parquet \(a link to .*outside/secret/"
        r"part-0\.parquet\), which is outside the data root",
        command,
    )


def test_parquet_subfolder_linked_outside_the_root(work, rooted) -> None:
    root, outside = rooted
    folder = parquet_folder(root / "table")
    parquet_folder(outside / "more")
    (folder / "year=2024").symlink_to(outside / "more")
    refused(
        work,
        _spec(data={"reader": "parquet", "path": "root/table"}),
        r"year=2024 \(a link to .*outside/more\), which is outside the data root",
    )


def test_parquet_member_linked_through_a_folder_inside_the_root(work, rooted) -> None:
    """A link to a folder inside the root whose own member links outside: followed."""
    root, outside = rooted
    folder = parquet_folder(root / "table")
    other = root / "other"
    other.mkdir()
    parquet_folder(outside / "secret", 1)
    (other / "x.parquet").symlink_to(outside / "secret" / "part-0.parquet")
    (folder / "more").symlink_to(other)
    refused(
        work,
        _spec(data={"reader": "parquet", "path": "root/table"}),
        r"x\.parquet \(a link to .*outside/secret/part-0\.parquet\)",
    )


def test_parquet_folder_with_links_inside_the_root_passes(work, rooted) -> None:
    root, _ = rooted
    folder = parquet_folder(root / "table")
    parquet_folder(root / "shared", 1)
    (folder / "part-7.parquet").symlink_to(root / "shared" / "part-0.parquet")
    accepted(work, _spec(data={"reader": "parquet", "path": "root/table"}))


def test_parquet_file_url_outside_the_root(work, rooted) -> None:
    _, outside = rooted
    parquet_folder(outside / "t", 1)
    url = (outside / "t" / "part-0.parquet").as_uri()
    refused(
        work,
        _spec(data={"reader": "parquet", "path": url}),
        r"data\.path: .*outside/t/part-0\.parquet is outside the data root",
    )


@pytest.mark.parametrize("reader", ["csv", "parquet"])
def test_remote_table_under_a_data_root(work, rooted, reader) -> None:
    refused(
        work,
        _spec(data={"reader": reader, "path": "s3://bucket/t.csv"}),
        r"data\.path: s3://bucket/t\.csv is a remote input, and a data root",
    )


def test_parquet_folder_of_too_many_entries(work, rooted, monkeypatch) -> None:
    root, _ = rooted
    folder = parquet_folder(root / "table", 1)
    for i in range(30):
        (folder / f"empty-{i}").mkdir()
    monkeypatch.setattr("dkernel.io.readers.parquet.MAX_PARQUET_ENTRIES", 20)
    refused(work, _spec(data={"reader": "parquet", "path": "root/table"}), r"more than 20 files")


def test_confine_is_the_one_check() -> None:
    """Every form of href goes through :func:`dkernel.io.files.confine`."""
    from dkernel.errors import InvalidInputError
    from dkernel.io.files import confine

    root = Path("/srv/data")
    assert confine("file:///srv/data/a.tif", root) == Path("/srv/data/a.tif")
    assert confine("/srv/data/x/../a.tif", root) == Path("/srv/data/a.tif")
    for href in ("file:///etc/passwd", "/srv/data/../etc", "s3://b/k", "/vsicurl/http://h/x"):
        with pytest.raises(InvalidInputError, match="data root"):
            confine(href, root)


# ------------------------------------------------------------------------------------------
# 1b. relative asset hrefs beside a document on an object store
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("base", "href", "joined"),
    [
        ("s3://bkt/a/item.json", "red.tif", "s3://bkt/a/red.tif"),
        ("s3://bkt/a/b/item.json", "../c/red.tif", "s3://bkt/a/c/red.tif"),
        ("s3://bkt/a/item.json", "../../../red.tif", "s3://bkt/red.tif"),
        ("gs://bkt/item.json", "./x/red.tif", "gs://bkt/x/red.tif"),
        ("https://h:8/x/item.json?sig=1", "red.tif", "https://h:8/x/red.tif"),
        ("/vsis3/bkt/k/item.json", "red.tif", "s3://bkt/k/red.tif"),
        ("file:///data/item.json", "red.tif", "/data/red.tif"),
        ("/data/s/item.json", "../red.tif", "/data/red.tif"),
    ],
)
def test_relative_asset_href_joins(base, href, joined) -> None:
    from dkernel.io.stac import _join

    assert _join(base, href) == joined


def test_stac_item_on_s3_with_relative_hrefs(work, s3_server, s3_bucket) -> None:
    """The issue's case: a documented relative href on S3 failed (``urljoin`` does not join
    ``s3://``); read here through the loopback S3 server."""
    import dask
    import s3fs

    from dkernel.io.stac import open_stac
    from tests.io.test_stac import bands

    stac_item(work, {"red": "red.tif", "nir": "bands/nir.tif"})
    fs = s3fs.S3FileSystem(client_kwargs={"endpoint_url": s3_server}, skip_instance_cache=True)
    fs.put(str(work / "red.tif"), f"{s3_bucket}/scene/red.tif")
    fs.put(str(work / "nir.tif"), f"{s3_bucket}/scene/bands/nir.tif")
    fs.put(str(work / "item.json"), f"{s3_bucket}/scene/item.json")
    with dask.config.set(scheduler="threads"):
        cube = open_stac(f"s3://{s3_bucket}/scene/item.json", assets=["red", "nir"])
        values = cube.values
    expected = bands()
    np.testing.assert_array_equal(values, np.stack([expected["red"], expected["nir"]]))


# ------------------------------------------------------------------------------------------
# 2. CSV: header width, compressed and oversized text, delimiters taken literally
# ------------------------------------------------------------------------------------------


def test_csv_header_of_ten_million_columns(work) -> None:
    """The issue's case: 10⁷ columns on two lines crashed the parser (SIGSEGV /
    ``std::bad_alloc``); the first line is measured before pandas runs."""
    with open(work / "wide.csv", "wb") as fh:
        fh.write(b"1," * (10**7 - 1) + b"1\n")
        fh.write(b"2," * (10**7 - 1) + b"2\n")
    refused(
        work,
        _spec(data={"reader": "csv", "path": "wide.csv"}),
        r"wide\.csv: its first line is longer than 16,777,216 bytes; a table of at most "
        r"100,000 columns is read\. Check data\.delimiter",
        "run",
    )


@pytest.mark.parametrize(("delimiter", "sep"), [(",", ","), (";", ";"), (None, " "), ("::", "::")])
def test_csv_of_too_many_columns(work, delimiter, sep) -> None:
    line = sep.join(["1"] * 100_001)
    (work / "wide.csv").write_text(f"{line}\n{line}\n")
    refused(
        work,
        _spec(data={"reader": "csv", "path": "wide.csv", "delimiter": delimiter}),
        r"its first line has 100,001 fields; a table of at most 100,000 columns",
        "run",
    )


def test_csv_header_width_counted_after_blank_lines(work) -> None:
    line = ",".join(["1"] * 100_001)
    (work / "wide.csv").write_text(f"\n\n   \n{line}\n")
    refused(work, _spec(data={"reader": "csv", "path": "wide.csv"}), r"100,001 fields", "run")


def _gzip_bomb(path: Path, member_mib: int = 64, members: int = 64) -> Path:
    """A gzip of ``members`` gzip members of ``member_mib`` MiB of CSV text each: 4 GiB of
    text in about 4 MB (the issue's bomb), built from one compressed member."""
    member = gzip.compress(b"0,0\n" * (member_mib << 18), compresslevel=9)
    with open(path, "wb") as fh:
        for _ in range(members):
            fh.write(member)
    return path


def test_gzip_csv_inflating_to_four_gigabytes(work, monkeypatch) -> None:
    """The issue's case: 4 MB of gzip inflated to 4 GB took 4.4 GB before an empty
    ``MemoryError``; it is now decompressed as a counted stream up to the cap (64 MiB under
    a 256 MiB memory limit, so the case stays quick on a loaded machine)."""
    monkeypatch.setenv("DKERNEL_MAX_MEMORY", "256MiB")
    bomb = _gzip_bomb(work / "bomb.csv.gz")
    assert bomb.stat().st_size < 16 << 20
    refused(
        work,
        _spec(data={"reader": "csv", "path": "bomb.csv.gz"}),
        r"data\.path: .*bomb\.csv\.gz holds more than 67,108,864 bytes once decompressed; at "
        r"most 67,108,864 are read\. pandas parses a table whole.*DKERNEL_MAX_MEMORY",
        "run",
    )


def _stream_bomb(kind: str, path: Path, mib: int = 80) -> Path:
    """``mib`` MiB of CSV text compressed ``kind`` (several streams of 8 MiB, each compressed
    once)."""
    text = b"0,0\n" * (8 << 18)
    if kind == "zip":
        with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z:
            z.writestr("t.csv", text * (mib // 8))
        return path
    one = {"bz2": bz2.compress, "xz": lzma.compress, "gz": gzip.compress}[kind](text)
    path.write_bytes(one * (mib // 8))
    return path


@pytest.mark.parametrize("kind", ["gz", "bz2", "xz", "zip"])
def test_compressed_csv_beyond_the_cap(work, monkeypatch, kind) -> None:
    """With a 256 MiB memory limit a table may hold 64 MiB of text: 80 MiB compressed in
    each form is refused once 64 MiB are counted."""
    monkeypatch.setenv("DKERNEL_MAX_MEMORY", "256MiB")
    _stream_bomb(kind, work / f"t.csv.{kind}")
    refused(
        work,
        _spec(data={"reader": "csv", "path": f"t.csv.{kind}"}),
        r"holds more than 67,108,864 bytes once decompressed",
        "run",
    )


def test_plain_csv_beyond_the_cap_refused_from_its_size(work, monkeypatch) -> None:
    """A sparse file of 2 GiB is refused from ``fstat``, not read."""
    monkeypatch.setenv("DKERNEL_MAX_MEMORY", "256MiB")
    with open(work / "big.csv", "wb") as fh:
        fh.write(b"1,2\n")
        fh.truncate(2 << 30)
    refused(
        work,
        _spec(data={"reader": "csv", "path": "big.csv"}),
        r"big\.csv holds more than 67,108,864 bytes; at most 67,108,864 are read",
        "run",
    )


def test_the_cap_follows_the_memory_limit(monkeypatch) -> None:
    from dkernel.io.readers.tables import CSV_MIN_BYTES, csv_max_bytes

    monkeypatch.setenv("DKERNEL_MAX_MEMORY", "1GiB")
    assert csv_max_bytes() == 256 << 20
    monkeypatch.setenv("DKERNEL_MAX_MEMORY", "1kB")
    assert csv_max_bytes() == CSV_MIN_BYTES


@pytest.mark.parametrize("kind", ["gz", "bz2", "xz", "zip"])
def test_compressed_csv_reads_as_the_plain_one(work, kind) -> None:
    from dkernel.io.readers.tables import load_csv

    text = (work / "data.csv").read_bytes()
    target = work / f"data.csv.{kind}"
    if kind == "zip":
        with zipfile.ZipFile(target, "w") as z:
            z.writestr("data.csv", text)
    else:
        target.write_bytes(
            {"gz": gzip.compress, "bz2": bz2.compress, "xz": lzma.compress}[kind](text)
        )
    plain = load_csv(str(work / "data.csv"))
    packed = load_csv(str(target))
    np.testing.assert_array_equal(plain.X, packed.X)


def test_corrupt_gzip_csv(work) -> None:
    (work / "t.csv.gz").write_bytes(gzip.compress(b"1,2\n" * 1000)[:-40] + b"garbage!")
    refused(
        work,
        _spec(data={"reader": "csv", "path": "t.csv.gz"}),
        r"could not decompress .*t\.csv\.gz \(gzip\)",
        "run",
    )


@pytest.mark.parametrize("name", ["t.tar", "t.tar.gz", "t.tgz"])
def test_tar_archive_csv(work, name) -> None:
    (work / name).write_bytes(b"\0" * 1024)
    refused(work, _spec(data={"reader": "csv", "path": name}), r"is a tar archive; extract", "run")


def test_regex_delimiter_is_literal_and_fast(work) -> None:
    """The issue's case: ``delimiter: '(a+)+b'`` was a regular expression, and a line of
    ``a`` s backtracked for ever; it is now taken literally."""
    (work / "t.csv").write_text("a" * 5000 + "c(a+)+b1\n" + "1(a+)+b2\n")
    refused(
        work,
        _spec(data={"reader": "csv", "path": "t.csv", "delimiter": "(a+)+b"}),
        r"row 1, column 0 holds a 5001-character text, which is not a number",
        "run",
    )


@pytest.mark.parametrize("delimiter", ["(a+)+b", "::", "||", ".*", "\\s", "[,;]", " | "])
def test_multi_character_delimiter_is_literal(work, delimiter) -> None:
    from dkernel.io.readers.tables import load_csv

    rows = [[1.5, 2.0, -3.0], [4.0, 5.25, 6.0], [7.0, 8.0, 9.5]]
    (work / "t.csv").write_text("".join(delimiter.join(map(str, r)) + "\n" for r in rows))
    loaded = load_csv(str(work / "t.csv"), delimiter=delimiter)
    np.testing.assert_array_equal(loaded.X, np.array(rows))


def test_multi_character_delimiter_short_row(work) -> None:
    (work / "t.csv").write_text("1::2::3\n4::5\n")
    refused(
        work,
        _spec(data={"reader": "csv", "path": "t.csv", "delimiter": "::"}),
        r"row 2 has 2 fields, expected 3",
        "run",
    )


@pytest.mark.parametrize("delimiter", ["", "\n", '"', "a\nb"])
def test_delimiter_that_cannot_separate_fields(work, delimiter) -> None:
    refused(
        work,
        _spec(data={"reader": "csv", "path": "data.csv", "delimiter": delimiter}),
        r"data\.delimiter .* cannot separate fields",
        "run",
    )


# ------------------------------------------------------------------------------------------
# 3. STAC grids checked against the memory budget before a cube is built
# ------------------------------------------------------------------------------------------


def test_stac_declared_shape_far_beyond_its_asset(work) -> None:
    """The issue's case: ``proj:shape`` [10⁵, 10⁵] over a 60 × 80 asset started computing a
    10¹⁰-pixel cube; refused from the grid, before any task graph."""
    stac_item(work, {"red": "red.tif", "nir": "nir.tif"}, **{"proj:shape": [100_000, 100_000]})
    refused(
        work,
        _image_spec({"reader": "stac", "path": "item.json"}),
        r"the STAC items' grid of 2 bands × 100,000 × 100,000 pixels needs about [\d.]+ GiB "
        r"of memory, above the limit .* proj:shape",
        "run",
    )


def test_stac_resolution_far_finer_than_the_asset(work) -> None:
    stac_item(work, {"red": "red.tif"})
    refused(
        work,
        _image_spec({"reader": "stac", "path": "item.json", "resolution": 0.01}),
        r"grid of 1 bands × 180,000 × 240,000 pixels needs about",
        "run",
    )


def test_stac_grid_within_a_smaller_memory_limit(work, monkeypatch) -> None:
    """The budget is the memory limit: 10⁴ × 10⁴ pixels pass 4 GiB, not 100 MiB."""
    from dkernel._budget import check_image_size
    from dkernel.errors import ResourceLimitError

    check_image_size(2, 10_000, 10_000)
    monkeypatch.setenv("DKERNEL_MAX_MEMORY", "100MiB")
    with pytest.raises(ResourceLimitError, match=r"2 bands × 10,000 × 10,000 pixels"):
        check_image_size(2, 10_000, 10_000)


# ------------------------------------------------------------------------------------------
# 4. HTTP inputs and stores: bodies of bounded length
# ------------------------------------------------------------------------------------------


class EndlessHandler(http.server.BaseHTTPRequestHandler):
    """Answers every GET with a body that never ends (no length declared); ``/sized/...``
    declares a length of 10¹² bytes instead."""

    protocol_version = "HTTP/1.0"

    def log_message(self, *args) -> None:
        pass

    def do_HEAD(self) -> None:
        self.send_response(200)
        if self.path.startswith("/sized/"):
            self.send_header("Content-Length", str(10**12))
        self.end_headers()

    def do_GET(self) -> None:
        self.do_HEAD()
        block = b"0," * 32768
        try:
            while True:
                self.wfile.write(block)
        except OSError:
            pass


@pytest.fixture()
def endless():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), EndlessHandler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_csv_url_streaming_an_endless_body(work, endless, monkeypatch) -> None:
    monkeypatch.setenv("DKERNEL_MAX_MEMORY", "256MiB")
    monkeypatch.setattr("dkernel.io.remote.CHECK_SECONDS", 2.0)
    spec = _spec(data={"reader": "csv", "path": f"{endless}/table.csv"})
    refused(work, spec, r"table\.csv holds more than 67,108,864 bytes", "run")


def test_csv_url_declaring_a_huge_length(work, endless) -> None:
    spec = _spec(data={"reader": "csv", "path": f"{endless}/sized/table.csv"})
    refused(work, spec, r"table\.csv holds more than [\d,]+ bytes", "run")


def test_stac_url_streaming_an_endless_body(work, endless) -> None:
    refused(
        work,
        _image_spec({"reader": "stac", "path": f"{endless}/item.json"}),
        r"the STAC document: .*item\.json holds more than 67,108,864 bytes.*pystac-client",
        "run",
    )


def test_show_of_an_http_store_streaming_an_endless_body(work, endless) -> None:
    out = cli(work, ["show", f"{endless}/x.zarr"])
    assert out.code == 2, out.err
    assert re.search(r"its metadata file .*zarr\.json is more than 16,777,216 bytes", out.err)
    assert "Traceback" not in out.err and out.mib <= MAX_MIB


def test_open_results_of_an_endless_http_store(endless) -> None:
    from dkernel.errors import StoreError
    from dkernel.storage.store import open_results

    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(StoreError, match=r"more than 16,777,216 bytes"):
        open_results(f"{endless}/y.zarr")
    assert (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss) / 1024 < MAX_MIB


def test_zarr_reads_over_http_stop_at_the_metadata_cap(endless, monkeypatch) -> None:
    """What Zarr itself reads of an HTTP store (no range asked) is cut at the cap too."""
    from dkernel.storage import remote

    monkeypatch.setattr(remote, "MAX_HTTP_METADATA_BYTES", 1 << 20)
    fs, path = remote.filesystem(f"{endless}/z.zarr/zarr.json")
    with pytest.raises(remote.ResponseTooLarge, match=r"sent more than 1,048,576 bytes"):
        fs.cat_file(path)
    assert len(fs.cat_file(path, start=0, end=1000)) == 1000  # a range: its first bytes


# ------------------------------------------------------------------------------------------
# 5. results stores: declared shapes and chunk bombs
# ------------------------------------------------------------------------------------------


def _results(path: Path, *, shape=(10, 2), chunks=None, compressors="auto", status=True):
    """A complete results store holding ``/embedding/embedding`` (consolidated)."""
    import zarr

    from dkernel.storage.store import ResultsStore

    store = ResultsStore.create(path, job={"name": "x", "method": "rbf-spectral"}, seed=0)
    group = zarr.open_group(str(path), mode="a").require_group("embedding")
    arr = group.create_array(
        "embedding",
        shape=shape,
        chunks=chunks or shape,
        dtype="f8",
        dimension_names=["sample", "component"][: len(shape)],
        compressors=compressors,
    )
    arr[...] = 1.0
    if status:
        store.mark_complete()
    return path


def _replace_chunk(path: Path, chunk: Path, payload: bytes) -> None:
    """Replace a chunk object of a complete store and record the new sizes in its manifest,
    as someone who can write the store can: the codec's bound, not the manifest, must stop
    the bomb."""
    import zarr

    from dkernel.storage.manifest import MANIFEST_ATTR, manifest_of

    chunk.write_bytes(payload)
    zarr.open_group(str(path), mode="a").attrs[MANIFEST_ATTR] = manifest_of(path, None)


def _declare(path: Path, **fields) -> None:
    """Edit the array's metadata (and its consolidated copy) as a hand edit would."""
    meta = path / "embedding" / "embedding" / "zarr.json"
    doc = json.loads(meta.read_text())
    doc.update(fields)
    meta.write_text(json.dumps(doc))
    root = path / "zarr.json"
    doc = json.loads(root.read_text())
    nodes = (doc.get("consolidated_metadata") or {}).get("metadata") or {}
    if "embedding/embedding" in nodes:
        nodes["embedding/embedding"].update(fields)
        root.write_text(json.dumps(doc))


def _chunks(shape: list[int]) -> dict:
    return {"chunk_grid": {"name": "regular", "configuration": {"chunk_shape": shape}}}


@pytest.mark.parametrize("complete", [True, False])
def test_array_declaring_shape_of_a_trillion_squared(work, complete) -> None:
    """The issue's case: refused with an empty cause; now the message names the shape."""
    path = _results(work / "r.zarr", status=complete)
    _declare(path, shape=[10**12, 10**12])
    out = cli(work, ["show", str(path)])
    assert out.code == 2, out.err
    assert re.search(
        r"declares shape \(1000000000000, 1000000000000\) in chunks of \(10, 2\): 5e\+22 "
        r"chunks, more than the 10,000,000 .* Restore that file, or remove the store",
        out.err,
    ), out.err
    assert "Traceback" not in out.err and out.seconds < MAX_SECONDS


@pytest.mark.parametrize(
    ("fields", "pattern"),
    [
        (dict(shape=[10], **_chunks([2**28])), r"2 GiB per chunk once decoded"),
        (dict(shape=[-5, 2]), r"declares shape \[-5, 2\], not a list of sizes"),
        (dict(shape=["10", 2]), r"not a list of sizes"),
        (dict(shape=[10**7, 10**7], **_chunks([1000, 1000])), r"1e\+08 chunks"),
    ],
)
def test_array_declaring_sizes_beyond_reading(work, fields, pattern) -> None:
    path = _results(work / "r.zarr", shape=(10,) if len(fields["shape"]) == 1 else (10, 2))
    _declare(path, **fields)
    out = cli(work, ["show", str(path)])
    assert out.code == 2 and re.search(pattern, out.err), out.err
    assert "Traceback" not in out.err


def test_open_results_names_the_declared_shape(work) -> None:
    from dkernel.errors import StoreError
    from dkernel.storage.store import open_results

    path = _results(work / "r.zarr")
    _declare(path, shape=[10**12, 10**12])
    with pytest.raises(StoreError, match=r"declares shape \(1000000000000, 1000000000000\)"):
        open_results(path)


def _zstd_bomb(total: int, *, declare: bool) -> bytes:
    from tests.ops.test_bounded_confined_reads import zstd_bomb

    return zstd_bomb(total, declare=declare)


@pytest.mark.parametrize("declare", [True, False])
def test_zstd_chunk_of_a_results_array_inflating_to_two_gib(work, declare) -> None:
    """The issue's case: a 64 KB zstd chunk decoded to 2 GiB before any size check (2.4 GB
    RSS); its frame headers are now bounded by the declared chunk before decoding."""
    from dkernel.storage.store import open_results

    path = _results(work / "r.zarr", shape=(100, 4))
    chunk = path / "embedding" / "embedding" / "c" / "0" / "0"
    _replace_chunk(path, chunk, _zstd_bomb(2 << 30, declare=declare))
    assert chunk.stat().st_size < 80 << 10
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    tree = open_results(path)
    with pytest.raises(ValueError, match=r"a zstd chunk would decode to more than [\d,]+ bytes"):
        tree["embedding"]["embedding"].values  # noqa: B018
    assert (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss) / 1024 < MAX_MIB


def test_blosc_chunk_declaring_more_than_its_shape(work) -> None:
    import struct

    from zarr.codecs import BloscCodec

    from dkernel.storage.store import open_results

    path = _results(work / "r.zarr", shape=(100, 4), compressors=[BloscCodec()])
    chunk = path / "embedding" / "embedding" / "c" / "0" / "0"
    head = bytearray(chunk.read_bytes())
    head[4:8] = struct.pack("<I", 2**31)
    chunk.write_bytes(bytes(head))
    with pytest.raises(ValueError, match=r"a blosc chunk would decode to 2,147,483,648 bytes"):
        open_results(path)["embedding"]["embedding"].values  # noqa: B018


def test_gzip_chunk_inflating_beyond_its_shape(work) -> None:
    from zarr.codecs import GzipCodec

    from dkernel.storage.store import open_results

    path = _results(work / "r.zarr", shape=(100, 4), compressors=[GzipCodec()])
    chunk = path / "embedding" / "embedding" / "c" / "0" / "0"
    _replace_chunk(path, chunk, gzip.compress(bytes(256 << 20), compresslevel=1))
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(ValueError, match=r"a gzip chunk would decode to more than 3,200 bytes"):
        open_results(path)["embedding"]["embedding"].values  # noqa: B018
    assert (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss) / 1024 < 100


@pytest.mark.parametrize("codec", ["zstd", "blosc", "gzip", "none"])
def test_bounded_codecs_read_what_zarr_wrote(work, codec) -> None:
    """The bounded decoders give Zarr's values back, bit for bit (and write as Zarr does)."""
    import zarr
    from zarr.codecs import BloscCodec, GzipCodec, ZstdCodec

    import dkernel.storage.array_limits  # noqa: F401  (installed)

    compressors = {"zstd": [ZstdCodec()], "blosc": [BloscCodec()], "gzip": [GzipCodec()]}
    values = np.random.default_rng(7).normal(size=(300, 7))
    arr = zarr.create_array(
        str(work / "a.zarr"),
        shape=values.shape,
        chunks=(64, 7),
        dtype="f8",
        compressors=compressors.get(codec),
    )
    arr[...] = values
    np.testing.assert_array_equal(zarr.open_array(str(work / "a.zarr"))[...], values)


@pytest.mark.parametrize(
    ("meta", "problem"),
    [
        ({"node_type": "group"}, None),
        ({"node_type": "array", "shape": [5], "data_type": "float64", **_chunks([5])}, None),
        ({"node_type": "array", "shape": [], "data_type": "float64", **_chunks([])}, None),
        ({"node_type": "array", "shape": [5], "data_type": "string", **_chunks([2**40])}, None),
        ({"node_type": "array", "shape": [2**40], "data_type": "int8", **_chunks([2**40])}, "GiB"),
        ({"node_type": "array", "shape": [1e3], "data_type": "int8"}, "not a list of sizes"),
        ({"zarr_format": 2, "shape": [10**9] * 3, "chunks": [10] * 3, "dtype": "<f8"}, "chunks"),
    ],
)
def test_declared_array_problem(meta, problem) -> None:
    from dkernel.storage.array_limits import declared_array_problem

    found = declared_array_problem(meta)
    assert (found is None) if problem is None else (problem in found), found
