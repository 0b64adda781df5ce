"""``dkernel show`` of hostile stores and ``dkernel demo --output`` onto other stores (issue 34).

``show`` prints whatever a store's ``zarr.json`` holds: escape codes, bidirectional overrides,
NUL bytes and lone surrogates come out escaped (``\\x1b``), long values cut, and attributes of
the wrong type (edited by hand) are shown as they are, with exit 0. ``demo`` replaces only its
own earlier store without ``--overwrite``. Every case goes through ``dkernel.cli.main``: exit
code, no traceback, bounded time, no cluster.
"""

from __future__ import annotations

import io
import json
import os
import re
import sys
import time
from collections.abc import Callable
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import pytest
import zarr

from dkernel.cli import main
from dkernel.errors import StoreError
from dkernel.jobs.demo import LANDSAT_DEMO, demo_may_replace
from dkernel.storage.store import ResultsStore
from tests.limits import REFUSAL_S

#: A refusal's or a ``show``'s time limit (a hang guard: tests/limits.py) and the longest
#: output of a ``show``.
MAX_SECONDS, MAX_OUTPUT = REFUSAL_S, 20_000
#: What no line of ``show`` may hold: C0 controls but newline, DEL, C1 controls, bidi
#: controls, lone surrogates.
RAW = re.compile(
    r"[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    t = time.perf_counter()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(list(argv))
    assert time.perf_counter() - t < MAX_SECONDS
    assert "Traceback" not in err.getvalue(), err.getvalue()
    return code, out.getvalue(), err.getvalue()


def _store(path: Path, edit: Callable[[dict[str, Any]], None] | None = None, **job: Any) -> Path:
    """A complete store of a small job whose root attributes ``edit`` then changes in
    ``zarr.json`` directly, as a hand edit would."""
    store = ResultsStore.create(
        path, job={"name": "other", "method": "rbf-spectral", **job}, seed=0
    )
    store.mark_complete()
    if edit is not None:
        meta = path / "zarr.json"
        doc = json.loads(meta.read_text())
        edit(doc["attributes"])
        meta.write_text(json.dumps(doc))
    return path


def shown(path: Path) -> str:
    """``dkernel show PATH``: exit 0, nothing raw, bounded; its output."""
    code, out, err = _cli("show", str(path))
    assert code == 0, err
    assert not RAW.search(out), repr(RAW.search(out))
    assert len(out) < MAX_OUTPUT, len(out)
    return out


# ------------------------------------------------------------------------------------------
# escape codes and other unprintable characters
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "escaped"),
    [
        ("\x1b[2J\x1b[H", r"\x1b[2J\x1b[H"),  # the case: clear the screen (CSI)
        ("\x1b]0;pwned\x07", r"\x1b]0;pwned\x07"),  # OSC: set the window title
        ("\x9b31m", r"\x9b31m"),  # C1 CSI
        ("\x85next", r"\x85next"),  # C1 next line
        ("a\x00b", r"a\x00b"),  # NUL
        ("a\rb\nc\td\x7f", r"a\rb\nc\td\x7f"),  # carriage return, newline, tab, DEL
        ("abc\u202edcba", r"abc\u202edcba"),  # right-to-left override
        ("\u2066x\u2069", r"\u2066x\u2069"),  # isolates
        ("\u200bzero", r"\u200bzero"),  # zero-width space
    ],
)
def test_attributes_are_printed_escaped(tmp_path, raw, escaped) -> None:
    def edit(attrs):
        attrs["job"]["method"] = raw
        attrs["error"] = raw
        attrs["git_revision"] = raw
        attrs["versions"][raw] = raw
        attrs["timings"] = {raw: 1.0}

    out = shown(_store(tmp_path / "s.zarr", edit, name=raw))
    assert out.count(escaped) >= 6, out


def test_lone_surrogates_are_printed_escaped(tmp_path) -> None:
    """JSON may hold ``\\ud800``; printed raw it would make ``print`` fail."""
    path = _store(tmp_path / "s.zarr", lambda a: a.update(git_revision="SURROGATE"))
    meta = path / "zarr.json"
    meta.write_text(meta.read_text().replace('"SURROGATE"', '"\\ud800x\\udfff"'))
    assert r"\ud800x\udfff" in shown(path)


def test_json_output_is_escaped_too(tmp_path) -> None:
    path = _store(tmp_path / "s.zarr", lambda a: a.update(error="\x1b[2J\u202e"))
    code, out, _ = _cli("show", str(path), "--json")
    assert code == 0 and not RAW.search(out)
    assert json.loads(out)["attrs"]["error"] == "\x1b[2J\u202e"


def test_group_array_and_dimension_names_are_escaped(tmp_path) -> None:
    path = _store(tmp_path / "s.zarr")
    group = zarr.open_group(str(path), mode="a").create_group("g\x1b[31m")
    array = group.create_array("v\u202e", shape=(3,), dtype="f8", dimension_names=["d\x1b[2J"])
    array[:] = [1.0, 2.0, 3.0]
    ResultsStore(path).mark_complete()
    assert r"/g\x1b[31m/v\u202e = [1.0, 2.0, 3.0]  (d\x1b[2J=3) float64" in shown(path)


def test_store_path_with_escapes_is_printed_escaped(tmp_path) -> None:
    out = shown(_store(tmp_path / "a\x1b[2Jb.zarr"))
    assert r"a\x1b[2Jb.zarr" in out


def test_error_messages_are_escaped(tmp_path) -> None:
    code, out, err = _cli("show", str(tmp_path / "missing\x1b[2J.zarr"))
    assert code == 2 and r"missing\x1b[2J.zarr" in err and "\x1b" not in err


def test_log_lines_are_escaped() -> None:
    """A job name or path logged while running reaches the terminal escaped too."""
    import logging

    from dkernel.cli import setup_logging

    err = io.StringIO()
    with redirect_stderr(err):
        setup_logging("info")
        logging.getLogger("dkernel.jobs.runner").info("job 'x\x1b]0;pwned\x07'\nsecond line")
    assert err.getvalue() == "[dkernel] job 'x\\x1b]0;pwned\\x07'\nsecond line\n"


def _store_with_mssc(path: Path, attrs: dict[str, Any]) -> Path:
    """A complete store with an ``/mssc`` group holding ``attrs`` (as a hand edit would)."""
    store = ResultsStore.create(path, job={"name": "other", "method": "mssc"}, seed=0)
    zarr.open_group(str(path / "mssc"), mode="w").attrs.update(attrs)
    store.mark_complete()
    return path


def test_stage_two_evidence_is_printed_escaped_whatever_its_type(tmp_path) -> None:
    hostile = {
        "normalization_chosen": "cs\x1b[2J",
        "normalization_silhouettes": {"size\u202e": "high", "cs": 0.5, "x": None},
        "wide_limit_chosen": True,
        "eigengap_ratios": [float("nan"), "\x07"],
    }
    out = shown(_store_with_mssc(tmp_path / "a.zarr", hostile))
    assert r"partition graph: cs\x1b[2J (silhouettes size\u202e high, cs 0.500, x -)" in out
    assert r"stage two: the wide limit of the affinity (eigengap ratios nan at sigma, \x07" in out
    wrong_types = {**hostile, "normalization_silhouettes": "none", "eigengap_ratios": 3}
    out = shown(_store_with_mssc(tmp_path / "b.zarr", wrong_types))
    assert "partition graph: cs\\x1b[2J\n" in out
    assert "stage two: the wide limit of the affinity\n" in out


def test_group_attributes_are_printed_escaped_and_cut(tmp_path) -> None:
    path = _store_with_mssc(
        tmp_path / "a.zarr",
        {
            "normalization_chosen": "cs",
            "sigma\x1b[2J": "w\u202e",
            "widths": list(range(10_000)),
            "scores": [0.123456, float("nan")],
            "nested": {"a": "\x07" * 500},
        },
    )
    out = shown(path)
    line = next(ln for ln in out.splitlines() if ln.startswith("  /mssc: "))
    assert r"sigma\x1b[2J w\u202e" in line
    assert "widths [0, 1, 2, 3, 4, 5, 6, 7, … (9992 more)]" in line
    assert "scores [0.123456, nan]" in line and "characters cut" in line
    # the stage-two evidence has its own line, not a second one here
    assert "normalization_chosen" not in line and "partition graph: cs" in out


def test_thousands_of_groups_are_listed_briefly(tmp_path) -> None:
    path = _store(tmp_path / "s.zarr")
    root = zarr.open_group(str(path), mode="a")
    for i in range(100):
        root.create_group(f"g{i:03d}").attrs["i"] = i
    ResultsStore(path).mark_complete()
    out = shown(path)
    assert "  /g000: i 0" in out and "  … and 68 more groups" in out
    assert "/g099" not in out


def test_huge_attribute_is_cut(tmp_path) -> None:
    huge = "A" * (2 << 20)
    path = _store(tmp_path / "s.zarr", lambda a: a.update(error=huge, git_revision=huge), name=huge)
    out = shown(path)
    assert re.search(r"A… \(\d{7} characters cut\)", out), out[:500]


def test_a_long_escape_run_is_cut_after_escaping(tmp_path) -> None:
    """Each ESC takes four characters escaped: the cut counts what is printed."""
    out = shown(_store(tmp_path / "s.zarr", lambda a: a.update(git_revision="\x1b" * 100_000)))
    line = next(ln for ln in out.splitlines() if ln.startswith("git:"))
    assert len(line) < 300 and line.endswith("characters cut)"), line


# ------------------------------------------------------------------------------------------
# attributes of the wrong type
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        # the cases
        ({"timings": {"input": "fast", "total": "slow"}}, "timings:  input fast, total slow"),
        ({"job": "just a string"}, "job:      just a string (seed 0)"),
        (
            {"resources": {"n_tasks": 3, "n_workers": 1, "workers": ["a", "b"]}},
            "  workers: ['a', 'b']",
        ),
        # our own
        ({"timings": ["total", 3]}, "timings:  ['total', 3]"),
        ({"timings": {"a": True, "b": None, "c": {"d": 1}}}, "timings:  a True, b -, c {'d': 1}"),
        ({"versions": ["1.0"]}, "versions: ['1.0']"),
        ({"versions": "dkernel 9"}, "versions: dkernel 9"),
        ({"runtime": "somewhere"}, "cluster:  somewhere"),
        ({"runtime": {"n_workers": [1]}}, "cluster:  -, [1] workers, - threads"),
        ({"runtime": {"n_workers": 1, "n_threads": 1}}, "cluster:  -, 1 worker, 1 thread"),
        ({"resources": {"n_tasks": 3, "n_workers": 1}}, "tasks:    3 on 1 worker; peak"),
        ({"resources": 42}, "tasks:    42"),
        (
            {"resources": {"peak_worker_memory": "lots", "workers": {"w": "x"}}},
            "peak worker memory lots",
        ),
        (
            {"resources": {"peak_worker_memory": -5, "workers": {"w": {"peak_memory": []}}}},
            "peak []",
        ),
        ({"seed": {"a": 1}, "status": ["complete"]}, "status:   ['complete']"),
        ({"job": None, "created": 17, "finished": [1]}, "created:  17  finished: [1]"),
        ({"job": {"name": ["n"], "method": {"m": 1}}}, "job:      ['n'] (method {'m': 1}, seed 0)"),
        ({"resumes": "many", "error": 3}, "status:   complete (3), resumed many×"),
        ({"job": 10**50}, "job:      " + str(10**50)),
    ],
)
def test_attributes_of_any_type_are_shown(tmp_path, change, expected) -> None:
    out = shown(_store(tmp_path / "s.zarr", lambda a: a.update(change)))
    assert expected in out, out


def test_timings_that_are_not_finite_numbers(tmp_path) -> None:
    path = _store(tmp_path / "s.zarr", lambda a: a.update(timings={"a": "X", "b": 1.5}))
    meta = path / "zarr.json"
    meta.write_text(meta.read_text().replace('"X"', "NaN").replace("1.5", "-Infinity"))
    assert "timings:  a nan, b -inf" in shown(path)


def test_thousands_of_workers_are_listed_briefly(tmp_path) -> None:
    workers = {f"w{i}": {"tasks": i, "peak_memory": 2**20} for i in range(10_000)}
    resources = {"n_tasks": 1, "n_workers": 10_000, "peak_worker_memory": 2**20, "workers": workers}
    versions = {f"pkg{i}": "1" for i in range(1000)}
    out = shown(
        _store(tmp_path / "s.zarr", lambda a: a.update(resources=resources, versions=versions))
    )
    assert "  … and 9968 more workers" in out and "… (968 more)" in out


# ------------------------------------------------------------------------------------------
# what is not a store
# ------------------------------------------------------------------------------------------


def test_show_of_a_folder_that_is_not_a_store(tmp_path) -> None:
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "notes.txt").write_text("x")
    code, _, err = _cli("show", str(tmp_path / "plain"))
    assert code == 2 and "plain" in err and len(err.strip().splitlines()) == 1, err


def test_show_of_a_file(tmp_path) -> None:
    (tmp_path / "f.zarr").write_text("{}")
    code, _, err = _cli("show", str(tmp_path / "f.zarr"))
    assert code == 2 and "is not a results store (a store is a directory" in err


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_show_of_a_fifo_does_not_hang(tmp_path) -> None:
    os.mkfifo(tmp_path / "p.zarr")
    code, _, err = _cli("show", str(tmp_path / "p.zarr"))
    assert code == 2 and "is not a results store" in err


def test_a_failure_inside_show_is_reported_in_one_line(tmp_path, monkeypatch) -> None:
    import dkernel.storage

    def boom(path):
        raise RuntimeError("boom \x1b[2J")

    monkeypatch.setattr(dkernel.storage, "describe_store", boom)
    code, _, err = _cli("show", str(_store(tmp_path / "s.zarr")))
    assert code == 1 and "unexpected error RuntimeError: boom \\x1b[2J" in err


# ------------------------------------------------------------------------------------------
# dkernel demo --output onto an existing store
# ------------------------------------------------------------------------------------------


@pytest.fixture()
def no_cluster(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a cluster was started")

    import dkernel.runtime  # noqa: F401  (the module, by name below: the attribute is a function)

    monkeypatch.setattr(sys.modules["dkernel.runtime.connect"], "_local_client", refuse)
    monkeypatch.delenv("DKERNEL_OUTPUT_ROOT", raising=False)


def _untouched(path: Path) -> None:
    attrs = ResultsStore(path).attrs
    assert attrs["job"]["name"].startswith("other") and attrs["status"] in ("complete", "failed")


def test_demo_refuses_another_jobs_complete_store(tmp_path, no_cluster) -> None:
    mine = _store(tmp_path / "mine.zarr")
    code, _, err = _cli("demo", "--output", str(mine), "--no-progress")
    assert code == 2, err
    assert "holds the results store of another job ('other', status 'complete')" in err
    assert "pass --overwrite" in err and len(err.strip().splitlines()) == 1
    _untouched(mine)


def test_demo_refuses_another_jobs_failed_store(tmp_path, no_cluster) -> None:
    mine = _store(tmp_path / "mine.zarr", lambda a: a.update(status="failed"))
    code, _, err = _cli("demo", "--output", str(mine), "--no-progress")
    assert code == 2 and "status 'failed'" in err and "--overwrite" in err
    _untouched(mine)


def test_demo_refusal_names_a_hostile_job_escaped(tmp_path, no_cluster) -> None:
    mine = _store(tmp_path / "mine.zarr", name="other\x1b[2J\u202e")
    code, _, err = _cli("demo", "--output", str(mine), "--no-progress")
    assert code == 2 and r"'other\x1b[2J\u202e'" in err and not RAW.search(err)


def test_demo_refuses_a_job_attribute_that_is_not_a_mapping(tmp_path, no_cluster) -> None:
    mine = _store(tmp_path / "mine.zarr", lambda a: a.update(job="demo-landsat-mssc"))
    code, _, err = _cli("demo", "--output", str(mine), "--no-progress")
    assert code == 2 and "another job ('demo-landsat-mssc'" in err


def test_demo_refuses_a_store_that_only_borrows_the_demo_name(tmp_path, no_cluster) -> None:
    mine = _store(tmp_path / "mine.zarr", name="demo-landsat-mssc", data={"reader": "csv"})
    code, _, err = _cli("demo", "--output", str(mine), "--no-progress")
    assert code == 2 and "pass --overwrite" in err


def test_demo_output_onto_a_file_is_refused(tmp_path, no_cluster) -> None:
    target = tmp_path / "precious.zarr"
    target.write_text("keep me")
    for extra in ([], ["--overwrite"]):  # --overwrite replaces stores, never other files
        code, _, err = _cli("demo", "--output", str(target), "--no-progress", *extra)
        assert code == 2 and "is not a dkernel results store (it is a file)" in err
        assert target.read_text() == "keep me"


def test_demo_output_onto_a_folder_that_is_not_a_store_is_refused(tmp_path, no_cluster) -> None:
    target = tmp_path / "photos"
    target.mkdir()
    (target / "cat.jpg").write_text("meow")
    code, _, err = _cli("demo", "--output", str(target), "--no-progress")
    assert code == 2 and "is not a dkernel results store" in err
    assert (target / "cat.jpg").read_text() == "meow"


def test_demo_replaces_its_own_store_and_others_only_with_overwrite(tmp_path) -> None:
    own = _store(tmp_path / "demo.zarr", **{k: v for k, v in LANDSAT_DEMO.items() if k != "name"})
    meta = own / "zarr.json"
    meta.write_text(meta.read_text().replace('"name": "other"', '"name": "demo-landsat-mssc"'))
    assert demo_may_replace(own) is True  # run again: replaces the earlier demo
    assert demo_may_replace(tmp_path / "nothing.zarr") is False
    other = _store(tmp_path / "other.zarr")
    assert demo_may_replace(other, overwrite=True) is True
    with pytest.raises(StoreError, match="pass --overwrite"):
        demo_may_replace(other)


def test_demo_has_an_overwrite_flag() -> None:
    from dkernel.cli import _parser

    args = _parser().parse_args(["demo", "--output", "x.zarr", "--overwrite"])
    assert args.overwrite is True
    assert _parser().parse_args(["demo"]).overwrite is False


def test_a_small_array_whose_chunk_inflates_is_shown_without_its_values(tmp_path) -> None:
    """The issue's case: a 10-value array whose compressed chunk inflates to 2 GiB took
    ``show`` to 4.4 GiB; its chunk files are now measured before any value is read."""
    import resource

    import zarr

    from tests.ops.test_bounded_confined_reads import zstd_bomb

    path = _store(tmp_path / "bomb.zarr")
    group = zarr.open_group(str(path), mode="a").require_group("metrics")
    arr = group.create_array("ari", shape=(1,), dtype="f8", dimension_names=["metric"])
    arr[:] = 0.5
    zarr.consolidate_metadata(str(path))
    chunk = path / "metrics" / "ari" / "c" / "0"
    chunk.write_bytes(zstd_bomb(2 << 30, declare=True))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    out = shown(path)
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert "ari" in out and grown_mib < 500
