"""The ``dkernel`` command: validate, run, submit, show, demo.

Exit codes: 0 success, 2 invalid input or spec, 1 failure while running.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from dkernel.errors import (
    DKernelError,
    InvalidInputError,
    ResourceLimitError,
    RuntimeConnectionError,
    SpecError,
    StoreError,
)

EXIT_OK, EXIT_FAILED, EXIT_INVALID = 0, 1, 2
INVALID = (SpecError, InvalidInputError, ResourceLimitError, StoreError, RuntimeConnectionError)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dkernel",
        description="Kernel methods for unsupervised learning at scale on Dask, "
        "with Zarr results stores.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("validate", help="validate a job spec (and its data) without running it")
    p.add_argument("job", type=Path)
    p.add_argument("--no-data", action="store_true", help="check the spec only, don't read data")

    def add_run_options(p: argparse.ArgumentParser) -> None:
        p.add_argument("job", type=Path)
        p.add_argument("--output", type=Path, help="results store path (overrides the spec)")
        p.add_argument("--overwrite", action="store_true", help="replace a complete store")
        p.add_argument("--no-progress", action="store_true", help="no progress bars")

    p = sub.add_parser("run", help="run a job on an embedded LocalCluster (or --scheduler)")
    add_run_options(p)
    p.add_argument("--scheduler", help="address of a running Dask scheduler")
    p.add_argument("--workers", type=int, help="number of workers of the embedded cluster")
    p.add_argument("--threads", type=int, help="threads per worker of the embedded cluster")

    p = sub.add_parser("submit", help="run a job on an existing Dask cluster")
    add_run_options(p)
    p.add_argument("--scheduler", required=True, help="address, e.g. tcp://10.0.0.5:8786")
    p.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for the scheduler")

    p = sub.add_parser("show", help="summarise a results store")
    p.add_argument("store", type=Path)
    p.add_argument("--json", action="store_true", help="machine-readable output")

    p = sub.add_parser("demo", help="run the demo job (writes results/demo.zarr)")
    p.add_argument("--output", type=Path, default=Path("results/demo.zarr"))
    p.add_argument("--no-progress", action="store_true")
    return parser


def _cmd_validate(args: argparse.Namespace) -> int:
    from dkernel.jobs.runner import prepare_job
    from dkernel.jobs.spec import load_spec

    spec = load_spec(args.job)
    if not args.no_data:
        spec, data = prepare_job(spec)
        print(
            f"{args.job}: valid ({spec.method} on {data.n_samples} × {data.n_features}, "
            f"output {spec.output})"
        )
    else:
        print(f"{args.job}: valid ({spec.method}, output {spec.output})")
    return EXIT_OK


def _cmd_run(args: argparse.Namespace, *, submit: bool = False) -> int:
    from dkernel.jobs.runner import run_job

    if submit:
        run_job(
            args.job,
            scheduler=args.scheduler,
            timeout=args.timeout,
            output=args.output,
            overwrite=args.overwrite,
            progress=not args.no_progress,
        )
        return EXIT_OK
    run_job(
        args.job,
        scheduler=args.scheduler,
        n_workers=args.workers,
        threads_per_worker=args.threads,
        output=args.output,
        overwrite=args.overwrite,
        progress=not args.no_progress,
    )
    return EXIT_OK


def _cmd_show(args: argparse.Namespace) -> int:
    from dkernel.storage import describe_store

    info = describe_store(args.store)
    if args.json:
        print(json.dumps(info, indent=2, default=str))
        return EXIT_OK
    attrs = info["attrs"]
    job = attrs.get("job", {})
    print(f"store:    {info['path']}")
    print(
        f"status:   {attrs.get('status')}"
        + (f" ({attrs.get('error')})" if attrs.get("error") else "")
    )
    print(f"job:      {job.get('name')} (method {job.get('method')}, seed {attrs.get('seed')})")
    print(f"created:  {attrs.get('created')}  finished: {attrs.get('finished', '-')}")
    print(f"git:      {attrs.get('git_revision') or '-'}")
    versions = attrs.get("versions", {})
    print("versions: " + ", ".join(f"{k} {v}" for k, v in versions.items()))
    timings = attrs.get("timings", {})
    if timings:
        print("timings:  " + ", ".join(f"{k} {v:.2f}s" for k, v in timings.items()))
    print("arrays:")
    for a in info["arrays"]:
        dims = ", ".join(f"{d}={s}" for d, s in zip(a["dims"], a["shape"], strict=True))
        chunks = f" chunks {tuple(a['chunks'])}" if a["chunks"] else ""
        print(f"  {a['group']}/{a['name']}: ({dims}) {a['dtype']}{chunks}")
    return EXIT_OK


def _cmd_demo(args: argparse.Namespace) -> int:
    from dkernel.jobs.demo import demo_spec
    from dkernel.jobs.runner import run_job

    run_job(demo_spec(), output=args.output, overwrite=True, progress=not args.no_progress)
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``dkernel`` command; returns the exit code."""
    args = _parser().parse_args(argv)
    handlers: dict[str, Any] = {
        "validate": _cmd_validate,
        "run": _cmd_run,
        "submit": lambda a: _cmd_run(a, submit=True),
        "show": _cmd_show,
        "demo": _cmd_demo,
    }
    try:
        return handlers[args.command](args)
    except INVALID as exc:
        print(f"dkernel: error: {exc}", file=sys.stderr)
        return EXIT_INVALID
    except DKernelError as exc:
        print(f"dkernel: failed: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        print("dkernel: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
