"""The step protocol: a method's ``compute`` yields typed outputs, the runner writes them
(``dkernel.jobs.outputs.write_outputs``), and the step reads back what was written through a
read-only view of the store; resume keeps finished groups. Also pinned: no step writes, and
no function of the job layer is over 100 lines."""

from __future__ import annotations

import ast
from pathlib import Path

import dask.array as da
import numpy as np
import pytest
import xarray as xr

from dkernel.jobs.outputs import Group, LabelMap, Metrics, Timing, write_outputs
from dkernel.jobs.registry import METHODS, JobContext, Method, StoreView, register_method
from dkernel.jobs.runner import run_job
from dkernel.jobs.spec import validate_spec
from dkernel.schema.params import Param
from dkernel.storage import open_results
from dkernel.storage.store import ResultsStore

REPO = Path(__file__).resolve().parents[2]
STEPS = sorted((REPO / "dkernel" / "jobs" / "steps").glob("*.py"))

#: What writes to a store: a step calls none of these (it yields outputs instead).
WRITERS = {
    "write",
    "write_scratch",
    "record_timing",
    "update_attrs",
    "update_group_attrs",
    "clear_scratch",
    "mark_complete",
    "mark_failed",
}


def _column(values: np.ndarray, chunk: int | None = None) -> xr.Dataset:
    data = values if chunk is None else da.from_array(values, chunks=chunk)
    return xr.Dataset({"a": (("sample",), data)})


def _spec(tmp_path: Path, method: str) -> object:
    return validate_spec(
        {
            "name": "protocol",
            "data": {"reader": "sklearn", "name": "iris"},
            "method": method,
            "output": str(tmp_path / "p.zarr"),
        }
    )


@pytest.fixture()
def toy_method():
    """``test-protocol``: a lazy group, read back to make the next one, a timing, labels.

    ``state["value"]`` fills the lazy group and ``state["fail"]`` stops the step after it,
    so a resumed run can show that the finished group is kept and read back."""
    state = {"value": 1.0, "fail": False, "read_back": None}

    def compute(ctx: JobContext):
        n = ctx.data.n_samples
        yield Group("first", _column(np.full(n, state["value"]), chunk=50), lazy=True)
        if state["fail"]:
            raise RuntimeError("stopped after the first group")
        first = ctx.store.read_array("first", "a")
        assert isinstance(first, da.Array)  # lazy, read by the workers
        state["read_back"] = float(first.sum().compute())
        yield Group("second", _column(np.asarray(first.compute()) * 2))
        yield Timing("toy_phase", 1.5)
        labels = np.asarray(ctx.data.y)
        yield LabelMap(labels, "toy")  # a table reader: no map
        yield Metrics(labels)

    register_method(
        Method(name="test-protocol", params=(Param("x", "int", default=1),), compute=compute)
    )
    yield state
    del METHODS["test-protocol"]


def test_runner_writes_what_the_step_yields_as_it_comes(tmp_path, client, toy_method):
    out = run_job(_spec(tmp_path, "test-protocol"), client=client, progress=False)
    tree = open_results(out)
    assert tree.attrs["status"] == "complete"
    np.testing.assert_array_equal(tree["first"]["a"].values, np.ones(150))
    np.testing.assert_array_equal(tree["second"]["a"].values, np.full(150, 2.0))
    assert toy_method["read_back"] == 150.0
    assert tree.attrs["timings"]["toy_phase"] == 1.5
    assert float(tree["metrics"]["acc"]) == 1.0  # the true labels, scored against themselves
    assert "map" not in tree  # table data: the label map is ignored


def test_resume_keeps_finished_groups_and_the_step_reads_them_back(tmp_path, client, toy_method):
    from dkernel.jobs.runner import JobFailedError

    toy_method["fail"] = True
    with pytest.raises(JobFailedError, match="stopped after the first group"):
        run_job(_spec(tmp_path, "test-protocol"), client=client, progress=False)
    toy_method.update(fail=False, value=5.0)  # what a fresh run would write instead
    out = run_job(_spec(tmp_path, "test-protocol"), client=client, progress=False, resume=True)
    tree = open_results(out)
    assert tree.attrs["status"] == "complete" and tree.attrs["resumes"] == 1
    # the finished group was kept, not rewritten, and the step continued from it
    np.testing.assert_array_equal(tree["first"]["a"].values, np.ones(150))
    assert toy_method["read_back"] == 150.0
    np.testing.assert_array_equal(tree["second"]["a"].values, np.full(150, 2.0))


def test_an_unknown_output_is_refused_naming_it(tmp_path, client):
    store = ResultsStore.create(tmp_path / "u.zarr", job={"name": "u"}, seed=0)
    spec = validate_spec(
        {
            "name": "u",
            "data": {"reader": "sklearn", "name": "iris"},
            "method": "rbf-spectral",
            "params": {"n_clusters": 2},
            "output": str(tmp_path / "u.zarr"),
        }
    )
    ctx = JobContext(
        method=spec.method, params={}, data=None, client=client, store=StoreView(store), seed=0
    )
    with pytest.raises(
        TypeError, match=r"yielded a dict; a step yields Group, GroupAttrs, LabelMap"
    ):
        write_outputs([Timing("a", 1.0), {"labels": [0]}], store, ctx)
    assert store.attrs["timings"] == {"a": 1.0}  # what came before was written


def test_the_store_view_cannot_write():
    assert not WRITERS & set(dir(StoreView))


@pytest.mark.parametrize("path", STEPS, ids=[p.stem for p in STEPS])
def test_steps_never_write(path):
    """A step hands its results over; every write goes through ``write_outputs``."""
    calls = [
        f"line {node.lineno}: .{node.func.attr}()"
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in WRITERS
    ]
    assert not calls, f"{path.name} writes itself: {calls}"


def test_no_function_of_the_job_layer_is_over_100_lines():
    files = sorted((REPO / "dkernel" / "jobs").rglob("*.py"))
    files.append(REPO / "dkernel" / "decomposition" / "selection.py")  # the job's selection
    long = [
        f"{path.relative_to(REPO)}:{node.lineno} {node.name} ({length} lines)"
        for path in files
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and (length := node.end_lineno - node.lineno + 1) > 100
    ]
    assert not long, long
