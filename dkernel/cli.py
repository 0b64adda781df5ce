"""The ``dkernel`` command: validate, run, submit, show, methods, schema, demo.

Exit codes: 0 success, 2 invalid input or spec, 1 failure while running.
"""

from __future__ import annotations

import argparse
import json
import logging
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


LOG_LEVELS = ("debug", "info", "warning", "error")


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message (and the exception, if any)."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S%z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry)


class TextFormatter(logging.Formatter):
    """``[dkernel] message`` per line; a level other than info is named after the prefix
    (``[dkernel] warning: ...``)."""

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        if record.levelno == logging.INFO:
            return f"[dkernel] {text}"
        return f"[dkernel] {record.levelname.lower()}: {text}"


def setup_logging(level: str = "info", json_lines: bool = False) -> logging.Logger:
    """Configure the ``dkernel`` logger (stderr) for the command line.

    The modules log to ``logging.getLogger(__name__)``, children of ``dkernel``; this adds one
    handler to ``dkernel`` (replacing one added by an earlier call) that writes plain
    ``[dkernel] ...`` lines, or one JSON object per line with ``json_lines``.

    Parameters
    ----------
    level : {'debug', 'info', 'warning', 'error'}
        The lowest level shown.
    json_lines : bool
        Write :class:`JsonFormatter` lines instead of :class:`TextFormatter` ones.

    Returns
    -------
    logging.Logger
        The ``dkernel`` logger.
    """
    logger = logging.getLogger("dkernel")
    for handler in list(logger.handlers):
        if getattr(handler, "_dkernel_cli", False):
            logger.removeHandler(handler)
    handler = logging.StreamHandler(sys.stderr)
    handler._dkernel_cli = True  # type: ignore[attr-defined]
    handler.setFormatter(JsonFormatter() if json_lines else TextFormatter())
    logger.addHandler(handler)
    logger.setLevel(level.upper())
    logger.propagate = False
    return logger


def _parser() -> argparse.ArgumentParser:
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
    p.add_argument("--output-root", type=Path, help="directory outputs are confined to")

    def add_run_options(p: argparse.ArgumentParser) -> None:
        p.add_argument("job", type=Path, help="the job spec (YAML), e.g. jobs/wine-rbf-kpca.yaml")
        p.add_argument("--output", type=Path, help="results store path (overrides the spec)")
        p.add_argument(
            "--output-root",
            type=Path,
            help="directory the spec's output is confined to (default $DKERNEL_OUTPUT_ROOT, "
            "else the current directory and the spec's directory)",
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
        "run", parents=[common], help="run a job on an embedded LocalCluster (or --scheduler)"
    )
    add_run_options(p)
    p.add_argument("--scheduler", help="address of a running Dask scheduler")
    p.add_argument("--workers", type=int, help="number of workers of the embedded cluster")
    p.add_argument("--threads", type=int, help="threads per worker of the embedded cluster")

    p = sub.add_parser("submit", parents=[common], help="run a job on an existing Dask cluster")
    add_run_options(p)
    p.add_argument("--scheduler", required=True, help="address, e.g. tcp://10.0.0.5:8786")
    p.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for the scheduler")
    p.add_argument(
        "--security-config",
        help="YAML with tls_ca_file, tls_client_cert, tls_client_key (see deploy/tls/README.md)",
    )
    p.add_argument("--tls-ca-file", help="CA certificate (PEM) for a tls:// scheduler")
    p.add_argument("--tls-cert", help="client certificate (PEM)")
    p.add_argument("--tls-key", help="client private key (PEM)")

    p = sub.add_parser("show", parents=[common], help="summarise a results store")
    p.add_argument("store", type=Path, help="a results store, e.g. results/wine-rbf-kpca.zarr")
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
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    return parser


def _cmd_validate(args: argparse.Namespace) -> int:
    from dkernel.jobs.runner import prepare_job
    from dkernel.jobs.spec import OutputPolicy, load_spec

    spec = load_spec(args.job)
    output = OutputPolicy.default(args.job, args.output_root).confine(spec.output)
    from dkernel.storage.store import check_writable

    check_writable(output)
    if not args.no_data:
        spec, data = prepare_job(spec)
        print(
            f"{args.job}: valid ({spec.method} on {data.n_samples} × {data.n_features}, "
            f"output {output})"
        )
    else:
        print(f"{args.job}: valid ({spec.method}, output {output})")
    return EXIT_OK


def _cmd_run(args: argparse.Namespace, *, submit: bool = False) -> int:
    from dkernel.jobs.runner import run_job
    from dkernel.jobs.spec import OutputPolicy

    kwargs: dict[str, Any] = dict(
        scheduler=args.scheduler,
        output=args.output,
        overwrite=args.overwrite,
        resume=args.resume,
        progress=not (args.no_progress or args.log_json),
        output_policy=OutputPolicy.default(args.job, args.output_root),
    )
    if submit:
        from dkernel.runtime import load_security

        kwargs["timeout"] = args.timeout
        kwargs["security"] = load_security(
            config=args.security_config,
            ca_file=args.tls_ca_file,
            cert=args.tls_cert,
            key=args.tls_key,
        )
    else:
        kwargs["n_workers"] = args.workers
        kwargs["threads_per_worker"] = args.threads
    run_job(args.job, **kwargs)
    return EXIT_OK


def _fmt_bytes(n: Any) -> str:
    from dkernel._budget import format_size

    return format_size(float(n)) if n is not None else "-"


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
        + (f", resumed {attrs['resumes']}×" if attrs.get("resumes") else "")
    )
    print(f"job:      {job.get('name')} (method {job.get('method')}, seed {attrs.get('seed')})")
    print(f"created:  {attrs.get('created')}  finished: {attrs.get('finished', '-')}")
    print(f"git:      {attrs.get('git_revision') or '-'}")
    versions = attrs.get("versions", {})
    print("versions: " + ", ".join(f"{k} {v}" for k, v in versions.items()))
    runtime = attrs.get("runtime") or {}
    if runtime:
        print(
            f"cluster:  {runtime.get('scheduler')}, {runtime.get('n_workers')} workers, "
            f"{runtime.get('n_threads')} threads"
        )
    timings = attrs.get("timings", {})
    if timings:
        print("timings:  " + ", ".join(f"{k} {v:.2f}s" for k, v in timings.items()))
    resources = attrs.get("resources") or {}
    if resources:
        print(
            f"tasks:    {resources.get('n_tasks')} on {resources.get('n_workers')} workers; "
            f"peak worker memory {_fmt_bytes(resources.get('peak_worker_memory'))}"
        )
        for name, w in (resources.get("workers") or {}).items():
            print(
                f"  worker {name}: {w.get('tasks')} tasks, peak {_fmt_bytes(w.get('peak_memory'))}"
            )
    print("arrays:")
    for a in info["arrays"]:
        dims = ", ".join(f"{d}={s}" for d, s in zip(a["dims"], a["shape"], strict=True))
        chunks = f" chunks {tuple(a['chunks'])}" if a["chunks"] else ""
        values = a.get("values")
        if values is not None:
            shown = f"{values:.6g}" if isinstance(values, float) else str(values)
            print(f"  {a['group']}/{a['name']} = {shown}  ({dims}) {a['dtype']}")
        else:
            print(f"  {a['group']}/{a['name']}: ({dims}) {a['dtype']}{chunks}")
    return EXIT_OK


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
    if args.output is None:
        sys.stdout.write(text)
        return EXIT_OK
    try:
        args.output.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise InvalidInputError(f"cannot write the schema to {args.output}: {exc}.") from exc
    print(f"wrote {args.output}", file=sys.stderr)
    return EXIT_OK


def _cmd_demo(args: argparse.Namespace) -> int:
    from dkernel.jobs.demo import demo_spec
    from dkernel.jobs.runner import run_job

    run_job(
        demo_spec(),
        output=args.output,
        overwrite=True,
        progress=not (args.no_progress or args.log_json),
    )
    return EXIT_OK


class Terminated(KeyboardInterrupt):
    """SIGTERM (``timeout``, a batch system, Kubernetes): handled like Ctrl-C, so the job's
    store is marked ``failed`` and ``--resume`` continues it."""


def _on_sigterm(signum: int, frame: Any) -> None:
    raise Terminated()


def _install_sigterm() -> Any:
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return None
    try:
        return signal.signal(signal.SIGTERM, _on_sigterm)
    except (ValueError, OSError):  # pragma: no cover
        return None


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``dkernel`` command; returns the exit code."""
    args = _parser().parse_args(argv)
    setup_logging(args.log_level, args.log_json)
    previous = _install_sigterm() if args.command in ("run", "submit", "demo") else None
    try:
        return _dispatch(args)
    finally:
        if previous is not None:
            import signal

            signal.signal(signal.SIGTERM, previous)


def _dispatch(args: argparse.Namespace) -> int:
    handlers: dict[str, Any] = {
        "validate": _cmd_validate,
        "run": _cmd_run,
        "submit": lambda a: _cmd_run(a, submit=True),
        "show": _cmd_show,
        "methods": _cmd_methods,
        "schema": _cmd_schema,
        "demo": _cmd_demo,
    }
    try:
        code = handlers[args.command](args)
        sys.stdout.flush()  # inside the try: a closed pipe is reported here, not at exit
        return code
    except INVALID as exc:
        _report(args, "error", f"dkernel: error: {exc}")
        return EXIT_INVALID
    except DKernelError as exc:
        _report(args, "error", f"dkernel: failed: {exc}")
        return EXIT_FAILED
    except Terminated:
        _report(args, "error", "dkernel: terminated (SIGTERM); the store is marked failed")
        return 128 + 15
    except KeyboardInterrupt:
        _report(args, "error", "dkernel: interrupted")
        return 130
    except BrokenPipeError:
        # the reader of our output went away (`dkernel show STORE | head`): not an error;
        # point stdout at devnull so the interpreter's final flush stays quiet
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except Exception as exc:  # noqa: BLE001  (an unexpected error: no traceback unless debug)
        if args.log_level == "debug":
            raise
        from dkernel.storage.store import relative_paths

        text = relative_paths(f"{type(exc).__name__}: {exc}")
        if len(text) > 500:
            text = text[:500] + "…"
        _report(
            args,
            "error",
            f"dkernel: failed: unexpected error {text}. Run again with --log-level debug "
            "for the traceback, and please report it.",
        )
        return EXIT_FAILED


def _report(args: argparse.Namespace, level: str, message: str) -> None:
    """Errors always reach stderr: as a JSON line with --log-json, as plain text otherwise."""
    if args.log_json:
        entry = {"level": level, "logger": "dkernel", "message": message}
        print(json.dumps(entry), file=sys.stderr, flush=True)
    else:
        print(message, file=sys.stderr, flush=True)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
