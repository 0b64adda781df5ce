"""``dkernel schema``: the JSON Schema of job specs, derived from the same ``Param`` tuples."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from dkernel.cli import main
from dkernel.io.registry import READERS
from dkernel.jobs.registry import METHODS
from dkernel.jobs.spec import job_spec_schema

jsonschema = pytest.importorskip("jsonschema")

REPO = Path(__file__).resolve().parents[2]
JOBS = sorted((REPO / "jobs").glob("*.yaml"))


@pytest.fixture(scope="module")
def schema():
    return job_spec_schema()


@pytest.fixture(scope="module")
def validator(schema):
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_structure(schema):
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["additionalProperties"] is False
    assert set(schema["required"]) == {"name", "data", "method", "output"}
    assert schema["properties"]["method"]["enum"] == METHODS.names()
    assert schema["$defs"]["data"]["properties"]["reader"]["enum"] == READERS.names()
    for name in METHODS.names():
        params = schema["$defs"][f"params-{name}"]["properties"]
        assert list(params) == [p.name for p in METHODS[name].params]
    mssc = schema["$defs"]["params-mssc"]["properties"]
    assert mssc["n_clusters"] == {
        "anyOf": [
            {"type": "integer", "minimum": 1, "maximum": 100_000},  # COUNT_CAPS
            {"type": "string", "enum": ["auto"]},
        ],
        "default": "auto",
        "description": "Number of output clusters.",
    }
    assert mssc["path_radius"]["maximum"] == 1 and mssc["bandwidth"]["exclusiveMinimum"] == 0
    assert mssc["bandwidth"]["type"] == ["number", "null"]
    assert mssc["embedding"]["enum"][0] == "normalized"
    assert "n_clusters" in schema["$defs"]["params-rbf-spectral"]["required"]
    assert schema["$defs"]["data-csv"]["required"] == ["reader", "path"]
    csv = schema["$defs"]["data-csv"]["properties"]
    assert csv["label_column"]["type"] == ["integer", "string", "null"]
    assert csv["skip_columns"]["items"] == {"type": ["integer", "string"]}


@pytest.mark.parametrize("path", JOBS, ids=[p.stem for p in JOBS])
def test_every_example_job_conforms(path, validator):
    errors = list(validator.iter_errors(yaml.safe_load(path.read_text())))
    assert not errors, [e.message for e in errors]


def test_the_demo_spec_conforms(validator):
    from dkernel.jobs.demo import demo_spec

    spec = demo_spec().to_dict()
    assert not list(validator.iter_errors(spec))


@pytest.mark.parametrize(
    ("change", "where"),
    [
        ({"method": "msc"}, "method"),
        ({"params": {"n_clusters": 3, "n_clusterz": 2}}, "params"),
        ({"params": {"n_clusters": 0}}, "params"),
        ({"params": {"n_clusters": 3, "embedding": "pca"}}, "params"),
        ({"params": None}, "params"),  # rbf-spectral requires n_clusters
        ({"data": {"reader": "sklearn", "name": "wine", "nope": 1}}, "data"),
        ({"data": {"reader": "csv"}}, "data"),  # no path
        ({"seed": -1}, "seed"),
        ({"name": "a b"}, "name"),
    ],
)
def test_bad_specs_are_refused(validator, change, where):
    spec = {
        "name": "wine",
        "data": {"reader": "sklearn", "name": "wine"},
        "method": "rbf-spectral",
        "params": {"n_clusters": 3},
        "output": "out.zarr",
    }
    assert not list(validator.iter_errors(spec))
    errors = list(validator.iter_errors({**spec, **change}))
    assert errors and any(where in [*e.absolute_path, *e.relative_schema_path] for e in errors)


def test_cli_prints_and_writes_the_schema(tmp_path, capsys, schema):
    assert main(["schema"]) == 0
    assert json.loads(capsys.readouterr().out) == schema
    out = tmp_path / "dkernel-job.schema.json"
    assert main(["schema", "--output", str(out)]) == 0
    assert json.loads(out.read_text()) == schema
    assert main(["schema", "--output", str(tmp_path / "missing" / "x.json")]) == 2


@pytest.mark.parametrize(
    "method",
    [
        "mssc",
        "spectral-clustering",
        "kernel-decomposition",
        "kernel-kmeans",
        "jrc",
        "pck-spectral",
    ],
)
def test_n_clusters_auto_conforms_and_other_strings_do_not(validator, method):
    spec = {
        "name": "a",
        "data": {"reader": "sklearn", "name": "iris"},
        "method": method,
        "params": {"n_clusters": "auto"},
        "output": "a.zarr",
    }
    assert not list(validator.iter_errors(spec))
    spec["params"]["n_clusters"] = "many"
    assert list(validator.iter_errors(spec))
