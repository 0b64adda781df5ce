"""How the ``dkernel`` command lives as a process: its log lines on stderr, SIGTERM taken as
Ctrl-C, the garbage collector paused for the imports, an error turned into one line and an
exit code, and the exit without the interpreter's teardown.

The parser and the commands are :mod:`dkernel.cli` (which re-exports these names), ``dkernel
show``'s rendering :mod:`dkernel.cli_show`.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from dkernel.cli_show import _escape
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


# ------------------------------------------------------------------------------------------
# log lines
# ------------------------------------------------------------------------------------------


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
    (``[dkernel] warning: ...``). Unprintable characters but newlines are escaped: a job name
    or path may hold terminal escape codes."""

    def format(self, record: logging.LogRecord) -> str:
        text = _escape(super().format(record), keep="\n")
        if record.levelno == logging.INFO:
            return f"[dkernel] {text}"
        return f"[dkernel] {record.levelname.lower()}: {text}"


def setup_logging(level: str = "info", json_lines: bool = False) -> logging.Logger:
    """Configure the ``dkernel`` logger (stderr) for the command line.

    The modules log to ``logging.getLogger(__name__)``, children of ``dkernel``; this adds one
    handler to ``dkernel`` (replacing one added by an earlier call) that writes plain
    ``[dkernel] ...`` lines, or one JSON object per line with ``json_lines``; Python warnings
    become lines of the ``dkernel.warnings`` logger (:func:`log_warning`).

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
    warnings.showwarning = log_warning
    return logger


def log_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: Any = None,
    line: str | None = None,
) -> None:
    """A Python warning as a line of the ``dkernel.warnings`` logger (``warnings.showwarning``
    under the command line): with ``--log-json`` a JSON object like every other line, where
    the interpreter wrote two lines of text naming the ``dkernel`` script as its source."""
    logging.getLogger("dkernel.warnings").warning(f"{category.__name__}: {message}")


# ------------------------------------------------------------------------------------------
# signals and the garbage collector
# ------------------------------------------------------------------------------------------


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


@contextmanager
def sigterm_as_interrupt(active: bool) -> Iterator[None]:
    """While the block runs (``active``: a command that runs a job), SIGTERM raises
    :class:`Terminated`; the previous handler is put back after it."""
    previous = _install_sigterm() if active else None
    try:
        yield
    finally:
        if previous is not None:
            import signal

            signal.signal(signal.SIGTERM, previous)


#: Whether :func:`script` paused the cyclic garbage collector for the imports (see
#: :func:`_resume_gc`).
_GC_PAUSED = False


def _resume_gc() -> None:
    """Turn the cyclic garbage collector back on after the imports a command needs, with what
    they made frozen out of its collections (``gc.freeze``) when :func:`script` paused it.

    Imports make objects, not garbage, yet set off collections that go over every object made
    so far: the imports of ``dkernel run`` took 2.7 instead of 3.3 CPU s with it paused. Once
    frozen, the modules' objects are not gone over again by the collections of the job (the
    label map's segments: 0.33 instead of 0.45-0.53 s)."""
    global _GC_PAUSED
    if _GC_PAUSED:
        import gc

        _GC_PAUSED = False
        gc.freeze()
        gc.enable()


# ------------------------------------------------------------------------------------------
# errors and exit codes
# ------------------------------------------------------------------------------------------


def exit_code(args: argparse.Namespace, command: Callable[[argparse.Namespace], int]) -> int:
    """Run ``command(args)``; an error is one line on stderr and an exit code: 2 invalid
    input, 1 a failure, 143 SIGTERM, 130 Ctrl-C (a traceback only with ``--log-level
    debug``)."""
    try:
        code = command(args)
        sys.stdout.flush()  # inside the try: a closed pipe is reported here, not at exit
        return code
    except INVALID as exc:
        _report(args, "error", f"dkernel: error: {exc}")
        return EXIT_INVALID
    except DKernelError as exc:
        _report(args, "error", f"dkernel: failed: {exc}")
        return EXIT_FAILED
    except Terminated as exc:
        # the runner notes what became of the store; before it exists there is none to mark
        notes = getattr(exc, "__notes__", None) or ["no results store was written yet"]
        _report(args, "error", f"dkernel: terminated (SIGTERM); {notes[-1]}")
        return 128 + 15
    except KeyboardInterrupt:
        _report(args, "error", "dkernel: interrupted")
        return 130
    except BrokenPipeError:
        # the reader of our output went away (`dkernel show STORE | head`): not an error;
        # point stdout at devnull so the interpreter's final flush stays quiet
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
    else:  # a message may quote a path or value holding terminal escapes: never raw
        print(_escape(message, keep="\n"), file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------------
# the exit
# ------------------------------------------------------------------------------------------


def run_script(main: Callable[[], int]) -> None:
    """The ``dkernel`` console script (:func:`dkernel.cli.script`): ``main``, then exit
    without the interpreter's teardown.

    Once a command has returned, everything it wrote is closed and flushed; the exit handlers
    (``atexit``: logging, temporary folders, Dask and Zarr threads) still run, but the
    module-by-module teardown that follows them is skipped: after a job it took 0.3-0.7 s of
    the 3.6 s of ``dkernel run jobs/wine-rbf-kpca.yaml``. ``python -m dkernel.cli`` runs it too;
    tests in this process call :func:`dkernel.cli.main`.
    """
    import atexit
    import gc
    import threading

    global _GC_PAUSED
    gc.disable()  # until the command's imports are done (_resume_gc)
    _GC_PAUSED = True
    try:
        code = main()
    except SystemExit as exc:  # argparse: --help (0) or a usage error (2)
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if code == 1:
            print(exc.code, file=sys.stderr)
    if code not in (130, 128 + 15):
        # what the interpreter does first at exit: join the threads that are not daemons
        threading._shutdown()  # type: ignore[attr-defined]
        atexit._run_exitfuncs()
    else:
        # after Ctrl-C or SIGTERM a task thread may still wait on a stalled object store (a
        # call gives up after minutes; the store's status is written already): not joined,
        # and the exit handlers (which join Dask's thread pool) get a few seconds
        handlers = threading.Thread(target=atexit._run_exitfuncs, daemon=True)
        handlers.start()
        handlers.join(5.0)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (BrokenPipeError, ValueError):
            pass
    os._exit(code)
