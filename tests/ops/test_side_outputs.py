"""Files beside the store (label COG, class table, quick-look, segments) and MSSC's scratch
folder under hostile conditions: links, foreign files, FIFOs, stale temporaries, forged
markers. Jobs run through ``dkernel.cli.main`` on a tiny GeoTIFF; each asserts the exit code,
no traceback, bounded time and that nothing outside the output root changed. The writer
(:mod:`dkernel.storage.side_files`) is tested directly for the races a job cannot stage.
"""

from __future__ import annotations

import io
import os
import stat
import time
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import zarr

from dkernel.cli import main
from dkernel.errors import StoreError
from dkernel.storage import ResultsStore
from dkernel.storage import side_files as sf
from tests.limits import JOB_S, REFUSAL_S

#: Seconds a refusal may take (the issue's bound) and a whole tiny job.

# ------------------------------------------------------------------------------------------
# helpers
# ------------------------------------------------------------------------------------------


def _geotiff(path: Path, rows: int = 24, cols: int = 28) -> Path:
    """Three bands, four flat regions plus noise, georeferenced (EPSG:32618)."""
    import rasterio
    from affine import Affine

    rng = np.random.default_rng(0)
    centres = np.array([[0.1, 0.2, 0.8], [0.8, 0.1, 0.2], [0.3, 0.9, 0.4], [0.9, 0.8, 0.9]])
    region = (np.arange(rows)[:, None] >= rows // 2) * 2 + (np.arange(cols)[None] >= cols // 2)
    img = centres[region].transpose(2, 0, 1) + rng.normal(scale=0.03, size=(3, rows, cols))
    profile = dict(driver="GTiff", width=cols, height=rows, count=3, dtype="float32")
    profile |= dict(crs="EPSG:32618", transform=Affine(30.0, 0, 500000.0, 0, -30.0, 4e6))
    with rasterio.open(path, "w", **profile) as dst:
        dst.write(img.astype(np.float32))
    return path


def _snapshot(folder: Path) -> dict[str, tuple]:
    """Every entry below ``folder``: kind, and bytes and mtime of files (links not
    followed)."""
    out = {}
    for p in sorted(folder.rglob("*")):
        st = os.lstat(p)
        if stat.S_ISREG(st.st_mode):
            out[str(p)] = ("file", p.read_bytes(), st.st_mtime_ns, st.st_nlink)
        elif stat.S_ISLNK(st.st_mode):
            out[str(p)] = ("link", os.readlink(p))
        else:  # folders by their entries (a probe file may come and go), FIFOs by kind
            out[str(p)] = (stat.S_IFMT(st.st_mode),)
    return out


@pytest.fixture()
def job(tmp_path, monkeypatch, client):
    """An MSSC job on a 24 × 28 GeoTIFF writing ``root/job.zarr`` and its side files, and
    a folder ``outside`` (outside the output root) holding ``precious.txt``."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DKERNEL_OUTPUT_ROOT", raising=False)
    root = tmp_path / "root"
    root.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious.txt").write_text("precious\n")
    tif = _geotiff(tmp_path / "image.tif")
    scheduler = client.scheduler.address

    def spec(**params) -> Path:
        import yaml

        p = {
            "n_clusters": 4,
            "n_seeds": 60,
            "density_max_samples": 600,
            "n_rff": 200,
            "n_init": 5,
            "write_geotiff": True,
            "write_png": True,
        } | params
        body = {
            "name": "side-outputs",
            "seed": 0,
            "method": "mssc",
            "data": {"reader": "geotiff", "path": str(tif), "coord_scale": 0.25},
            "params": p,
            "output": "job.zarr",
        }
        path = tmp_path / "job.yaml"
        path.write_text(yaml.safe_dump(body, sort_keys=False))
        return path

    def run(*extra: str, limit: float = JOB_S, **params) -> tuple[int, str]:
        before = _snapshot(outside)
        err, out = io.StringIO(), io.StringIO()
        args = ["run", str(spec(**params)), "--output-root", str(root), "--no-progress"]
        t = time.perf_counter()
        with redirect_stderr(err), redirect_stdout(out):
            code = main([*args, "--scheduler", scheduler, *extra])
        elapsed = time.perf_counter() - t
        text = err.getvalue() + out.getvalue()
        assert "Traceback" not in text, text
        assert elapsed < limit, f"{elapsed:.1f} s:\n{text}"
        assert _snapshot(outside) == before, "a file outside the output root changed"
        return code, text

    def refused(pattern: str, *extra: str, **params) -> str:
        """Exit 2 before anything ran: no store, no side file, no temporary written."""
        import re

        existing = _snapshot(root)
        code, text = run(*extra, limit=REFUSAL_S, **params)
        assert code == 2, f"exit code {code}:\n{text}"
        assert re.search(pattern, text), f"{pattern!r} not in:\n{text}"
        assert _snapshot(root) == existing, "the output root changed"
        return text

    return SimpleNamespace(
        root=root,
        outside=outside,
        precious=outside / "precious.txt",
        store=root / "job.zarr",
        cog=root / "job.labels.tif",
        table=root / "job.labels.classes.csv",
        png=root / "job.quicklook.png",
        gpkg=root / "job.segments.gpkg",
        scratch=root / ".job.zarr.scratch",
        scheduler=scheduler,
        run=run,
        refused=refused,
    )


def _status(store: Path) -> str | None:
    return zarr.open_group(str(store), mode="r").attrs.get("status")


def _no_temporaries(root: Path) -> None:
    left = [p.name for p in root.iterdir() if ".tmp" in p.name]
    assert not left, left


# ------------------------------------------------------------------------------------------
# side files through the CLI: the cases of issue 34
# ------------------------------------------------------------------------------------------


def test_a_job_writes_its_side_files_and_records_them(job):
    code, text = job.run()
    assert code == 0, text
    for path in (job.cog, job.table, job.png):
        assert stat.S_ISREG(os.lstat(path).st_mode)
    attrs = dict(zarr.open_group(str(job.store), mode="r").attrs)
    assert attrs["status"] == "complete"
    assert sorted(attrs["side_files"]) == [
        "../job.labels.classes.csv",
        "../job.labels.tif",
        "../job.quicklook.png",
    ]
    assert not job.scratch.exists()
    _no_temporaries(job.root)


def _write_label_counts(file):
    """A small real writer: pixels per class, one ``class,pixels`` line each."""
    labels = np.asarray(file.labels)
    counts = np.bincount(labels[labels >= 0])
    with file.writing() as out:
        out.write_text("".join(f"{k},{n}\n" for k, n in enumerate(counts)))
    return {"label_counts_classes": int(counts.size)}


@pytest.fixture()
def label_counts():
    """A kind registered as a plugin would: one entry and its writer, nothing else."""
    from dkernel.jobs.map_files import SIDE_FILES, SideFile, register_side_file

    entry = SideFile(
        "label_counts", "labels.counts.txt", "write_geotiff", "label counts", _write_label_counts
    )
    register_side_file(entry)
    yield entry
    del SIDE_FILES[entry.kind]


def test_a_registered_kind_is_checked_before_the_run_and_written(job, label_counts):
    """One registry entry: refused before any cluster starts where a link stands, written,
    claimed in ``side_files`` and recorded in the group's attributes once the link is gone."""
    counts = job.root / "job.labels.counts.txt"
    counts.symlink_to(job.precious)
    text = job.refused(r"job\.labels\.counts\.txt is a symbolic link .*precious\.txt")
    assert "label counts" in text and job.precious.read_text() == "precious\n"
    counts.unlink()

    code, text = job.run()
    assert code == 0, text
    assert "job.labels.counts.txt" in text  # the map files' log line lists it
    tree = zarr.open_group(str(job.store), mode="r")
    assert "../job.labels.counts.txt" in tree.attrs["side_files"]
    group = dict(tree["mssc"].attrs)
    assert group["label_counts"] == "../job.labels.counts.txt"
    labels = np.asarray(tree["mssc"]["labels"][:])
    expected = np.bincount(labels[labels >= 0])
    assert group["label_counts_classes"] == expected.size
    lines = counts.read_text().splitlines()
    assert lines == [f"{k},{n}" for k, n in enumerate(expected)]
    _no_temporaries(job.root)


def test_the_quicklook_is_drawn_in_the_job_process_when_the_helper_is_gone(job, monkeypatch):
    """The quick-look is drawn by the helper process; when it died, by the job's own."""
    from dkernel import _helper
    from dkernel.io import raster

    code, text = job.run()
    assert code == 0, text
    by_helper = job.png.read_bytes()
    plan = raster.quicklook_plan

    def plan_then_helper_dies(*args, **kwargs):
        helper = _helper.shared_helper(start=False)
        assert helper is not None  # started by the job, before the drawing
        helper._process.kill()
        helper._process.wait()
        return plan(*args, **kwargs)

    monkeypatch.setattr(raster, "quicklook_plan", plan_then_helper_dies)
    code, text = job.run("--overwrite")
    assert code == 0, text
    assert job.png.read_bytes() == by_helper
    assert _status(job.store) == "complete"
    _no_temporaries(job.root)


def test_link_at_class_table_to_outside_is_refused(job):
    job.table.symlink_to(job.precious)
    text = job.refused(r"job\.labels\.classes\.csv is a symbolic link .*precious\.txt.*rm ")
    assert "class table" in text
    assert job.precious.read_text() == "precious\n"


def test_foreign_file_at_label_cog_is_not_replaced(job):
    job.cog.write_bytes(b"my own map")
    job.refused(r"job\.labels\.tif exists and was not written by the job of this results store")
    assert job.cog.read_bytes() == b"my own map"


def test_foreign_file_at_quicklook_is_not_replaced(job):
    job.png.write_bytes(b"holiday photo")
    job.refused(r"job\.quicklook\.png exists and was not written")
    assert job.png.read_bytes() == b"holiday photo"


def test_link_at_quicklook_is_refused(job):
    job.png.symlink_to(job.precious)
    job.refused(r"job\.quicklook\.png is a symbolic link")


def test_directory_at_label_cog_is_refused(job):
    job.cog.mkdir()
    (job.cog / "inside.txt").write_text("x")
    job.refused(r"job\.labels\.tif is a directory .*rm -r")
    assert (job.cog / "inside.txt").read_text() == "x"


def test_dangling_link_at_class_table_is_refused(job):
    target = job.outside / "created-by-dkernel.csv"
    job.table.symlink_to(target)
    job.refused(r"job\.labels\.classes\.csv is a symbolic link")
    assert not target.exists() and job.table.is_symlink()


def test_hard_link_to_outside_file_is_not_replaced(job):
    os.link(job.precious, job.cog)
    job.refused(r"job\.labels\.tif exists and was not written")
    assert job.precious.read_text() == "precious\n" and job.precious.stat().st_nlink == 2


def test_fifo_at_quicklook_is_refused_without_blocking(job):
    os.mkfifo(job.png)
    job.refused(r"job\.quicklook\.png is a FIFO")
    assert stat.S_ISFIFO(os.lstat(job.png).st_mode)


def test_link_at_segments_layer_is_refused(job):
    job.gpkg.symlink_to(job.precious)
    job.refused(r"job\.segments\.gpkg is a symbolic link", segments="gpkg")


def test_files_not_asked_for_are_not_checked(job):
    """write_png: false: a FIFO at the quick-look path is none of the job's business."""
    os.mkfifo(job.png)
    code, text = job.run(write_png=False)
    assert code == 0, text
    assert stat.S_ISFIFO(os.lstat(job.png).st_mode) and job.cog.is_file()


def test_overwrite_replaces_own_files_but_never_a_link(job):
    code, text = job.run()
    assert code == 0, text
    old_cog = os.stat(job.cog)
    # a complete store: its own side files are replaced with --overwrite ...
    code, text = job.run()
    assert code == 2 and "pass --overwrite" in text
    code, text = job.run("--overwrite")
    assert code == 0, text
    new_cog = os.stat(job.cog)
    assert (new_cog.st_ino, new_cog.st_mtime_ns) != (old_cog.st_ino, old_cog.st_mtime_ns)
    # ... and a link put in place of one of them is refused, --overwrite or not
    job.png.unlink()
    job.png.symlink_to(job.precious)
    job.refused(r"job\.quicklook\.png is a symbolic link", "--overwrite")
    assert _status(job.store) == "complete"  # the store was left as it was


def test_overwrite_does_not_replace_a_foreign_file(job):
    job.table.write_text("class,notes\n0,mine\n")
    job.refused(r"job\.labels\.classes\.csv exists and was not written", "--overwrite")
    assert job.table.read_text() == "class,notes\n0,mine\n"


def test_rerun_of_a_failed_store_replaces_its_own_files(job):
    code, text = job.run()
    assert code == 0, text
    zarr.open_group(str(job.store), mode="r+").attrs["status"] = "failed"
    code, text = job.run()  # a failed store is started over without --overwrite
    assert code == 0, text
    assert _status(job.store) == "complete"


def test_resume_removes_stale_temporaries_of_a_killed_run_only(job):
    code, text = job.run()
    assert code == 0, text
    zarr.open_group(str(job.store), mode="r+").attrs["status"] = "failed"  # as if killed
    ours = [
        job.root / ".job.labels.tif.k2j4h5g6.tmp.tif",  # the COG writer before this change
        job.root / ".job.quicklook.png.a1b2c3d4.tmp",  # side_file's private folder
    ]
    ours[0].write_bytes(b"half a tif")
    ours[1].mkdir()
    (ours[1] / "job.quicklook.png").write_bytes(b"half a png")
    (ours[1] / "escape").symlink_to(job.precious)  # a link inside: removed, not followed
    link = job.root / ".job.labels.classes.csv.zzzzzzzz.tmp"
    link.symlink_to(job.outside)  # named like ours: the link goes, its target stays
    theirs = [
        job.root / ".other.labels.tif.k2j4h5g6.tmp.tif",  # another store's
        job.root / ".job.labels.tif.bak",  # not a temporary name
        job.root / ".job.labels.tif.k2j4h5g6.tmp.tif.keep",
    ]
    for p in theirs:
        p.write_bytes(b"keep")
    code, text = job.run("--resume")
    assert code == 0, text
    assert not any(os.path.lexists(p) for p in [*ours, link])
    assert all(p.read_bytes() == b"keep" for p in theirs)
    assert (job.outside / "precious.txt").exists()


# ------------------------------------------------------------------------------------------
# the scratch folder through the CLI
# ------------------------------------------------------------------------------------------


def test_link_at_scratch_path_is_refused_and_not_followed(job):
    """The issue's case: the link's folder kept its file, and no scratch array went there."""
    (job.outside / "partitions.zarr").mkdir()
    (job.outside / "partitions.zarr" / "precious.txt").write_text("precious\n")
    job.scratch.symlink_to(job.outside)
    job.refused(r"scratch folder .*\.job\.zarr\.scratch is a symbolic link .*rm ")
    assert (job.outside / "partitions.zarr" / "precious.txt").read_text() == "precious\n"


def test_file_at_scratch_path_is_refused(job):
    job.scratch.write_text("notes")
    job.refused(r"scratch folder .* is a regular file|scratch folder .* not a folder")
    assert job.scratch.read_text() == "notes"


def test_scratch_folder_with_foreign_content_is_not_emptied(job):
    job.scratch.mkdir()
    (job.scratch / "thesis.tex").write_text("chapter 1")
    job.refused(r"holds files that dkernel did not put there .*rm -r")
    assert (job.scratch / "thesis.tex").read_text() == "chapter 1"


def test_forged_scratch_marker_is_not_trusted(job):
    job.scratch.mkdir()
    (job.scratch / sf.SCRATCH_MARKER).write_text("dkernel scratch folder of another.zarr\n")
    (job.scratch / "thesis.tex").write_text("chapter 1")
    job.refused(r"holds files that dkernel did not put there")
    assert (job.scratch / "thesis.tex").read_text() == "chapter 1"


def test_scratch_marker_that_is_a_link_is_not_trusted(job):
    real = job.outside / "marker"
    real.write_text("dkernel scratch folder of job.zarr\n")
    job.scratch.mkdir()
    (job.scratch / sf.SCRATCH_MARKER).symlink_to(real)
    (job.scratch / "thesis.tex").write_text("chapter 1")
    job.refused(r"holds files that dkernel did not put there")
    assert (job.scratch / "thesis.tex").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give the folder to another uid")
def test_scratch_folder_of_another_user_is_refused(job):
    job.scratch.mkdir()
    (job.scratch / sf.SCRATCH_MARKER).write_text("dkernel scratch folder of job.zarr\n")
    os.chown(job.scratch, 65534, 65534)
    job.refused(r"owned by uid 65534")
    assert (job.scratch / sf.SCRATCH_MARKER).exists()


def test_own_scratch_left_by_a_killed_run_is_reused_and_removed(job):
    sf.make_scratch_dir(job.scratch, "job.zarr")
    (job.scratch / "partitions.zarr").mkdir()
    (job.scratch / "partitions.zarr" / "stale").write_text("old")
    code, text = job.run()
    assert code == 0, text
    assert not job.scratch.exists()


def test_empty_scratch_folder_is_adopted(job):
    job.scratch.mkdir()  # a run killed between making the folder and writing its marker
    code, text = job.run()
    assert code == 0, text
    assert not job.scratch.exists()


def test_table_job_ignores_side_paths(job, tmp_path):
    """A table reader writes no side files: a link at the quick-look path stays unused."""
    job.png.symlink_to(job.precious)
    import yaml

    spec = tmp_path / "wine.yaml"
    body = {
        "name": "wine",
        "seed": 0,
        "method": "rbf-spectral",
        "data": {"reader": "sklearn", "name": "wine", "standardize": True},
        "params": {"n_clusters": 3, "n_init": 5},
        "output": "job.zarr",
    }
    spec.write_text(yaml.safe_dump(body))
    before = _snapshot(job.outside)
    err = io.StringIO()
    with redirect_stderr(err):
        args = ["run", str(spec), "--output-root", str(job.root), "--no-progress"]
        code = main([*args, "--scheduler", job.scheduler])
    assert code == 0, err.getvalue()
    assert job.png.is_symlink() and _snapshot(job.outside) == before


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_read_only_output_folder_is_refused(job):
    job.root.chmod(0o555)
    try:
        job.refused(r"not writable|cannot be written")
    finally:
        job.root.chmod(0o755)


# ------------------------------------------------------------------------------------------
# the writer itself
# ------------------------------------------------------------------------------------------


def test_side_file_moves_the_written_file_into_place(tmp_path):
    target = tmp_path / "a.labels.classes.csv"
    with sf.side_file(target, root=tmp_path) as out:
        assert out.name == target.name and out.parent.parent == tmp_path
        assert out.parent.name.startswith(".a.labels.classes.csv.") and not out.exists()
        out.write_text("class\n")
    assert target.read_text() == "class\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == [target.name]


@pytest.mark.parametrize("error", [RuntimeError, KeyboardInterrupt])
def test_side_file_cleans_up_and_keeps_the_old_file_on_error(tmp_path, error):
    target = tmp_path / "a.quicklook.png"
    target.write_bytes(b"old")
    with pytest.raises(error), sf.side_file(target, replace=True, root=tmp_path) as out:
        out.write_bytes(b"half")
        raise error("killed")
    assert target.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == [target.name]


def test_side_file_refuses_a_link_even_when_replacing(tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("x")
    target = tmp_path / "root" / "a.labels.tif"
    target.parent.mkdir()
    target.symlink_to(outside)
    with pytest.raises(StoreError, match="symbolic link"), sf.side_file(target, replace=True):
        pytest.fail("the block must not run")
    assert outside.read_text() == "x" and target.is_symlink()


def test_link_planted_while_writing_is_refused_and_its_target_untouched(tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("x")
    root = tmp_path / "root"
    root.mkdir()
    target = root / "a.labels.tif"
    with pytest.raises(StoreError, match="symbolic link"):
        with sf.side_file(target, replace=True, root=root) as out:
            out.write_bytes(b"new")
            target.symlink_to(outside)
    assert outside.read_text() == "x" and target.is_symlink()
    assert sorted(p.name for p in root.iterdir()) == [target.name]


def test_file_planted_while_writing_is_not_replaced(tmp_path):
    target = tmp_path / "a.labels.tif"
    with pytest.raises(StoreError, match="was not written by the job"):
        with sf.side_file(target, root=tmp_path) as out:
            out.write_bytes(b"new")
            target.write_bytes(b"someone else's")
    assert target.read_bytes() == b"someone else's"


def test_directory_planted_while_writing_is_not_replaced(tmp_path):
    target = tmp_path / "a.labels.tif"
    with pytest.raises(StoreError, match="is a directory"):
        with sf.side_file(target, replace=True, root=tmp_path) as out:
            out.write_bytes(b"new")
            target.mkdir()
    assert target.is_dir()


def test_side_file_outside_its_root_is_refused(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    (root / "escape").symlink_to(tmp_path)
    for path in (tmp_path / "a.tif", root / "escape" / "a.tif", root / ".." / "a.tif"):
        with pytest.raises(StoreError, match="outside the output root"):
            sf.check_side_file(path, root=root)
    assert not (tmp_path / "a.tif").exists()


def test_side_file_that_is_never_written_is_an_error(tmp_path):
    with pytest.raises(StoreError, match="was not written"), sf.side_file(tmp_path / "a.png"):
        pass
    assert not list(tmp_path.iterdir())


def test_side_file_in_an_unwritable_folder_says_so(tmp_path, monkeypatch):
    def no(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(sf.tempfile, "mkdtemp", no)
    with pytest.raises(StoreError, match="cannot be written .*Permission denied"):
        with sf.side_file(tmp_path / "a.png"):
            pytest.fail("the block must not run")


def test_hard_linked_own_file_is_replaced_by_rename(tmp_path):
    """Replacing renames over the name: the other link keeps its bytes."""
    other = tmp_path / "backup.tif"
    other.write_bytes(b"old")
    target = tmp_path / "root" / "a.labels.tif"
    target.parent.mkdir()
    os.link(other, target)
    with sf.side_file(target, replace=True, root=target.parent) as out:
        out.write_bytes(b"new")
    assert target.read_bytes() == b"new" and other.read_bytes() == b"old"


def test_label_cog_writer_refuses_a_link_and_leaves_no_temporary(tmp_path):
    import xarray as xr

    from dkernel.io.cog import write_label_cog

    outside = tmp_path / "outside.csv"
    outside.write_text("x")
    root = tmp_path / "root"
    root.mkdir()
    (root / "m.labels.classes.csv").symlink_to(outside)
    image = xr.DataArray(
        np.ones((1, 4, 5), np.float32),
        dims=("band", "y", "x"),
        coords={"band": [1], "y": np.arange(4.0), "x": np.arange(5.0)},
    )
    with pytest.raises(StoreError, match="classes.csv is a symbolic link"):
        write_label_cog(root / "m.labels.tif", np.zeros((4, 5), int), image)
    assert outside.read_text() == "x"
    assert sorted(p.name for p in root.iterdir()) == ["m.labels.classes.csv"]  # nothing else


def test_stale_temporaries_are_matched_exactly(tmp_path):
    target = tmp_path / "a.labels.tif"
    names = [
        ".a.labels.tif.abc_1234.tmp",
        ".a.labels.tif.abc_1234.tmp.tif",
        ".a.labels.tif.tmp",  # no token
        ".a.labels.tif.abc.tmp.png",
        ".b.a.labels.tif.abc.tmp",
        ".a.labels.tiff.abc.tmp",
        "a.labels.tif.abc.tmp",
    ]
    for n in names:
        (tmp_path / n).write_text("x")
    assert [p.name for p in sf.stale_temps(target)] == names[:2]
    assert [p.name for p in sf.remove_stale_temps(target)] == names[:2]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(names[2:])


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a file to another uid")
def test_stale_temporary_of_another_user_is_left(tmp_path):
    other = tmp_path / ".a.labels.tif.abcdefgh.tmp.tif"
    other.write_text("x")
    os.chown(other, 65534, 65534)
    assert sf.remove_stale_temps(tmp_path / "a.labels.tif") == []
    assert other.exists()


# ------------------------------------------------------------------------------------------
# the scratch folder and the store's record, directly
# ------------------------------------------------------------------------------------------


def test_store_never_writes_scratch_through_a_link(tmp_path):
    import dask.array as da

    outside = tmp_path / "outside"
    (outside / "partitions.zarr").mkdir(parents=True)
    (outside / "partitions.zarr" / "precious.txt").write_text("p")
    store = ResultsStore.create(tmp_path / "r.zarr", job={"name": "t"}, seed=0)
    store.scratch_dir.symlink_to(outside)
    with pytest.raises(StoreError, match="symbolic link"):
        store.write_scratch("partitions", da.zeros(10, chunks=5, dtype=np.int32))
    assert (outside / "partitions.zarr" / "precious.txt").read_text() == "p"
    # marking the store failed or complete neither raises nor touches it
    store.mark_failed(RuntimeError("boom"))
    assert store.scratch_dir.is_symlink()
    assert sorted(p.name for p in (outside / "partitions.zarr").iterdir()) == ["precious.txt"]


def test_link_planted_inside_own_scratch_is_removed_not_followed(tmp_path):
    import dask
    import dask.array as da

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "zarr.json").write_text("{}")
    store = ResultsStore.create(tmp_path / "r.zarr", job={"name": "t"}, seed=0)
    sf.make_scratch_dir(store.scratch_dir, store.path.name)
    (store.scratch_dir / "partitions.zarr").symlink_to(outside)
    with dask.config.set(scheduler="sync"):
        dask.compute(*store.write_scratch("partitions", da.arange(10, chunks=5)))
    assert not (store.scratch_dir / "partitions.zarr").is_symlink()
    assert sorted(p.name for p in outside.iterdir()) == ["zarr.json"]
    assert (outside / "zarr.json").read_text() == "{}"
    np.testing.assert_array_equal(store.read_scratch("partitions").compute(), np.arange(10))
    store.mark_complete()
    assert not store.scratch_dir.exists() and outside.is_dir()


def test_scratch_marker_that_is_a_fifo_does_not_block(tmp_path):
    scratch = tmp_path / ".r.zarr.scratch"
    scratch.mkdir()
    os.mkfifo(scratch / sf.SCRATCH_MARKER)
    t = time.perf_counter()
    with pytest.raises(StoreError, match="did not put there"):
        sf.check_scratch_dir(scratch, "r.zarr")
    assert time.perf_counter() - t < REFUSAL_S  # it returns (a blocked read never would)


def test_store_creation_keeps_the_record_of_its_side_files(tmp_path):
    store = ResultsStore.create(tmp_path / "r.zarr", job={"name": "t"}, seed=0)
    assert store.attrs["side_files"] == []
    store.update_attrs(side_files=["../r.labels.tif", "../../elsewhere.txt"])
    store.mark_failed(RuntimeError("x"))
    again = ResultsStore.create(tmp_path / "r.zarr", job={"name": "t"}, seed=0)
    assert again.attrs["side_files"] == ["../r.labels.tif"]  # only paths beside the store
    assert sf.side_file_key(tmp_path / "r.labels.tif") in sf.recorded_side_files(again.path)


def test_recorded_side_files_of_a_hostile_store_are_empty_and_bounded(tmp_path):
    fifo_store = tmp_path / "fifo.zarr"
    fifo_store.mkdir()
    os.mkfifo(fifo_store / "zarr.json")
    linked = tmp_path / "linked.zarr"
    linked.mkdir()
    (linked / "zarr.json").symlink_to("/dev/zero")
    garbage = tmp_path / "garbage.zarr"
    garbage.mkdir()
    (garbage / "zarr.json").write_bytes(b"\xff\xfe not json")
    t = time.perf_counter()
    for store in (fifo_store, linked, garbage, tmp_path / "missing.zarr"):
        assert sf.recorded_side_files(store) == set()
    assert time.perf_counter() - t < REFUSAL_S  # it returns (a blocked read never would)
