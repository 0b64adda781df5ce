"""The ``dkernel`` command: validate, run, submit, show, methods, schema, demo: its parser
and its commands. ``dkernel show``'s rendering is :mod:`dkernel.cli_show`, the process
handling (log lines, signals, exit codes, the exit) :mod:`dkernel.cli_process`.

Exit codes: 0 success, 2 invalid input or spec, 1 failure while running.
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import math
import os
import sys
from pathlib import Path
from typing import Any

from dkernel.cli_process import (  # noqa: F401  (re-exported: the process handling)
    EXIT_FAILED,
    EXIT_INVALID,
    EXIT_OK,
    INVALID,
    LOG_LEVELS,
    JsonFormatter,
    Terminated,
    TextFormatter,
    _resume_gc,
    exit_code,
    run_script,
    setup_logging,
    sigterm_as_interrupt,
)
from dkernel.cli_show import (  # noqa: F401  (re-exported: dkernel show's rendering)
    SHOW_ENTRIES_MAX,
    SHOW_FIELD_MAX,
    _cmd_show,
    _escape,
    _safe,
    _shown,
)
from dkernel.errors import InvalidInputError, SpecError

logger = logging.getLogger("dkernel.cli")  # also when run as python -m dkernel.cli


@functools.cache
def _parser() -> argparse.ArgumentParser:
    """The ``dkernel`` parser, built once per process (``main`` runs once from the console
    script, many times in a process that calls it, as the test suite does)."""
    from dkernel import __version__

    parser = argparse.ArgumentParser(
        prog="dkernel",
        description="Kernel methods for unsupervised learning at scale on Dask, "
        "with Zarr results stores.",
    )
    parser.add_argument("--version", action="version", version=f"dkernel {__version__}")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--log-level", choices=LOG_LEVELS, default="info", help="log verbosity (default info)"
    )
    common.add_argument(
        "--log-json", action="store_true", help="log one JSON object per line (no progress bars)"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser(
        "validate", parents=[common], help="validate a job spec (and its data) without running it"
    )
    p.add_argument("job", type=Path, help="the job spec (YAML), e.g. jobs/wine-rbf-kpca.yaml")
    p.add_argument("--no-data", action="store_true", help="check the spec only, don't read data")
    p.add_argument(
        "--output-root", help="directory (or s3://bucket/prefix) outputs are confined to"
    )

    def add_run_options(p: argparse.ArgumentParser, *, several: bool = False) -> None:
        if several:
            p.add_argument(
                "job",
                type=Path,
                nargs="+",
                help="the job spec (YAML), e.g. jobs/wine-rbf-kpca.yaml; several run in turn, "
                "small ones in process, the others on one embedded cluster started once "
                "(the first that fails stops the rest)",
            )
        else:
            p.add_argument(
                "job", type=Path, help="the job spec (YAML), e.g. jobs/wine-rbf-kpca.yaml"
            )
        p.add_argument("--output", help="results store path or URL, s3://... (overrides the spec)")
        p.add_argument(
            "--output-root",
            help="directory (or URL, s3://bucket/prefix) the spec's output is confined to "
            "(default $DKERNEL_OUTPUT_ROOT, else the current directory and the spec's "
            "directory)",
        )
        mode = p.add_mutually_exclusive_group()
        mode.add_argument("--overwrite", action="store_true", help="replace a complete store")
        mode.add_argument(
            "--resume",
            action="store_true",
            help="continue an interrupted store of the same job (finished groups and chunks "
            "are kept); starts fresh when there is nothing to resume",
        )
        p.add_argument("--no-progress", action="store_true", help="no progress bars")

    p = sub.add_parser(
        "run", parents=[common], help="run jobs on an embedded LocalCluster (or --scheduler)"
    )
    add_run_options(p, several=True)
    p.add_argument("--scheduler", help="address of a running Dask scheduler")
    p.add_argument(
        "--workers",
        metavar="N",
        help="number of workers of the embedded cluster (workers × threads at most 4 per CPU core)",
    )
    p.add_argument("--threads", metavar="N", help="threads per worker of the embedded cluster")

    p = sub.add_parser("submit", parents=[common], help="run a job on an existing Dask cluster")
    add_run_options(p)
    p.add_argument("--scheduler", required=True, help="address, e.g. tcp://10.0.0.5:8786")
    p.add_argument(
        "--timeout",
        metavar="SECONDS",
        default="10",
        help="seconds to wait for the scheduler, in (0, 3600] (default 10)",
    )
    p.add_argument(
        "--security-config",
        help="YAML with tls_ca_file, tls_client_cert, tls_client_key (see deploy/tls/README.md)",
    )
    p.add_argument("--tls-ca-file", help="CA certificate (PEM) for a tls:// scheduler")
    p.add_argument("--tls-cert", help="client certificate (PEM)")
    p.add_argument("--tls-key", help="client private key (PEM)")

    p = sub.add_parser("show", parents=[common], help="summarise a results store")
    p.add_argument("store", help="a results store (path or URL), e.g. results/wine-rbf-kpca.zarr")
    p.add_argument("--json", action="store_true", help="machine-readable output")

    p = sub.add_parser(
        "methods", parents=[common], help="list the methods and readers a job spec can name"
    )
    p.add_argument("name", nargs="?", help="show one method's or reader's parameters")

    p = sub.add_parser(
        "schema",
        parents=[common],
        help="print the JSON Schema (draft 2020-12) of job specs, for editor completion",
    )
    p.add_argument("--output", type=Path, help="write the schema to this file instead")

    p = sub.add_parser(
        "cluster-config",
        parents=[common],
        help="print the Dask settings of dkernel's embedded cluster (work stealing off, worker "
        "saturation 1, the workers' malloc settings) for a scheduler and workers of your own: "
        "save them in /etc/dask/ or ~/.config/dask/ where they run",
    )
    p.add_argument("--output", type=Path, help="write the settings to this file instead")

    p = sub.add_parser(
        "demo",
        parents=[common],
        help="run the demo: MSSC on a Landsat scene (writes results/demo-landsat-mssc.zarr, "
        "a label GeoTIFF and a quick-look PNG)",
    )
    p.add_argument(
        "--output",
        type=Path,
        default=Path("results/demo-landsat-mssc.zarr"),
        help="results store path (default results/demo-landsat-mssc.zarr)",
    )
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="replace a store of another job at --output (the demo's own is always replaced)",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bars")

    p = sub.add_parser(
        "data",
        parents=[common],
        help="list or download (with checksums) the public datasets the example jobs read",
    )
    actions = p.add_subparsers(
        dest="data_command", required=True, metavar="ACTION", help="list or fetch"
    )
    actions.add_parser("list", help="the datasets: name, size, licence, jobs that read them")
    f = actions.add_parser("fetch", help="download a dataset, verified against its SHA-256")
    f.add_argument("name", help="a dataset of `dkernel data list`, e.g. frey")
    f.add_argument(
        "--to",
        type=Path,
        help="the data folder (default $DKERNEL_DATA, else ./dkernel-data); jobs read it "
        "through DKERNEL_DATA",
    )
    f.add_argument(
        "--from",
        dest="from_folder",
        type=Path,
        metavar="DIR",
        help="copy the files from DIR instead of downloading them (a checkout of the source "
        "repository, another data folder): each is found by its size and SHA-256",
    )
    return parser


def _cmd_validate(args: argparse.Namespace) -> int:
    # the stages before the lease (dkernel.jobs.stages.VALIDATE): nothing is written and no
    # cluster starts; light imports only, without Dask, scikit-learn or SciPy
    # (tests/test_cli_imports.py). An existing store is not refused here: `run` says whether
    # it may be replaced (--overwrite, --resume).
    from dkernel.jobs.spec import OutputPolicy
    from dkernel.jobs.stages import VALIDATE, Plan, RunOptions, run_stages

    options = RunOptions(
        output_policy=OutputPolicy.default(args.job, args.output_root),
        with_data=not args.no_data,
        writes=False,
    )
    plan = run_stages(Plan(args.job, options), VALIDATE)
    spec, data = plan.job, plan.data
    if data is not None:
        shape = f"{spec.method} on {data.n_samples} × {data.n_features}"
        print(f"{args.job}: valid ({shape}, output {plan.output})")
    else:
        print(f"{args.job}: valid ({spec.method}, output {plan.output})")
    return EXIT_OK


def _cmd_run(args: argparse.Namespace, *, submit: bool = False) -> int:
    # the command line's own values first: refused before the job is read
    if submit:
        cluster: dict[str, Any] = {"timeout": _timeout_option(args.timeout)}
    else:
        n_workers, threads = _cluster_options(args)
        cluster = {"n_workers": n_workers, "threads_per_worker": threads}
    jobs = args.job if isinstance(args.job, list) else [args.job]
    if args.output is not None and len(jobs) > 1:
        raise SpecError(
            "names the store of one job; with several jobs each writes its spec's output "
            "(confine them with --output-root).",
            "--output",
        )
    from dkernel.jobs.spec import OutputPolicy, load_spec

    # each spec is read once, here; the runner takes it as it is
    specs = [load_spec(job) for job in jobs]
    _prefetch_map_writers(specs[0])
    run_job = _import_runner()

    kwargs: dict[str, Any] = dict(
        scheduler=args.scheduler,
        output=args.output,
        overwrite=args.overwrite,
        resume=args.resume,
        progress=not (args.no_progress or args.log_json),
        **cluster,
    )
    if submit:
        from dkernel.runtime import load_security

        kwargs["security"] = load_security(
            config=args.security_config,
            ca_file=args.tls_ca_file,
            cert=args.tls_cert,
            key=args.tls_key,
        )
    if len(jobs) == 1:
        run_job(specs[0], output_policy=OutputPolicy.default(jobs[0], args.output_root), **kwargs)
        return EXIT_OK
    _run_jobs(jobs, specs, args, kwargs)
    return EXIT_OK


def _run_jobs(
    jobs: list[Path], specs: list[Any], args: argparse.Namespace, kwargs: dict[str, Any]
) -> None:
    """Several jobs in turn: every spec and output checked first; then a small job runs in
    process, and the jobs that need process workers share one embedded cluster, started by the
    first of them (its dashboard link logged), unless ``--scheduler`` names one."""
    from dkernel.jobs.runner import run_job
    from dkernel.jobs.spec import OutputPolicy

    outputs: dict[str, Path] = {}
    for job, spec in zip(jobs, specs, strict=True):
        output = str(OutputPolicy.default(job, args.output_root).confine(spec.output))
        if output in outputs:
            raise SpecError(
                f"{job} and {outputs[output]} write the same store {output}; give each job an "
                "output of its own.",
                "output",
            )
        outputs[output] = job
    from dkernel.runtime.connect import SharedCluster

    # a small job runs in process; the first that needs process workers starts the cluster
    # the later ones share (none with --scheduler: every job goes there)
    with SharedCluster(kwargs["n_workers"], kwargs["threads_per_worker"]) as cluster:
        for job, spec in zip(jobs, specs, strict=True):
            run_job(
                spec,
                output_policy=OutputPolicy.default(job, args.output_root),
                **{**kwargs, "cluster": cluster},
            )


def _cluster_options(args: argparse.Namespace) -> tuple[int | None, int | None]:
    """``--workers`` and ``--threads`` as integers, checked against this machine before the
    job is read (``dkernel.runtime.connect.check_cluster_size`` checks them again with the
    spec's ``runtime`` and memory limit before the cluster starts)."""
    from dkernel.runtime.connect import MAX_THREADS_PER_CORE, check_cluster_size

    cores = os.cpu_count() or 1
    most = MAX_THREADS_PER_CORE * cores
    values = []
    for text, option in ((args.workers, "--workers"), (args.threads, "--threads")):
        value = _int_or_none(text)
        if text is not None and (value is None or not 1 <= value <= most):
            raise SpecError(
                f"must be an integer in [1, {most}] ({MAX_THREADS_PER_CORE} threads per CPU core, "
                f"{cores} cores); got {_shown(text)}.",
                option,
            )
        values.append(value)
    n_workers, threads = values
    if n_workers is not None and threads is not None:
        check_cluster_size(n_workers, threads, None, cpu_count=cores)
    return n_workers, threads


def _int_or_none(text: Any) -> int | None:
    if text is None:
        return None
    try:
        return int(str(text).strip(), 10)
    except ValueError:
        return None


def _timeout_option(text: Any) -> float:
    """``--timeout`` as seconds: a finite number in (0, MAX_TIMEOUT]."""
    from dkernel.runtime.connect import MAX_TIMEOUT

    try:
        value = float(text)
    except (TypeError, ValueError):
        value = math.nan
    if not (math.isfinite(value) and 0 < value <= MAX_TIMEOUT):
        raise SpecError(
            f"must be a number of seconds in (0, {MAX_TIMEOUT:g}]; got {_shown(text)}.",
            "--timeout",
        )
    return value


def _cmd_methods(args: argparse.Namespace) -> int:
    from dkernel.io.registry import READERS
    from dkernel.jobs.registry import METHODS
    from dkernel.schema.params import REQUIRED, did_you_mean

    if args.name:
        entry = METHODS.get(args.name) or READERS.get(args.name)
        if entry is None:
            names = METHODS.names() + READERS.names()
            raise SpecError(
                f"no method or reader named {args.name!r}.{did_you_mean(args.name, names)} "
                f"Valid names: {', '.join(names)}."
            )
        kind = "method" if args.name in METHODS else "reader"
        print(f"{kind} {entry.name}: {entry.description}")
        for param in entry.params:
            default = "required" if param.default is REQUIRED else f"default {param.default!r}"
            doc = f"  {param.doc}" if param.doc else ""
            print(f"  {param.name}: {param.describe()} ({default}){doc}")
        return EXIT_OK
    print("methods (method: NAME in a job spec):")
    for name, method in sorted(METHODS.items()):
        print(f"  {name:22} {method.description}")
    print("readers (data: {reader: NAME, ...}):")
    for name, reader in sorted(READERS.items()):
        print(f"  {name:22} {reader.description}")
    print("`dkernel methods NAME` lists a method's or reader's parameters.")
    return EXIT_OK


def _cmd_schema(args: argparse.Namespace) -> int:
    from dkernel.jobs.spec import job_spec_schema

    text = json.dumps(job_spec_schema(), indent=2, ensure_ascii=False) + "\n"
    return _print_or_write(text, args.output, "the schema")


def _cmd_cluster_config(args: argparse.Namespace) -> int:
    from dkernel.runtime.connect import cluster_config_yaml

    return _print_or_write(cluster_config_yaml(), args.output, "the cluster settings")


def _print_or_write(text: str, output: Path | None, what: str) -> int:
    if output is None:
        sys.stdout.write(text)
        return EXIT_OK
    try:
        output.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise InvalidInputError(f"cannot write {what} to {output}: {exc}.") from exc
    print(f"wrote {output}", file=sys.stderr)
    return EXIT_OK


def _cmd_data(args: argparse.Namespace) -> int:
    from dkernel._budget import format_size
    from dkernel.data.registry import DATASETS, fetch

    if args.data_command == "list":
        for d in DATASETS.values():
            print(f"{d.name:10} {format_size(d.size):>10}  {d.title}")
            print(f"{'':10} {'':>10}  licence: {d.licence}; used by {', '.join(d.used_by)}")
        return EXIT_OK
    to = args.to or Path(os.environ.get("DKERNEL_DATA") or "dkernel-data")
    fetch(
        args.name,
        to,
        from_folder=args.from_folder,
        report=lambda line: print(line, file=sys.stderr, flush=True),
    )
    if Path(os.environ.get("DKERNEL_DATA") or "").expanduser().resolve() != to.resolve():
        print(f"now: export DKERNEL_DATA={to.resolve()}", file=sys.stderr)
    return EXIT_OK


def _cmd_demo(args: argparse.Namespace) -> int:
    from dkernel.jobs.demo import demo_may_replace, demo_spec

    spec = demo_spec()
    _prefetch_map_writers(spec)
    run_job = _import_runner()
    run_job(
        spec,
        output=args.output,
        overwrite=demo_may_replace(args.output, overwrite=args.overwrite),
        progress=not (args.no_progress or args.log_json),
    )
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``dkernel`` command; returns the exit code."""
    args = _parser().parse_args(argv)
    setup_logging(args.log_level, args.log_json)
    with sigterm_as_interrupt(args.command in ("run", "submit", "demo")):
        return _dispatch(args)


def script() -> None:
    """The ``dkernel`` console script: :func:`main`, then exit without the interpreter's
    teardown (:func:`dkernel.cli_process.run_script`)."""
    run_script(main)


def _import_runner() -> Any:
    """``dkernel.jobs.runner.run_job``; the garbage collector resumes once it is imported."""
    from dkernel.jobs.runner import run_job

    _resume_gc()
    return run_job


def _prefetch_map_writers(spec: Any) -> None:
    """When the job (a validated spec) draws a quick-look, start the helper process that
    draws it now, so that it imports the plotting library while this process imports the
    job's (:func:`dkernel.io.quicklook.prefetch_plotting`; 0.6 s of CPU on a core otherwise
    idle)."""
    from dkernel.io.registry import get_reader

    if bool(spec.params.get("write_png")) and get_reader(spec.reader).raster:
        from dkernel.io.quicklook import prefetch_plotting

        prefetch_plotting()


def _dispatch(args: argparse.Namespace) -> int:
    if args.command not in ("run", "submit", "demo"):  # these resume it after their imports
        _resume_gc()
    handlers: dict[str, Any] = {
        "validate": _cmd_validate,
        "run": _cmd_run,
        "submit": lambda a: _cmd_run(a, submit=True),
        "show": _cmd_show,
        "methods": _cmd_methods,
        "schema": _cmd_schema,
        "cluster-config": _cmd_cluster_config,
        "demo": _cmd_demo,
        "data": _cmd_data,
    }
    return exit_code(args, handlers[args.command])


if __name__ == "__main__":  # pragma: no cover
    script()
