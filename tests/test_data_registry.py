"""The registry of public datasets (``dkernel.data.registry``) and ``dkernel data``.

Nothing here downloads from the Internet: the registry is checked against the data folder's
MANIFEST.md and files offline, and ``fetch`` runs against file:// sources and a local HTTP
server.
"""

from __future__ import annotations

import hashlib
import http.server
import os
import re
import threading
from pathlib import Path

import pytest

from dkernel.cli import main
from dkernel.data.registry import (
    DATASETS,
    DataFile,
    Dataset,
    fetch,
    fetch_hint,
    get_dataset,
)
from dkernel.errors import DKernelError, InvalidInputError
from dkernel.io.data import data_root

REPO = Path(__file__).resolve().parents[1]
DATA = data_root(required=False)
needs_data = pytest.mark.skipif(
    DATA is None or not (DATA / "MANIFEST.md").is_file(), reason="no DKERNEL_DATA folder"
)


@needs_data
def test_every_file_has_the_manifests_size_and_checksum():
    manifest = (DATA / "MANIFEST.md").read_text(encoding="utf-8")
    for dataset in DATASETS.values():
        for f in dataset.files:
            name = Path(f.path).name
            # the MANIFEST gives each file's checksum on its line (or the next) and its size
            # with thousands separators
            assert f.sha256 in manifest, (dataset.name, name)
            at = manifest.index(f.sha256)
            around = manifest[max(0, at - 900) : at + 200]
            assert name in around, (dataset.name, name)
            assert f"{f.size:,}" in around, (dataset.name, name, f.size)
            assert f.path.split("/")[0] in manifest


@needs_data
def test_the_local_copies_match_the_registry():
    from dkernel.data.registry import check_file

    for dataset in DATASETS.values():
        for f in dataset.files:
            assert check_file(DATA / f.path, f) is None, f.path


def test_sources_are_pinned_https_commits():
    for dataset in DATASETS.values():
        assert dataset.licence and dataset.title and dataset.used_by
        for f in dataset.files:
            assert re.fullmatch(r"https://github\.com/[^/]+/[^/]+/raw/[0-9a-f]{12,40}/.+", f.url)
            assert re.fullmatch(r"[0-9a-f]{64}", f.sha256) and f.size > 0


def test_the_example_jobs_and_notebook_04_that_read_data_are_covered():
    covered = {u for d in DATASETS.values() for u in d.used_by}
    for path in covered:
        assert (REPO / path).is_file(), path
    for job in sorted((REPO / "jobs").glob("*.yaml")):
        lines = job.read_text(encoding="utf-8").splitlines()
        text = "\n".join(ln for ln in lines if not ln.lstrip().startswith("#"))
        if "DKERNEL_DATA" in text or re.search(
            r"reader: (statlog-landsat|frey-faces|samson|jasper|wisconsin|shapes)\b", text
        ):
            assert f"jobs/{job.name}" in covered, job.name
    assert "notebooks/04_ranking.ipynb" in covered


def _dataset(tmp_path: Path, content: bytes, *, url: str | None = None, sha: str | None = None):
    source = tmp_path / "source" / "file.bin"
    source.parent.mkdir(exist_ok=True)
    source.write_bytes(content)
    entry = DataFile(
        "example/file.bin",
        len(content),
        sha or hashlib.sha256(content).hexdigest(),
        url or source.as_uri(),
    )
    return Dataset("example", "an example", "CC0", (entry,), used_by=("nothing",))


@pytest.fixture()
def registered(monkeypatch, tmp_path):
    def add(dataset: Dataset) -> Dataset:
        monkeypatch.setitem(DATASETS, dataset.name, dataset)
        return dataset

    return add


def test_fetch_from_a_file_source_verifies_and_places_the_file(tmp_path, registered):
    registered(_dataset(tmp_path, b"x" * 1000))
    lines: list[str] = []
    (path,) = fetch("example", tmp_path / "data", report=lines.append)
    assert path == tmp_path / "data" / "example" / "file.bin"
    assert path.read_bytes() == b"x" * 1000
    assert "downloaded" in lines[0] and "checksum ok" in lines[0]
    # a second fetch keeps the verified file
    fetch("example", tmp_path / "data", report=lines.append)
    assert "present, checksum ok" in lines[-1]


def test_a_download_that_does_not_match_is_refused_and_nothing_is_written(tmp_path, registered):
    registered(_dataset(tmp_path, b"real", sha="0" * 64))
    with pytest.raises(DKernelError, match="does not match the registry.*SHA-256"):
        fetch("example", tmp_path / "data")
    assert list((tmp_path / "data" / "example").iterdir()) == []


def test_a_source_larger_than_expected_is_cut_off(tmp_path, registered):
    dataset = _dataset(tmp_path, b"abc")
    (tmp_path / "source" / "file.bin").write_bytes(b"abc" * 100_000)
    registered(dataset)
    with pytest.raises(DKernelError, match="more than the 3 bytes"):
        fetch("example", tmp_path / "data")
    assert list((tmp_path / "data" / "example").iterdir()) == []


def test_an_existing_file_that_does_not_match_is_refused_and_left_alone(tmp_path, registered):
    registered(_dataset(tmp_path, b"right"))
    target = tmp_path / "data" / "example" / "file.bin"
    target.parent.mkdir(parents=True)
    target.write_bytes(b"wrong")
    with pytest.raises(InvalidInputError, match="exists but is not the registry's file"):
        fetch("example", tmp_path / "data")
    assert target.read_bytes() == b"wrong"


def test_fetch_over_http_from_a_local_server(tmp_path, registered):
    content = bytes(range(256)) * 300
    root = tmp_path / "served"
    root.mkdir()
    (root / "file.bin").write_bytes(content)

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, directory=str(root), **kwargs)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/file.bin"
        registered(_dataset(tmp_path, content, url=url))
        (path,) = fetch("example", tmp_path / "data")
        assert path.read_bytes() == content
    finally:
        server.shutdown()
        server.server_close()


def test_only_https_sources_leave_the_machine(tmp_path, registered):
    registered(_dataset(tmp_path, b"x", url="http://example.org/file.bin"))
    with pytest.raises(InvalidInputError, match="only https"):
        fetch("example", tmp_path / "data")


def _two_files(tmp_path: Path) -> tuple[Dataset, dict[str, bytes]]:
    """A dataset of two files whose sources cannot be reached: only a copy can provide them."""
    contents = {"pair/a.bin": b"a" * 700, "pair/b.bin": bytes(range(200)) * 3}
    files = tuple(
        DataFile(path, len(data), hashlib.sha256(data).hexdigest(), "https://unreachable.invalid/x")
        for path, data in contents.items()
    )
    return Dataset("pair", "two files", "CC0", files, used_by=("nothing",)), contents


def test_fetch_from_a_folder_finds_each_file_by_content_and_downloads_nothing(tmp_path, registered):
    dataset, contents = _two_files(tmp_path)
    registered(dataset)
    checkout = tmp_path / "checkout"
    (checkout / "images" / "deep").mkdir(parents=True)
    (checkout / "images" / "deep" / "renamed.dat").write_bytes(contents["pair/a.bin"])
    (checkout / "b.bin").write_bytes(contents["pair/b.bin"])
    # same size as a.bin, other bytes: must not be taken for it
    (checkout / "a.bin").write_bytes(b"z" * 700)
    (checkout / "images" / "gone.bin").symlink_to(tmp_path / "nowhere")  # skipped
    os.mkfifo(checkout / "images" / "pipe")  # not opened: a read would block
    lines: list[str] = []
    paths = fetch("pair", tmp_path / "data", from_folder=checkout, report=lines.append)
    assert [p.read_bytes() for p in paths] == list(contents.values())
    assert "copied from" in lines[0] and "renamed.dat" in lines[0] and "checksum ok" in lines[0]
    # the verified copies are kept on a second call, which needs no folder
    fetch("pair", tmp_path / "data", report=lines.append)
    assert all("present, checksum ok" in line for line in lines[-2:])


def test_fetch_from_a_folder_without_every_file_copies_nothing_and_names_the_missing(
    tmp_path, registered
):
    dataset, contents = _two_files(tmp_path)
    registered(dataset)
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    (checkout / "a.bin").write_bytes(contents["pair/a.bin"])
    with pytest.raises(InvalidInputError, match=r"pair/b\.bin \(600 bytes\)") as info:
        fetch("pair", tmp_path / "data", from_folder=checkout)
    assert "pair/a.bin" not in str(info.value)
    assert not (tmp_path / "data" / "pair" / "a.bin").exists()
    with pytest.raises(InvalidInputError, match="not a folder"):
        fetch("pair", tmp_path / "data", from_folder=checkout / "a.bin")


def test_cli_data_fetch_from_a_folder(tmp_path, registered, capsys):
    dataset, contents = _two_files(tmp_path)
    registered(dataset)
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    for n, data in enumerate(contents.values()):
        (checkout / f"{n}.bin").write_bytes(data)
    target = tmp_path / "d"
    assert main(["data", "fetch", "pair", "--to", str(target), "--from", str(checkout)]) == 0
    assert (target / "pair" / "b.bin").read_bytes() == contents["pair/b.bin"]
    assert "copied from" in capsys.readouterr().err
    assert main(["data", "fetch", "pair", "--to", str(tmp_path / "e"), "--from", "nowhere"]) == 2
    assert "not a folder" in capsys.readouterr().err


def test_unknown_dataset_lists_the_known_ones():
    with pytest.raises(InvalidInputError, match="frey.*samson|known: "):
        get_dataset("nope")


def test_cli_data_list(capsys):
    assert main(["data", "list"]) == 0
    out = capsys.readouterr().out
    for name, dataset in DATASETS.items():
        assert re.search(rf"^{name} +\S", out, re.M), name
        assert dataset.licence in out
    assert "notebooks/04_ranking.ipynb" in out


def test_cli_data_fetch_and_refusal(tmp_path, registered, capsys):
    registered(_dataset(tmp_path, b"payload"))
    assert main(["data", "fetch", "example", "--to", str(tmp_path / "d")]) == 0
    assert (tmp_path / "d" / "example" / "file.bin").read_bytes() == b"payload"
    assert "export DKERNEL_DATA=" in capsys.readouterr().err
    (tmp_path / "d" / "example" / "file.bin").write_bytes(b"changed")
    assert main(["data", "fetch", "example", "--to", str(tmp_path / "d")]) == 2
    assert "exists but is not the registry's file" in capsys.readouterr().err
    assert main(["data", "fetch", "nope"]) == 2


def test_hint_names_the_dataset_of_a_missing_file():
    assert "dkernel data fetch frey" in fetch_hint("frey-faces", "file not found")
    assert "dkernel data fetch statlog" in fetch_hint("csv", "sat.trn not found under /x")
    assert fetch_hint("frey-faces", "bad values in row 3") is None
    assert fetch_hint("csv", "mine.csv not found") is None


@pytest.mark.parametrize(
    ("job", "name"),
    [("jrc-frey-pck", "frey"), ("kppr-landsat-pck", "statlog"), ("mssc-geotiff", "geotiff")],
)
def test_a_job_with_missing_data_names_the_fetch_command(tmp_path, monkeypatch, capsys, job, name):
    monkeypatch.setenv("DKERNEL_DATA", str(tmp_path / "empty"))
    (tmp_path / "empty").mkdir()
    job_path = REPO / "jobs" / f"{job}.yaml"
    assert main(["validate", str(job_path), "--output-root", str(tmp_path)]) == 2
    assert f"dkernel data fetch {name} " in capsys.readouterr().err


def test_data_list_imports_no_heavy_module():
    import subprocess
    import sys

    code = (
        "import sys\nfrom dkernel.cli import main\ncode = main(['data', 'list'])\n"
        "heavy = sorted(m for m in ('dask', 'distributed', 'sklearn', 'scipy', 'zarr') "
        "if m in sys.modules)\nprint('HEAVY', heavy)\nsys.exit(code)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "HEAVY []" in out.stdout
