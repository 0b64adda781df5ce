"""Security: specs cannot run code, outputs stay in the output root, the embedded cluster
listens on 127.0.0.1 only, provenance holds no secrets or environment dumps."""

from __future__ import annotations

import io
import re
import socket
from contextlib import redirect_stderr
from pathlib import Path

import pytest
import yaml

from dkernel.cli import main
from dkernel.errors import SpecError
from dkernel.jobs.spec import OutputPolicy, validate_spec

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "dkernel"

FORBIDDEN = [
    (r"\bpickle\.loads?\(", "pickle"),
    (r"\bcloudpickle\.loads?\(", "cloudpickle"),
    (r"(?<![.\w])eval\(", "eval"),
    (r"(?<![.\w])exec\(", "exec"),
    (r"\b__import__\(", "__import__"),
    (r"importlib\.import_module\(", "import_module"),
    (r"yaml\.load\(", "yaml.load (use safe_load)"),
    (r"yaml\.unsafe_load|yaml\.full_load|UnsafeLoader|FullLoader", "unsafe YAML loader"),
    (r"allow_pickle\s*=\s*True", "allow_pickle=True"),
    (r"shell\s*=\s*True", "subprocess with shell=True"),
    (r"os\.system\(", "os.system"),
]


#: Reviewed exceptions: the registry imports the modules found in its own package directory
#: (``dkernel/jobs/steps/``), named in code, never a name from a spec; the lazy re-exports
#: import a family's own submodules, named in that family's ``__init__``; the helper process
#: and the process that started it unpickle what the other wrote on the pipes between them,
#: which no other process holds (as ``multiprocessing`` does with its children).
ALLOWED = {
    ("dkernel/registry.py", "import_module"),
    ("dkernel/_lazy.py", "import_module"),
    ("dkernel/_helper.py", "pickle"),
}


def test_package_source_has_no_code_execution_paths():
    hits = []
    for path in PACKAGE.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        for pattern, what in FORBIDDEN:
            if (path.relative_to(REPO).as_posix(), what) in ALLOWED:
                continue
            for m in re.finditer(pattern, text):
                line = text.count("\n", 0, m.start()) + 1
                hits.append(f"{path.relative_to(REPO)}:{line}: {what}")
    assert not hits, "\n".join(hits)


BASE = {
    "name": "s",
    "data": {"reader": "sklearn", "name": "iris"},
    "method": "rbf-spectral",
    "params": {"n_clusters": 3},
    "output": "s.zarr",
}


@pytest.mark.parametrize(
    ("change", "pattern"),
    [
        ({"method": "os.system"}, r"unknown method 'os.system'"),
        ({"method": "dkernel.jobs.steps.rbf_spectral:run"}, r"unknown method"),
        ({"data": {"reader": "numpy.load", "path": "x"}}, r"unknown reader 'numpy.load'"),
        ({"data": {"reader": "sklearn", "name": "__import__('os')"}}, r"must be one of 'wine'"),
        (
            {"params": {"n_clusters": 3, "embedding": "builtins.eval"}},
            r"params.embedding: must be one of 'kpca'",
        ),
    ],
)
def test_names_in_specs_come_only_from_registries(change, pattern):
    with pytest.raises(SpecError, match=pattern):
        validate_spec({**BASE, **change})


def test_yaml_tags_that_construct_objects_are_refused(tmp_path):
    spec = tmp_path / "evil.yaml"
    marker = tmp_path / "pwned"
    spec.write_text(
        f"name: !!python/object/apply:os.system ['touch {marker}']\n"
        "method: rbf-spectral\ndata: {reader: sklearn, name: iris}\noutput: o.zarr\n"
    )
    err = io.StringIO()
    with redirect_stderr(err):
        assert main(["validate", str(spec), "--no-data"]) == 2
    assert "YAML syntax error" in err.getvalue()
    assert not marker.exists()


def test_output_policy_confines_and_resolves(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DKERNEL_OUTPUT_ROOT", raising=False)
    policy = OutputPolicy.default(tmp_path / "specs" / "job.yaml")
    assert policy.confine("results/a.zarr") == (tmp_path / "results" / "a.zarr").resolve()
    assert policy.confine(tmp_path / "specs" / "b.zarr").name == "b.zarr"
    for bad in ("..", "../x.zarr", "results/../../x.zarr", "/tmp/elsewhere.zarr", "."):
        with pytest.raises(SpecError, match="outside the output root"):
            policy.confine(bad)
    # an explicit root (environment or --output-root): relative outputs land inside it
    root = tmp_path / "out"
    monkeypatch.setenv("DKERNEL_OUTPUT_ROOT", str(root))
    policy = OutputPolicy.default(tmp_path / "job.yaml")
    assert policy.roots == (root.resolve(),)
    assert policy.confine("a.zarr") == root.resolve() / "a.zarr"
    with pytest.raises(SpecError, match=r"DKERNEL_OUTPUT_ROOT=DIR .*--output-root"):
        policy.confine(tmp_path / "a.zarr")
    assert OutputPolicy.default(None, root="/").confine("/tmp/x.zarr") == Path("/tmp/x.zarr")


def test_output_root_override_on_the_command_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DKERNEL_OUTPUT_ROOT", raising=False)
    other = tmp_path.parent / f"{tmp_path.name}-other"
    spec = tmp_path / "job.yaml"
    spec.write_text(yaml.safe_dump({**BASE, "output": str(other / "s.zarr")}))
    err = io.StringIO()
    with redirect_stderr(err):
        assert main(["validate", str(spec), "--no-data"]) == 2
    assert "outside the output root" in err.getvalue()
    assert main(["validate", str(spec), "--no-data", "--output-root", str(other)]) == 0


def test_embedded_cluster_listens_on_loopback_only(client):
    # tls:// with per-cluster credentials (issue 34): tests/ops/test_cluster_security.py
    cluster = client.cluster
    assert client.scheduler.address.startswith("tls://127.0.0.1:")
    assert client.dashboard_link.startswith("http://127.0.0.1:")
    workers = client.scheduler_info()["workers"]
    assert workers and all(addr.startswith("tls://127.0.0.1:") for addr in workers)
    http = cluster.scheduler.http_server
    hosts = {s.getsockname()[0] for s in http._sockets.values()}
    assert hosts == {"127.0.0.1"}
    for listener in cluster.scheduler.listeners:
        assert listener.listen_address.startswith("tls://127.0.0.1:")
    # and nothing answers on a non-loopback interface at the scheduler's port
    port = int(client.scheduler.address.rsplit(":", 1)[1])
    try:
        external = socket.gethostbyname(socket.gethostname())
    except OSError:
        external = None
    if external and not external.startswith("127."):
        with socket.socket() as s, pytest.raises(OSError):
            s.settimeout(1)
            s.connect((external, port))


def test_provenance_has_no_secrets_or_environment(tmp_path, monkeypatch, client):
    from dkernel.jobs.runner import run_job

    secret = "s3cr3t-T0KEN-value-4242"
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)
    monkeypatch.setenv("DKERNEL_API_TOKEN", secret)
    monkeypatch.setenv("DKERNEL_TEST_DIR", str(tmp_path))
    spec = tmp_path / "job.yaml"
    rows = "\n".join(f"{i % 7},{(i * 3) % 11},{i % 5}" for i in range(40))
    (tmp_path / "d.csv").write_text(rows + "\n")
    spec.write_text(
        yaml.safe_dump(
            {
                **BASE,
                "data": {"reader": "csv", "path": "${DKERNEL_TEST_DIR}/d.csv"},
                "params": {"n_clusters": 2},
            }
        )
    )
    out = run_job(spec, output=tmp_path / "p.zarr", client=client, progress=False)
    texts = [p.read_text(errors="replace") for p in out.rglob("zarr.json")]
    blob = "\n".join(texts)
    assert secret not in blob
    assert "AWS_SECRET_ACCESS_KEY" not in blob and "DKERNEL_API_TOKEN" not in blob
    # the spec is stored as written (variables unexpanded), not an environment dump
    assert "${DKERNEL_TEST_DIR}/d.csv" in blob
    for name in ("PATH", "HOME", "USER"):
        assert f'"{name}"' not in blob
    import zarr

    attrs = dict(zarr.open_group(str(out), mode="r").attrs)
    assert set(attrs) <= {
        "format",
        "Conventions",
        "title",
        "status",
        "created",
        "finished",
        "job",
        "seed",
        "versions",
        "git_revision",
        "timings",
        "groups",
        "runtime",
        "resources",
        "resumes",
        "resumed",
        "error",
        "traceback",
        # the files beside the store its jobs wrote (paths relative to the output root)
        "side_files",
        # chunk counts and bytes per array (dkernel.storage.manifest): no paths, no values
        "manifest",
    }
