"""Wall time of the light commands: the median of several runs, each in a fresh process.

``dkernel --help``, ``dkernel run --help``, ``dkernel methods``, ``dkernel methods mssc`` and
``dkernel validate jobs/wine-rbf-kpca.yaml`` should each take at most one second on a quiet
machine (issue 33): they import neither Dask nor scikit-learn nor SciPy
(``tests/test_cli_imports.py`` checks that). ``import numpy`` and a bare interpreter are
timed too, as the floor under every command.

``dkernel run jobs/wine-rbf-kpca.yaml`` (178 samples) should take at most three seconds
(issue 32): a job that small runs on threads of the command's own process by default
(``dkernel.runtime.connect.runs_in_process``); the same job with ``runtime.in_process:
false``, which starts process workers, is timed beside it.

Usage::

    python benchmarks/bench_cli_startup.py [--repeat 5] [--limit 1.0] [--run-limit 3.0] [--out F]

The table goes to ``benchmarks/results/cli_startup.md``. Exits with status 1 when a light
command's median is above ``--limit`` seconds, or the wine job's above ``--run-limit``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: The small job as shipped, whose wall time is held to ``--run-limit``.
RUN = "dkernel run jobs/wine-rbf-kpca.yaml"
#: The same job on process workers, for comparison.
RUN_PROCESSES = "dkernel run wine-rbf-kpca (runtime.in_process: false)"


def process_workers_spec(folder: str) -> str:
    """The wine job's spec with ``runtime.in_process: false``, written into ``folder``."""
    import yaml

    job = ROOT / "jobs" / "wine-rbf-kpca.yaml"
    raw = yaml.safe_load(job.read_text())
    raw["runtime"] = {**(raw.get("runtime") or {}), "in_process": False}
    path = Path(folder) / "wine-process-workers.yaml"
    path.write_text(yaml.safe_dump(raw))
    return str(path)


def dkernel_command() -> list[str]:
    """The installed ``dkernel`` script beside this interpreter, else ``python -m dkernel.cli``."""
    script = Path(sys.executable).with_name("dkernel")
    return [str(script)] if script.exists() else [sys.executable, "-m", "dkernel.cli"]


def commands(output_root: str) -> dict[str, list[str]]:
    dk = dkernel_command()
    return {
        "python -c pass": [sys.executable, "-c", "pass"],
        "python -c 'import numpy'": [sys.executable, "-c", "import numpy"],
        "dkernel --help": [*dk, "--help"],
        "dkernel run --help": [*dk, "run", "--help"],
        "dkernel methods": [*dk, "methods"],
        "dkernel methods mssc": [*dk, "methods", "mssc"],
        "dkernel validate jobs/wine-rbf-kpca.yaml": [
            *dk, "validate", "jobs/wine-rbf-kpca.yaml", "--output-root", output_root,
        ],
        RUN: [
            *dk, "run", "jobs/wine-rbf-kpca.yaml", "--output-root", output_root, "--overwrite",
            "--no-progress",
        ],
        RUN_PROCESSES: [
            *dk, "run", process_workers_spec(output_root), "--output-root", output_root,
            "--overwrite", "--no-progress",
        ],
    }  # fmt: skip


def wall_times(argv: list[str], repeat: int) -> list[float]:
    """Seconds per run of ``argv`` (after one untimed run that warms the file cache).

    The runs may write bytecode caches, as an installed package has them (pip compiles the
    modules it installs; an editable install writes them on the untimed run): with
    ``PYTHONDONTWRITEBYTECODE`` set, every run would compile dkernel's modules again.
    """
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    times = []
    for i in range(repeat + 1):
        start = time.perf_counter()
        subprocess.run(argv, cwd=ROOT, env=env, check=True, capture_output=True)
        if i:
            times.append(time.perf_counter() - start)
    return times


def _has_test_extras() -> bool:
    from importlib.util import find_spec

    return find_spec("pytest") is not None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="timed runs per command")
    parser.add_argument("--limit", type=float, default=1.0, help="seconds a command may take")
    parser.add_argument(
        "--run-limit", type=float, default=3.0, help="seconds the wine job may take"
    )
    parser.add_argument(
        "--out", type=Path, default=ROOT / "benchmarks" / "results" / "cli_startup.md"
    )
    args = parser.parse_args()
    output_root = tempfile.mkdtemp(prefix="dkernel-bench-")
    slow = []
    rows = []
    try:
        print(f"{'command':62} {'median':>8} {'min':>8} {'max':>8}  (s, {args.repeat} runs)")
        for name, argv in commands(output_root).items():
            times = wall_times(argv, args.repeat)
            median = statistics.median(times)
            print(f"{name:62} {median:8.3f} {min(times):8.3f} {max(times):8.3f}", flush=True)
            rows.append(f"| `{name}` | {median:.3f} | {min(times):.3f} | {max(times):.3f} |")
            limit = args.run_limit if name == RUN else args.limit
            if name.startswith("dkernel") and name != RUN_PROCESSES and median > limit:
                slow.append(f"{name} ({median:.2f} s > {limit:g} s)")
    finally:
        shutil.rmtree(output_root, ignore_errors=True)
    load = os.getloadavg()[0]
    lines = [
        "# Wall time of the light commands and of the wine job (`benchmarks/bench_cli_startup.py`)",
        "",
        f"{args.repeat} timed runs each after one untimed, OMP_NUM_THREADS=1, bytecode caches "
        f"written; {os.cpu_count()} "
        f"CPUs, load average {load:.1f} at the end; the environment at {sys.prefix} "
        f"(dkernel {'with the test extras' if _has_test_extras() else 'alone, no extras'}). "
        f"Limits: {args.limit:g} s for the light commands, {args.run_limit:g} s for `{RUN}`.",
        "",
        "| command | median (s) | min (s) | max (s) |",
        "|---|---:|---:|---:|",
        *rows,
        "",
        f"Too slow: {', '.join(slow)}." if slow else "Every command within its limit.",
    ]
    args.out.write_text("\n".join(lines) + "\n")
    if slow:
        print(f"too slow: {', '.join(slow)}")
    return 1 if slow else 0


if __name__ == "__main__":
    sys.exit(main())
