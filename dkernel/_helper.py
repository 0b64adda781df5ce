"""A helper process that runs picklable calls outside this interpreter.

A job's quick-look is drawn by matplotlib, whose import (0.5 s) and drawing (0.3 s) are
Python code holding the interpreter lock: on threads of the job's process they take turns
with the job's own Python work (the mean shift's iterations, the segments' polygons) instead
of running beside it. A process of its own runs them on a core the job leaves idle, and
imports matplotlib while the job computes (``dkernel run jobs/demo-landsat-mssc.yaml``, 10
interleaved runs on 2 cores: median wall time 5.50 s with a thread, 5.06 s with this process).

The helper is ``python -P -m dkernel._helper``, started with this interpreter and
``PYTHONPATH`` leading to this package, not by :mod:`multiprocessing`, whose spawned children
import the parent's ``__main__`` again (a user's script without a main guard would run twice).
``-P`` keeps the working directory off its ``sys.path``: a ``dkernel/`` package or a
``numpy.py`` there (planted in a shared folder such as ``/tmp``, or a user's own script) is
never imported; so are relative entries of ``PYTHONPATH`` dropped. Calls go one at a time
over its standard input and output as length-prefixed pickles; what the call prints goes to
its standard error. It leaves when its input closes (this process calling
:meth:`HelperProcess.close`, at exit, or dying), without the interpreter's teardown.

A helper that cannot be started, that dies, or that does not reply within the caller's
timeout (:meth:`HelperProcess.call_within`; it is then killed: a stopped helper cannot block
a job) raises :class:`HelperUnavailable`: callers then do the work themselves.
"""

from __future__ import annotations

import atexit
import os
import pickle
import struct
import subprocess
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import IO, Any

__all__ = ["HelperProcess", "HelperUnavailable", "shared_helper"]

_LENGTH = struct.Struct("<Q")
#: Seconds a caller waits for a reply by default (:meth:`HelperProcess.call_within`):
#: matplotlib's import and a quick-look take about a second; a helper that has not answered
#: in this time is stopped or stuck, and the caller does the work itself.
REPLY_TIMEOUT_S = 60.0


class HelperUnavailable(RuntimeError):
    """The helper process could not be started, or it is gone."""


def _write_message(stream: IO[bytes], payload: bytes) -> None:
    stream.write(_LENGTH.pack(len(payload)))
    stream.write(payload)
    stream.flush()


def _read_message(stream: IO[bytes]) -> bytes | None:
    """The next message, or None when the stream ends."""
    head = stream.read(_LENGTH.size)
    if len(head) < _LENGTH.size:
        return None
    (size,) = _LENGTH.unpack(head)
    payload = stream.read(size)
    return payload if len(payload) == size else None


class HelperProcess:
    """One helper process; calls run in it one at a time, in the order they are submitted.

    Raises
    ------
    HelperUnavailable
        The process could not be started.
    """

    def __init__(self) -> None:
        package_root = str(Path(__file__).resolve().parents[1])
        # absolute entries only: an empty or relative one would name the working directory
        inherited = os.environ.get("PYTHONPATH", "").split(os.pathsep)
        path = [package_root, *(p for p in inherited if p and os.path.isabs(p))]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
        try:
            self._process = subprocess.Popen(
                # -P: the working directory is not put first on sys.path (Python >= 3.11)
                [sys.executable, "-P", "-m", "dkernel._helper"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                env=env,
            )
        except (OSError, ValueError) as exc:
            raise HelperUnavailable(
                f"cannot start {sys.executable} -m dkernel._helper: {exc}"
            ) from exc
        # one thread waits for the replies (its reads release the interpreter lock)
        self._calls = ThreadPoolExecutor(1, thread_name_prefix="dkernel-helper")
        self._lock = threading.Lock()

    @property
    def alive(self) -> bool:
        """Whether the process is running."""
        return self._process.poll() is None

    def submit(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Future:
        """Run ``fn(*args, **kwargs)`` in the helper; its result (or its exception) comes
        back in the future, or :class:`HelperUnavailable` when the helper is gone.
        ``fn`` must be picklable by reference: a function of an importable module."""
        try:
            return self._calls.submit(self._call, fn, args, kwargs)
        except RuntimeError as exc:  # the executor is shut down
            raise HelperUnavailable("the helper process is closed") from exc

    def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """:meth:`submit` and wait for the result."""
        return self.submit(fn, *args, **kwargs).result()

    def call_within(
        self, timeout: float | None, fn: Callable[..., Any], *args: Any, **kwargs: Any
    ) -> Any:
        """:meth:`call`, waiting at most ``timeout`` seconds (None: no limit) for the reply,
        the calls queued before it included. A helper that has not replied by then (stopped,
        stuck) is killed and :class:`HelperUnavailable` raised: the caller does the work."""
        future = self.submit(fn, *args, **kwargs)
        try:
            return future.result(timeout=timeout)
        except FutureTimeout:
            pass
        # SIGKILL ends a stopped process too; the reading thread then sees the end of its
        # output and closes the helper
        try:
            self._process.kill()
        except OSError:
            pass
        try:
            future.result(timeout=10)
        except Exception:  # noqa: BLE001  (HelperUnavailable: the helper is gone)
            pass
        raise HelperUnavailable(f"the helper process did not reply within {timeout:g} s")

    def _call(self, fn: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
        request = pickle.dumps((fn, args, kwargs), protocol=pickle.HIGHEST_PROTOCOL)
        with self._lock:
            try:
                _write_message(self._process.stdin, request)  # type: ignore[arg-type]
                reply = _read_message(self._process.stdout)  # type: ignore[arg-type]
            except (OSError, ValueError) as exc:
                reply = None
                cause: BaseException | None = exc
            else:
                cause = None
        if reply is None:
            self.close()
            raise HelperUnavailable(
                f"the helper process ended (exit code {self._process.poll()})"
            ) from cause
        ok, value = pickle.loads(reply)
        if ok:
            return value
        raise value

    def close(self) -> None:
        """End the helper: its input closes and it exits; waits a moment for it."""
        # a call in flight holds the streams (closing one would wait for it): a helper that
        # does not finish it in a moment (stopped, stuck) is killed, which ends the call
        if not self._lock.acquire(timeout=5):
            self._process.kill()
            self._lock.acquire()
        try:
            for stream in (self._process.stdin, self._process.stdout):
                try:
                    stream.close()  # type: ignore[union-attr]
                except OSError:
                    pass
        finally:
            self._lock.release()
        try:
            self._process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._calls.shutdown(wait=False)


_shared: HelperProcess | None = None
_shared_lock = threading.Lock()


def shared_helper(*, start: bool = True) -> HelperProcess | None:
    """This process's helper, started on first use (again if it died) unless ``start`` is
    False; None when there is none or it cannot be started. Closed at exit."""
    global _shared
    with _shared_lock:
        if _shared is not None and _shared.alive:
            return _shared
        if not start:
            return None
        try:
            _shared = HelperProcess()
        except HelperUnavailable:
            _shared = None
            return None
        atexit.register(_shared.close)
        return _shared


def _serve() -> None:
    """The helper's loop: a request in, its reply out, until the input ends."""
    import signal

    # Ctrl-C reaches the whole process group: the job decides, and closes the input
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    requests = sys.stdin.buffer
    replies = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # prints go to stderr, not the replies
    while (request := _read_message(requests)) is not None:
        try:
            fn, args, kwargs = pickle.loads(request)
            reply = (True, fn(*args, **kwargs))
        except BaseException as exc:  # noqa: BLE001  (the caller's error, raised there)
            reply = (False, exc)
        try:
            payload = pickle.dumps(reply, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:  # noqa: BLE001  (an unpicklable result or exception)
            error = RuntimeError(f"the helper's reply cannot be pickled: {exc!r} ({reply[1]!r})")
            payload = pickle.dumps((False, error), protocol=pickle.HIGHEST_PROTOCOL)
        _write_message(replies, payload)
    os._exit(0)  # nothing left to flush; the interpreter's teardown would take 0.1-0.3 s


if __name__ == "__main__":
    _serve()
