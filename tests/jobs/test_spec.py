from pathlib import Path

import pytest
import yaml

from dkernel.errors import SpecError
from dkernel.jobs.spec import load_spec, validate_spec

REPO = Path(__file__).resolve().parents[2]
GOOD = {
    "name": "wine",
    "data": {"reader": "sklearn", "name": "wine", "standardize": True},
    "method": "rbf-spectral",
    "params": {"n_clusters": 3},
    "output": "results/w.zarr",
}


def _with(**changes):
    spec = {k: (dict(v) if isinstance(v, dict) else v) for k, v in GOOD.items()}
    for dotted, value in changes.items():
        parts = dotted.split("__")
        target = spec
        for part in parts[:-1]:
            target = target[part]
        if value is _DELETE:
            del target[parts[-1]]
        else:
            target[parts[-1]] = value
    return spec


_DELETE = object()

MALFORMED = [
    (
        "unknown top-level key",
        _with(outptu="x"),
        r"outptu: unknown key 'outptu'. Did you mean 'output'",
    ),
    ("missing method", _with(method=_DELETE), r"method: is required"),
    (
        "unknown method",
        _with(method="kmeans-magic"),
        r"unknown method 'kmeans-magic'. Valid methods: .*rbf-spectral",
    ),
    (
        "method named by its estimator",
        _with(method="JointRankingClustering"),
        r"unknown method 'JointRankingClustering'. Did you mean 'jrc'\? Valid methods",
    ),
    (
        "method named by its estimator's words",
        _with(method="kernel-pca"),
        r"unknown method 'kernel-pca'. Did you mean 'rbf-spectral'\?",
    ),
    ("wrong type for seed", _with(seed="zero"), r"seed: must be an int >= 0 .*got 'zero' \(str\)"),
    ("negative seed", _with(seed=-1), r"seed: must be an int >= 0"),
    (
        "n_clusters as string",
        _with(params__n_clusters="3"),
        r"params.n_clusters: must be an int >= 1; got '3' \(str\)",
    ),
    (
        "n_clusters zero",
        _with(params__n_clusters=0),
        r"params.n_clusters: must be an int >= 1; got 0",
    ),
    ("negative sigma", _with(params__sigma=-2.0), r"params.sigma: must be a number > 0 .*got -2.0"),
    ("bool where number", _with(params__sigma=True), r"params.sigma: .*got True \(bool\)"),
    (
        "unknown param",
        _with(params__n_cluster=3),
        r"params.n_cluster: unknown key .*Did you mean 'n_clusters'",
    ),
    (
        "bad choice",
        _with(params__embedding="kpac"),
        r"params.embedding: must be one of .*Did you mean 'kpca'",
    ),
    (
        "unknown reader",
        _with(data__reader="hdf5"),
        r"data.reader: unknown reader 'hdf5'. Valid readers: .*csv",
    ),
    ("unknown dataset", _with(data__name="mnist"), r"data.name: must be one of 'wine'"),
    (
        "missing file",
        _with(data={"reader": "csv", "path": "/nonexistent/x.csv"}),
        r"data.path: file not found: '/nonexistent/x.csv'",
    ),
    (
        "unset env var",
        _with(data={"reader": "csv", "path": "${DKERNEL_NO_SUCH_VAR}/x.csv"}),
        r"environment variable 'DKERNEL_NO_SUCH_VAR'",
    ),
    (
        "data not a mapping",
        _with(data="wine.csv"),
        r"data: must be a mapping; got 'wine.csv' \(str\)",
    ),
    ("name with slash", _with(name="../evil"), r"name: must be letters, digits"),
    ("bad size limit", _with(limits={"max_memory": "lots"}), r"limits.max_memory: must be a size"),
    (
        "standardize not bool",
        _with(data__standardize="yes"),
        r"data.standardize: must be true or false",
    ),
    ("bad runtime", _with(runtime={"n_workers": 0}), r"runtime.n_workers: must be an int >= 1"),
]


@pytest.mark.parametrize("raw, message", [m[1:] for m in MALFORMED], ids=[m[0] for m in MALFORMED])
def test_malformed_specs_give_specific_messages(raw, message):
    with pytest.raises(SpecError, match=message):
        validate_spec(raw)


def test_good_spec_fills_defaults():
    spec = validate_spec(GOOD)
    assert spec.params["embedding"] == "kpca" and spec.params["n_init"] == 10
    assert spec.standardize is True and spec.seed == 0 and spec.output == Path("results/w.zarr")


def test_env_expansion_in_paths(tmp_path, monkeypatch):
    (tmp_path / "t.csv").write_text("1,2\n3,4\n")
    monkeypatch.setenv("MYDATA", str(tmp_path))
    spec = validate_spec(_with(data={"reader": "csv", "path": "${MYDATA}/t.csv"}))
    assert spec.data["path"] == str(tmp_path / "t.csv")


@pytest.mark.parametrize(
    "text, message",
    [
        ("name: [unclosed", r"YAML syntax error at line 1"),
        ("", r"got an empty file"),
        ("- a\n- b\n", r"must be a YAML mapping .* got list"),
        ("!!python/object/apply:os.system ['echo hi']", r"YAML syntax error"),
    ],
)
def test_yaml_files_that_are_not_specs(tmp_path, text, message):
    path = tmp_path / "job.yaml"
    path.write_text(text)
    with pytest.raises(SpecError, match=message):
        load_spec(path)


def test_a_missing_relative_path_names_the_directory_it_was_read_from(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SpecError, match="read from the working directory") as info:
        validate_spec(_with(data={"reader": "csv", "path": "data/x.csv"}))
    assert str(tmp_path) in str(info.value)
    with pytest.raises(SpecError) as absolute:  # an absolute path names no directory
        validate_spec(_with(data={"reader": "csv", "path": str(tmp_path / "x.csv")}))
    assert "working directory" not in str(absolute.value)


def test_missing_spec_file(tmp_path):
    with pytest.raises(SpecError, match="does not exist"):
        load_spec(tmp_path / "nope.yaml")


def _needs_data(path: Path) -> bool:
    """Jobs whose data live under DKERNEL_DATA (a path there, or a reader of those datasets)."""
    spec = yaml.safe_load(path.read_text())
    data = spec.get("data", {})
    return "${DKERNEL_DATA}" in str(data) or data.get("reader") in DATA_READERS


DATA_READERS = {"frey-faces", "samson", "jasper", "statlog", "wisconsin", "ecoli", "shapes"}
EXAMPLES = sorted((REPO / "jobs").glob("*.yaml"))


@pytest.mark.parametrize(
    "path",
    [pytest.param(p, marks=[pytest.mark.data] if _needs_data(p) else []) for p in EXAMPLES],
    ids=lambda p: p.name,
)
def test_every_example_job_validates(path):
    spec = load_spec(path)
    assert spec.name and yaml.safe_load(path.read_text())["method"] == spec.method


@pytest.mark.parametrize(
    "method, old, value, new",
    [
        ("rbf-spectral", "block_size", 64, "block_rows"),
        ("kernel-decomposition", "bandwidths", [0.1], "sigmas"),
        ("mssc", "spectral_fraction", 0.2, "sigma_fraction"),
        ("mssc", "spectral_bandwidth", 0.2, "sigma"),
    ],
)
def test_a_renamed_parameter_names_its_new_name(method, old, value, new):
    raw = _with(method=method, params={"n_clusters": [3] if "decomp" in method else 3, old: value})
    with pytest.raises(
        SpecError, match=rf"params.{old}: unknown key '{old}'. It was renamed to '{new}'"
    ):
        validate_spec(raw)
