#!/usr/bin/env python3
"""Set up and run dkernel with nothing but Python >= 3.11.

    python3 tasks.py demo    # virtualenv + install + run the demo job
    python3 tasks.py test    # virtualenv + test extras + lint + types + the whole test suite
    python3 tasks.py test --fast  # the same without the tests marked slow (what CI still runs)
    python3 tasks.py docs    # the API reference from the docstrings, into docs/_build/html
    python3 tasks.py schemas # rewrite the job schema derived from the estimators

The virtualenv lives in ``.venv`` and is reused (reinstalled when pyproject.toml changes).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import venv
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent
#: Packages kept clean under mypy (configured in pyproject.toml's [tool.mypy]).
TYPED = ["dkernel/storage", "dkernel/runtime", "dkernel/jobs", "dkernel/schema"]
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
#: Azurite, Azure Blob storage's emulator (an npm package), for the az:// tests: installed
#: into the virtualenv (``.venv/node``) by the test setup when node and npm are there; the
#: tests skip without it (nothing is downloaded while they run).
AZURITE = "azurite@3.35.0"  # the last release that runs on node 20 (3.36 wants 21)


def _run(*cmd: str | Path, env: dict | None = None) -> None:
    print("+", " ".join(str(c) for c in cmd), flush=True)
    subprocess.run([str(c) for c in cmd], cwd=ROOT, check=True, env=env)


def ensure_venv() -> None:
    """Create ``.venv`` unless it exists."""
    if sys.version_info < (3, 11):  # noqa: UP036  (tasks.py may be run by an older python3)
        sys.exit(f"dkernel needs Python >= 3.11; this is {sys.version.split()[0]}.")
    if not (BIN / "python").exists():
        print(f"creating virtualenv {VENV}", flush=True)
        venv.EnvBuilder(with_pip=True).create(VENV)


#: pip's settings that ``uv pip install`` is given as flags (uv reads no pip configuration);
#: a setting outside these and :data:`_PIP_IGNORED` sends the install to pip.
_PIP_TO_UV = {
    "index-url": "--index-url",
    "extra-index-url": "--extra-index-url",
    "find-links": "--find-links",
    "constraint": "--constraint",
    "no-index": "--no-index",
}
_PIP_IGNORED = {"disable-pip-version-check", "no-input", "progress-bar", "quiet", "verbose"}
_PIP_TIMEOUT = ("timeout", "default-timeout")


def _pip_settings() -> dict[str, list[str]]:
    """This machine's pip configuration (files and ``PIP_*`` variables), as pip itself reads
    it: ``{option: [values]}`` (``find-links = a b`` gives two values)."""
    out = subprocess.run(
        [str(BIN / "python"), "-m", "pip", "config", "list"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    settings: dict[str, list[str]] = {}
    for line in out.splitlines():
        key, _, value = line.partition("=")
        option = key.split(".", 1)[-1]
        value = value.strip().strip("'\"")
        # a variable overrides the files: pip lists ":env:" keys after the files' keys
        settings[option] = value.split()
    return settings


def _uv_install(target: str) -> bool:
    """``uv pip install -e TARGET`` with pip's configuration translated; False (after saying
    why) where uv cannot stand in for pip here, so the caller uses pip.

    uv (a PyPI wheel, installed into the virtualenv with pip) resolves and links the test
    extras in about 10 s where pip takes 2.5 minutes on a 2-core machine, most of it
    unpacking and byte-compiling wheels one at a time. It does not compile: the suite's
    processes write the bytecode caches as they import (:func:`_env`)."""
    try:
        settings = _pip_settings()
    except subprocess.CalledProcessError as error:
        print(f"pip config list failed ({error}): installing with pip", flush=True)
        return False
    unknown = set(settings) - set(_PIP_TO_UV) - _PIP_IGNORED - {"cert", *_PIP_TIMEOUT}
    if unknown:
        print(f"pip settings uv would not honour ({', '.join(sorted(unknown))}): using pip")
        return False
    flags: list[str] = []
    for option, values in settings.items():
        if option == "no-index":
            if values and values[0].lower() in {"1", "true", "yes", "on"}:
                flags.append("--no-index")
        elif option in _PIP_TO_UV:
            for value in values:
                flags += [_PIP_TO_UV[option], value]
    env = dict(os.environ)
    if "cert" in settings:
        env["SSL_CERT_FILE"] = settings["cert"][0]
    for option in _PIP_TIMEOUT:
        if option in settings:
            env["UV_HTTP_TIMEOUT"] = settings[option][0]
    try:
        _run(BIN / "python", "-m", "pip", "install", "--quiet", "uv")
        # pip looks for a version across all its indexes and links; uv's default takes the
        # first index that has the package (a machine's local wheels would lose to PyPI's)
        install = ["pip", "install", "--quiet", "--python", BIN / "python", *flags]
        _run(
            BIN / "python",
            "-m",
            "uv",
            *install,
            "--index-strategy",
            "unsafe-best-match",
            "-e",
            target,
            env=env,
        )
    except subprocess.CalledProcessError as error:
        print(f"uv failed ({error}): installing with pip instead", flush=True)
        return False
    return True


def ensure_env(extras: str) -> None:
    """Create ``.venv`` and install dkernel with ``extras`` unless already up to date: with uv
    where it can honour this machine's pip settings (:func:`_uv_install`), else with pip.
    ``DKERNEL_INSTALLER=pip`` forces pip."""
    ensure_venv()
    digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()[:16]
    stamp = VENV / f".installed-{extras or 'base'}-{digest}"
    if not stamp.exists():
        target = f".[{extras}]" if extras else "."
        if os.environ.get("DKERNEL_INSTALLER") == "pip" or not _uv_install(target):
            _run(BIN / "python", "-m", "pip", "install", "--quiet", "--upgrade", "pip")
            _run(BIN / "python", "-m", "pip", "install", "--quiet", "-e", target)
        stamp.touch()


def start_azurite() -> Callable[[], None]:
    """Start installing :data:`AZURITE` into ``.venv/node`` (unless it is there or npm is
    missing) in the background, so that it runs beside the install; the function returned waits for
    it and says how it went. npm prefers its cache (``--prefer-offline``): a fresh clone on a
    machine that installed Azurite before asks the registry nothing."""
    if (VENV / "node" / "node_modules" / ".bin" / "azurite-blob").exists():
        return lambda: None
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        print("node/npm not found: the az:// tests will be skipped", flush=True)
        return lambda: None
    cmd = [npm, "install", "--prefix", str(VENV / "node"), AZURITE]
    cmd += ["--no-audit", "--no-fund", "--prefer-offline"]
    print("+", " ".join(cmd), "(in the background)", flush=True)
    log = tempfile.TemporaryFile()
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)

    def wait() -> None:
        code = proc.wait()
        log.seek(0)
        sys.stdout.write(log.read().decode(errors="replace"))
        log.close()
        if code != 0:
            print(f"npm install {AZURITE} failed: the az:// tests will be skipped", flush=True)

    return wait


def _env() -> dict:
    env = dict(os.environ)
    shared = ROOT.parent / "shared" / "data"
    if "DKERNEL_DATA" not in env and shared.exists():
        env["DKERNEL_DATA"] = str(shared)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env.setdefault("MPLBACKEND", "Agg")
    # uv installs without byte-compiling (40 s of a 2-core machine for modules mostly never
    # imported): the first process to import a module writes its cache into .venv for the rest
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def demo() -> None:
    ensure_env("")
    _run(BIN / "dkernel", "demo", env=_env())


#: pytest-xdist workers of ``tasks.py test``: one more than the cores (``-n 0`` runs serially).
#: With as many workers as cores, CI's 2 cores idled 12 % of the run while tests waited on
#: their subprocesses and servers; a third worker fills that (CPU 159 % -> 187 % of the run
#: on a clean clone). ``loadscope`` keeps a module on one worker: its module-scoped clusters
#: start once. The modules are handed out in the order tests/conftest.py gives them (the slow
#: end-to-end ones first, so that the workers finish together), not by number of tests.
WORKERS = ["-n", str(min((os.cpu_count() or 1) + 1, 8)), "--dist", "loadscope"]
WORKERS += ["--no-loadscope-reorder"]

#: The pytest plugins the suite uses, named instead of auto-loaded
#: (``PYTEST_DISABLE_PLUGIN_AUTOLOAD``): pytest rewrites the asserts of every module of a
#: distribution that registers a plugin, and zarr registers ``zarr.testing``, so zarr's and
#: hypothesis's modules were rewritten in each worker (5 of its 20 s of collection).
PLUGINS = ["-p", "xdist.plugin", "-p", "pytest_timeout", "-p", "_hypothesis_pytestplugin"]


def pytest_args(args: list[str]) -> list[str]:
    """The pytest command line of ``tasks.py test ARGS``: the suite's plugins, the 20 slowest
    tests reported, :data:`WORKERS` unless ``-n`` is given, and ``--fast`` for ``-m "not slow"``."""
    fast = "--fast" in args
    args = [a for a in args if a != "--fast"]
    given = any(a.startswith(("-n", "--numprocesses", "--dist")) for a in args)
    return [
        *PLUGINS,
        "--durations=20",
        *([] if given else WORKERS),
        *(["-m", "not slow"] if fast else []),
        *args,
    ]


def test() -> None:
    """Set up (npm installs Azurite beside uv or pip), lint (ruff), then the type check (mypy) and
    the suite (pytest) side by side: on a fresh clone (no mypy cache yet) mypy takes most of
    a minute, which it spends mostly while the suite's workers wait on subprocesses and
    servers. Fails when either fails; mypy's report is printed after the suite's."""
    ensure_venv()
    azurite = start_azurite()
    try:
        ensure_env("test")
    finally:
        azurite()
    env = _env()
    _run(BIN / "ruff", "check", "dkernel", "tests", "benchmarks", env=env)
    _run(BIN / "ruff", "format", "--check", "dkernel", "tests", "benchmarks", env=env)
    mypy = [str(BIN / "python"), "-m", "mypy", *TYPED]
    print("+", " ".join(mypy), "(beside pytest)", flush=True)
    with tempfile.TemporaryFile() as log:
        types = subprocess.Popen(mypy, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            tests = subprocess.run(
                [str(BIN / "python"), "-m", "pytest", *pytest_args(sys.argv[2:])],
                cwd=ROOT,
                env={**env, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
            ).returncode
        except BaseException:  # Ctrl-C: mypy's report is not wanted any more
            types.kill()
            types.wait()
            raise
        typed = types.wait()
        log.seek(0)
        print("mypy:", flush=True)
        sys.stdout.write(log.read().decode(errors="replace"))
    if typed or tests:
        print(f"mypy exited {typed}, pytest exited {tests}", flush=True)
        sys.exit(tests or typed)


def docs() -> None:
    ensure_env("test")
    out = ROOT / "docs" / "_build" / "html"
    args = ["-m", "sphinx", "-W", "--keep-going", "-b", "html", "docs/api", out]
    _run(BIN / "python", *args, env=_env())
    print(f"open {out / 'index.html'}", flush=True)


def schemas() -> None:
    """Derive the job schema again from the estimators and rewrite ``dkernel/schema/derived.json``
    (run after changing an estimator's parameters or docstrings; a test compares the two)."""
    ensure_env("test")
    _run(BIN / "python", "-m", "dkernel.jobs.derived", "--write", env=_env())


def notebooks() -> None:
    """Execute every notebook against the documented stores (``results/``, made when missing)
    and save the outputs, figures included, so they render without running."""
    ensure_env("test")
    env = _env()
    env.pop("MPLBACKEND", None)  # Jupyter's inline backend: figures become saved outputs
    code = (
        "import sys, nbformat\n"
        "from nbclient import NotebookClient\n"
        "for path in sys.argv[1:]:\n"
        "    nb = nbformat.read(path, as_version=4)\n"
        "    NotebookClient(nb, timeout=900, kernel_name='python3',\n"
        "                   resources={'metadata': {'path': 'notebooks'}}).execute()\n"
        "    nbformat.write(nb, path)\n"
        "    print('executed', path, flush=True)\n"
    )
    paths = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "notebooks").glob("*.ipynb"))
    _run(BIN / "python", "-c", code, *paths, env=env)


if __name__ == "__main__":
    commands = {
        "demo": demo,
        "test": test,
        "docs": docs,
        "schemas": schemas,
        "notebooks": notebooks,
    }
    if len(sys.argv) < 2 or sys.argv[1] not in commands:
        sys.exit(f"usage: python3 tasks.py {{{'|'.join(commands)}}} [pytest args]")
    try:
        commands[sys.argv[1]]()
    except subprocess.CalledProcessError as exc:
        sys.exit(exc.returncode)
