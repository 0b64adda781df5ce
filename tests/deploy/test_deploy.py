"""deploy/: every file parses, and everything it references exists (Docker, Helm and the batch
systems cannot run here); the TLS recipe is exercised for real on 127.0.0.1."""

from __future__ import annotations

import ast
import io
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from contextlib import redirect_stderr
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
BIN = Path(sys.executable).parent

DOCKER_INSTRUCTIONS = {
    "FROM", "RUN", "CMD", "LABEL", "EXPOSE", "ENV", "ADD", "COPY", "ENTRYPOINT", "VOLUME",
    "USER", "WORKDIR", "ARG", "ONBUILD", "STOPSIGNAL", "HEALTHCHECK", "SHELL",
}  # fmt: skip


def _yaml_files() -> list[Path]:
    return sorted(p for p in DEPLOY.rglob("*") if p.suffix in (".yaml", ".yml"))


def test_expected_files_exist():
    for rel in [
        "README.md",
        "docker/Dockerfile",
        "docker/docker-compose.yml",
        "docker/README.md",
        "kubernetes/values.yaml",
        "kubernetes/job-runner.yaml",
        "kubernetes/README.md",
        "hpc/jobqueue.yaml",
        "hpc/start_cluster.py",
        "hpc/README.md",
        "tls/make-certs.sh",
        "tls/security.yaml",
        "tls/dask-tls.yaml",
        "tls/README.md",
    ]:
        assert (DEPLOY / rel).is_file(), rel


@pytest.mark.parametrize("path", _yaml_files(), ids=lambda p: str(p.relative_to(DEPLOY)))
def test_yaml_parses(path):
    docs = list(yaml.safe_load_all(path.read_text()))
    assert docs and all(isinstance(d, dict) for d in docs)


def _dockerfile_instructions(path: Path) -> list[tuple[str, str]]:
    text = path.read_text().replace("\\\n", " ")
    out = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        word, _, rest = line.partition(" ")
        out.append((word.upper(), rest.strip()))
        assert word in DOCKER_INSTRUCTIONS, f"unknown Dockerfile instruction {word!r}"
    return out


def test_dockerfile_syntax_and_sources():
    instructions = _dockerfile_instructions(DEPLOY / "docker" / "Dockerfile")
    assert instructions[0][0] == "FROM"
    compose = yaml.safe_load((DEPLOY / "docker" / "docker-compose.yml").read_text())
    build = compose["x-dkernel-image"]["build"]
    context = (DEPLOY / "docker" / build["context"]).resolve()
    assert context == REPO
    assert (context / build["dockerfile"]).resolve() == DEPLOY / "docker" / "Dockerfile"
    copies = [rest for word, rest in instructions if word == "COPY"]
    assert copies
    for rest in copies:
        parts = shlex.split(rest)
        for src in parts[:-1]:
            assert (context / src).exists(), f"COPY source {src} missing from the build context"
    for word, rest in instructions:
        if word in ("CMD", "ENTRYPOINT"):
            import json

            assert isinstance(json.loads(rest), list), f"{word} should be exec form"
    assert any(w == "EXPOSE" and "8787" in r for w, r in instructions)
    # `pip install .` in the image needs the files pyproject.toml names (readme, license files)
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    copied = {src for rest in copies for src in shlex.split(rest)[:-1]}
    for needed in ["pyproject.toml", project["readme"], *project.get("license-files", [])]:
        assert needed in copied, f"the Dockerfile does not COPY {needed}, which the build reads"


def test_compose_services_and_references():
    compose = yaml.safe_load((DEPLOY / "docker" / "docker-compose.yml").read_text())
    services = compose["services"]
    assert set(services) >= {"scheduler", "worker", "runner"}
    assert services["worker"]["deploy"]["replicas"] >= 2
    ports = " ".join(services["scheduler"]["ports"])
    assert "8786" in ports and "8787" in ports
    assert all(p.startswith("127.0.0.1:") for p in services["scheduler"]["ports"])
    for name in ("scheduler", "worker", "runner"):
        assert services[name]["image"] == "dkernel:latest"
        assert "results:/results" in services[name]["volumes"]
    assert "tcp://scheduler:8786" in services["worker"]["command"]
    runner = services["runner"]["command"]
    assert runner[:2] == ["dkernel", "submit"]
    spec = runner[2]
    assert spec.startswith("/opt/dkernel/jobs/")
    assert (REPO / "jobs" / Path(spec).name).is_file()
    assert "results" in compose["volumes"]


def test_compose_runner_command_is_accepted_by_the_cli():
    from dkernel.cli import _parser

    compose = yaml.safe_load((DEPLOY / "docker" / "docker-compose.yml").read_text())
    args = _parser().parse_args(compose["services"]["runner"]["command"][1:])
    assert args.command == "submit" and args.scheduler == "tcp://scheduler:8786"


def test_helm_values_match_the_dask_chart_layout():
    values = yaml.safe_load((DEPLOY / "kubernetes" / "values.yaml").read_text())
    assert set(values) <= {"scheduler", "webUI", "worker", "jupyter"}
    for part in ("scheduler", "worker"):
        image = values[part]["image"]
        assert {"repository", "tag", "pullPolicy"} <= set(image)
    assert values["scheduler"]["serviceType"] == "ClusterIP"
    assert values["jupyter"]["enabled"] is False
    mounts = values["worker"]["mounts"]
    names = {v["name"] for v in mounts["volumes"]}
    assert {m["name"] for m in mounts["volumeMounts"]} <= names
    env = {e["name"]: e["value"] for e in values["worker"]["env"]}
    assert env["DKERNEL_OUTPUT_ROOT"] == "/results"


def test_job_runner_manifest():
    docs = list(yaml.safe_load_all((DEPLOY / "kubernetes" / "job-runner.yaml").read_text()))
    kinds = {d["kind"] for d in docs}
    assert kinds == {"PersistentVolumeClaim", "Job"}
    job = next(d for d in docs if d["kind"] == "Job")
    container = job["spec"]["template"]["spec"]["containers"][0]
    from dkernel.cli import _parser

    args = _parser().parse_args(container["command"][1:])
    assert args.command == "submit" and args.log_json
    claim = next(d for d in docs if d["kind"] == "PersistentVolumeClaim")["metadata"]["name"]
    volumes = job["spec"]["template"]["spec"]["volumes"]
    assert any(v.get("persistentVolumeClaim", {}).get("claimName") == claim for v in volumes)
    values = yaml.safe_load((DEPLOY / "kubernetes" / "values.yaml").read_text())
    claims = {
        v["persistentVolumeClaim"]["claimName"] for v in values["worker"]["mounts"]["volumes"]
    }
    assert claim in claims


def test_jobqueue_config_and_script():
    config = yaml.safe_load((DEPLOY / "hpc" / "jobqueue.yaml").read_text())
    for system in ("slurm", "pbs"):
        section = config["jobqueue"][system]
        assert {"cores", "memory", "walltime", "processes"} <= set(section)
        assert any("DKERNEL_OUTPUT_ROOT" in line for line in section["job-script-prologue"])
    source = (DEPLOY / "hpc" / "start_cluster.py").read_text()
    ast.parse(source)
    assert "jobqueue.yaml" in source and "SLURMCluster" in source and "PBSCluster" in source


def test_shell_scripts_parse():
    for script in DEPLOY.rglob("*.sh"):
        proc = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        assert os.access(script, os.X_OK), f"{script} is not executable"


_LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
_PATH = re.compile(r"(?<![\w/.$-])((?:deploy|jobs)/[\w./-]+\.(?:ya?ml|py|sh|md))")


@pytest.mark.parametrize(
    "readme", sorted(DEPLOY.rglob("*.md")), ids=lambda p: str(p.relative_to(DEPLOY))
)
def test_readme_references_exist(readme):
    text = readme.read_text()
    for target in _LINK.findall(text):
        if target.startswith(("http://", "https://")):
            continue
        assert (readme.parent / target).exists(), f"{readme.name}: link {target} is broken"
    for ref in _PATH.findall(text):
        assert (REPO / ref).exists(), f"{readme.name}: {ref} does not exist"
    # every dkernel command line shown parses with the real CLI
    from dkernel.cli import _parser

    in_code = False
    for line in text.splitlines():
        if line.strip().startswith("```"):
            in_code = not in_code
            continue
        line = line.strip().rstrip("\\").strip()
        if not in_code or not line.startswith("dkernel ") or "$(" in line:
            continue
        argv = shlex.split(line.split("#")[0])[1:]
        if len(argv) < 2 or argv[-1] in ("--scheduler",):
            continue
        with redirect_stderr(io.StringIO()):
            _parser().parse_args(argv)


def test_readme_walks_through_every_target():
    text = (DEPLOY / "README.md").read_text()
    for target in ("docker/README.md", "kubernetes/README.md", "hpc/README.md", "tls/README.md"):
        assert f"({target})" in text
    for command in (
        "dkernel run",
        "dkernel submit",
        "docker compose",
        "helm install",
        "start_cluster.py",
    ):
        assert command in text


# ------------------------------------------------------------------------------------------
# TLS for real: certificates from make-certs.sh, a TLS scheduler and worker, dkernel submit
# ------------------------------------------------------------------------------------------


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl is not installed")
def test_tls_recipe_end_to_end(tmp_path):
    from dkernel.cli import main
    from dkernel.storage import open_results

    certs = tmp_path / "certs"
    subprocess.run([str(DEPLOY / "tls" / "make-certs.sh"), str(certs)], check=True, timeout=120,
                   capture_output=True)  # fmt: skip
    for name in ("ca", "scheduler", "worker", "client"):
        assert (certs / f"{name}.pem").is_file()
    assert (certs / "client.key").stat().st_mode & 0o077 == 0
    config = tmp_path / "security.yaml"
    config.write_text((DEPLOY / "tls" / "security.yaml").read_text())  # certs/ next to it

    port = _free_port()
    tls = ["--tls-ca-file", str(certs / "ca.pem")]
    procs = [
        subprocess.Popen(
            [str(BIN / "dask"), "scheduler", "--protocol", "tls", "--host", "127.0.0.1",
             "--port", str(port), "--dashboard-address", f"127.0.0.1:{_free_port()}", *tls,
             "--tls-cert", str(certs / "scheduler.pem"), "--tls-key", str(certs / "scheduler.key")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )
    ]  # fmt: skip
    address = f"tls://127.0.0.1:{port}"
    try:
        procs.append(
            subprocess.Popen(
                [str(BIN / "dask"), "worker", address, "--host", "127.0.0.1", "--nthreads", "1",
                 "--no-nanny", "--no-dashboard", *tls, "--tls-cert", str(certs / "worker.pem"),
                 "--tls-key", str(certs / "worker.key")],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
            )
        )  # fmt: skip
        from dkernel.runtime import load_security

        security = load_security(config=str(config))
        from distributed import Client

        deadline = time.monotonic() + 60
        with Client(address, security=security, timeout=60) as c:
            while not c.scheduler_info()["workers"]:
                assert time.monotonic() < deadline, "TLS worker did not register"
                time.sleep(0.2)

        job = REPO / "jobs" / "wine-rbf-kpca.yaml"
        out = tmp_path / "tls.zarr"
        err = io.StringIO()
        with redirect_stderr(err):
            code = main(["submit", str(job), "--scheduler", address, "--security-config",
                         str(config), "--output", str(out), "--no-progress"])  # fmt: skip
        assert code == 0, err.getvalue()
        assert open_results(out).attrs["status"] == "complete"
        # the same with the three flags
        with redirect_stderr(err):
            code = main(["submit", str(job), "--scheduler", address, "--output", str(out),
                         "--overwrite", "--no-progress", *tls, "--tls-cert",
                         str(certs / "client.pem"), "--tls-key", str(certs / "client.key")])  # fmt: skip
        assert code == 0, err.getvalue()
        # without certificates the scheduler is unreachable: exit 2, clear message
        err = io.StringIO()
        with redirect_stderr(err):
            code = main(["submit", str(job), "--scheduler", address, "--output",
                         str(tmp_path / "no.zarr"), "--timeout", "3", "--no-progress"])  # fmt: skip
        assert code == 2 and "could not reach the Dask scheduler" in err.getvalue()
        assert not (tmp_path / "no.zarr").exists()
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
            p.wait(timeout=30)


def test_security_config_errors(tmp_path):
    from dkernel.errors import SpecError
    from dkernel.runtime import load_security

    assert load_security() is None
    with pytest.raises(SpecError, match="does not exist"):
        load_security(config=str(tmp_path / "nope.yaml"))
    bad = tmp_path / "bad.yaml"
    bad.write_text("tls_ca_file: a\npassword: hunter2\n")
    with pytest.raises(SpecError, match=r"unknown keys \['password'\]"):
        load_security(config=str(bad))
    with pytest.raises(SpecError, match=r"missing \['tls_client_cert', 'tls_client_key'\]"):
        load_security(ca_file=str(bad))
    (tmp_path / "ca.pem").write_text("x")
    with pytest.raises(SpecError, match=r"tls_client_cert: file .*c\.pem does not exist"):
        load_security(ca_file=str(tmp_path / "ca.pem"), cert="c.pem", key="k.pem")
