"""A job is one list of named stages (dkernel.jobs.stages): the order, what ``validate`` runs,
and each concern done once per ``dkernel run`` (the spec read once, the cost estimated once),
counted on the real functions."""

from __future__ import annotations

from dataclasses import replace

import pytest
import yaml

from dkernel.cli import main
from dkernel.jobs import spec as spec_module
from dkernel.jobs.registry import METHODS
from dkernel.jobs.stages import RUN, VALIDATE

STAGES = [
    "parse",
    "validate",
    "resolve paths",
    "open and check data",
    "estimate cost",
    "check outputs",
    "lease",
    "runtime",
    "store",
    "compute",
    "write",
    "finish",
]


def test_the_stages_in_order():
    assert [name for name, _ in RUN] == STAGES
    assert [name for name, _ in VALIDATE] == STAGES[: STAGES.index("lease")]


def _job(tmp_path, method="rbf-spectral", params=None):
    path = tmp_path / "job.yaml"
    body = {
        "name": "counted",
        "data": {"reader": "sklearn", "name": "iris", "standardize": True},
        "method": method,
        "params": params or {"n_clusters": 3},
        "output": "counted.zarr",
    }
    path.write_text(yaml.safe_dump(body, sort_keys=False))
    return path


@pytest.fixture
def counted(monkeypatch):
    """Calls of the real spec reader and of the real cost estimate of every method."""
    calls: dict[str, list] = {"read": [], "estimate": []}
    read = spec_module.read_spec_text

    def reading(path):
        calls["read"].append(path)
        return read(path)

    monkeypatch.setattr(spec_module, "read_spec_text", reading)
    METHODS.load()
    for name in METHODS.names():
        method = METHODS[name]
        if method.estimate is None:
            continue

        def estimating(params, n_samples, n_features, _estimate=method.estimate):
            calls["estimate"].append((params, n_samples, n_features))
            return _estimate(params, n_samples, n_features)

        monkeypatch.setitem(METHODS._entries, name, replace(method, estimate=estimating))
    return calls


def test_one_run_reads_the_spec_once_and_estimates_the_cost_once(tmp_path, counted, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DKERNEL_OUTPUT_ROOT", raising=False)
    job = _job(tmp_path)
    assert main(["run", str(job), "--no-progress", "--output-root", str(tmp_path)]) == 0
    assert counted["read"] == [job]
    assert len(counted["estimate"]) == 1
    assert (tmp_path / "counted.zarr" / "zarr.json").exists()


def test_a_run_on_a_cluster_estimates_once_too(tmp_path, counted, monkeypatch):
    """With process workers the runtime's choice and the workers' memory cap read the same
    estimate."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DKERNEL_OUTPUT_ROOT", raising=False)
    job = _job(tmp_path)
    args = ["run", str(job), "--no-progress", "--workers", "1", "--threads", "1"]
    assert main([*args, "--output-root", str(tmp_path)]) == 0
    assert counted["read"] == [job]
    assert len(counted["estimate"]) == 1


def test_validate_reads_once_and_writes_nothing(tmp_path, counted, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DKERNEL_OUTPUT_ROOT", raising=False)
    job = _job(tmp_path)
    assert main(["validate", str(job), "--output-root", str(tmp_path)]) == 0
    assert "valid (rbf-spectral on 150 × 4" in capsys.readouterr().out
    assert counted["read"] == [job]
    assert len(counted["estimate"]) == 1
    assert not (tmp_path / "counted.zarr").exists()


def test_the_cost_is_checked_in_its_stage_before_any_output(tmp_path, counted, monkeypatch):
    """An estimate above the limit is refused by the estimate stage: no store, no lease."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DKERNEL_OUTPUT_ROOT", raising=False)
    job = _job(tmp_path)
    body = yaml.safe_load(job.read_text())
    job.write_text(yaml.safe_dump({**body, "limits": {"max_memory": "1KiB"}}))
    assert main(["run", str(job), "--no-progress", "--output-root", str(tmp_path)]) == 2
    assert len(counted["estimate"]) == 1
    assert not (tmp_path / "counted.zarr").exists()
