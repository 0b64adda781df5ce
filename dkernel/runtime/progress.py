"""Progress of Dask work for people: a bar on a terminal, plain lines in a log, a widget in a
notebook (a text bar there when ipywidgets is not installed), nothing when switched off.

A progress bar redraws itself with carriage returns and ANSI erase codes, which turn a log file
into noise; so the bar is drawn only when stderr is a terminal (or in Jupyter), and otherwise a
plain line is written every ``interval`` seconds and once at the end.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Iterator, Sequence
from typing import Any

#: Seconds between the plain progress lines written when stderr is not a terminal.
LINE_INTERVAL = 10.0
#: Shortest time between two redraws of the text bar on a terminal (seconds).
BAR_INTERVAL = 0.2
#: Width of the text bar, in characters between its brackets.
BAR_WIDTH = 30


def _is_terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


class TextBar:
    """A one-line bar for a terminal: parts done, rate and time left, redrawn in place.

    ``[dkernel] stage one: [########--------]  40/100  3.1/s  ETA 19 s``; :meth:`close`
    ends it with the total time and a newline.
    """

    def __init__(
        self, stream: Any, what: str, total: int, done: int = 0, *, ansi: bool = True
    ) -> None:
        self.stream, self.what, self.total = stream, what, total
        # a notebook's output has no erase-line code: a shorter line is padded with blanks
        self.ansi, self._width = ansi, 0
        self.start = self._last = time.monotonic()
        self.first = self.done = done
        self._draw()

    def update(self, done: int) -> None:
        """Record ``done`` parts finished; redraws at most every ``BAR_INTERVAL`` seconds."""
        self.done = done
        now = time.monotonic()
        if now - self._last >= BAR_INTERVAL:
            self._last = now
            self._draw()

    def close(self) -> None:
        """Draw the final state with the elapsed time, and end the line."""
        self._draw(final=True)

    def _draw(self, *, final: bool = False) -> None:
        elapsed = time.monotonic() - self.start
        filled = BAR_WIDTH * self.done // max(self.total, 1)
        bar = "#" * filled + "-" * (BAR_WIDTH - filled)
        width = len(str(self.total))
        text = f"[dkernel] {self.what}: [{bar}] {self.done:>{width}}/{self.total}"
        rate = (self.done - self.first) / elapsed if elapsed > 0 else 0.0
        if final:
            text += f"  done in {elapsed:.1f} s"
        elif rate > 0:
            left = (self.total - self.done) / rate
            text += f"  {rate:.3g}/s  ETA {_duration(left)}"
        # \r and erase-to-end-of-line: the bar is redrawn over itself
        end = "\n" if final else ""
        erase = "\x1b[K" if self.ansi else " " * max(self._width - len(text), 0)
        self._width = len(text)
        print(f"\r{text}{erase}", end=end, file=self.stream, flush=True)


def _duration(seconds: float) -> str:
    """``42 s``, ``3 min 20 s``, ``2 h 05 min``."""
    s = int(round(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


def _in_notebook() -> bool:
    shell = sys.modules.get("IPython")
    ip = shell.get_ipython() if shell is not None and hasattr(shell, "get_ipython") else None
    return ip is not None and type(ip).__name__ == "ZMQInteractiveShell"


def _widgets_available() -> bool:
    from importlib.util import find_spec

    try:
        return find_spec("ipywidgets") is not None
    except (ImportError, ValueError):  # blocked (``sys.modules["ipywidgets"] = None``)
        return False


def active_client() -> Any:
    """The current ``distributed`` client, or None: when ``distributed`` was never imported
    (there is then no client, and it stays unimported), or when ``dask.config`` names a local
    scheduler (an :class:`~dkernel.runtime.threads.InProcessScheduler`, say), which Dask's
    ``compute`` then uses too."""
    if "distributed" not in sys.modules:
        return None
    import dask

    configured = dask.config.get("scheduler", None)
    if configured is not None and not _names_distributed(configured):
        return None
    try:
        from distributed import get_client

        return get_client()
    except (ImportError, ValueError):
        return None


def local_scheduler() -> dict[str, Any]:
    """``dask.compute`` keywords for a computation without a client: none when ``dask.config``
    names a scheduler; else dask's threaded scheduler, named as a callable, when
    ``distributed`` was never imported (Dask would import it to look for a client: 0.1–0.2 s
    on 2 CPUs)."""
    import dask

    if dask.config.get("scheduler", None) is not None or "distributed" in sys.modules:
        return {}
    import dask.threaded

    return {"scheduler": dask.threaded.get}


def without_client() -> contextlib.AbstractContextManager[Any]:
    """A ``dask.config`` scope for work that no ``distributed`` client can run (none exists
    while ``distributed`` was never imported): Dask's threaded scheduler named as a callable,
    and rechunks by tasks. Dask would import ``distributed`` to look for a client at every
    compute given no scheduler or a scheduler's name, and at every rechunk (0.12–0.19 s on
    2 CPUs, with dask, xarray and scikit-learn imported already); with a client, or a
    scheduler already configured, it changes nothing (as :func:`local_scheduler`)."""
    import dask

    scheduler = local_scheduler()
    if not scheduler:
        return contextlib.nullcontext()
    return dask.config.set({**scheduler, "array.rechunk.method": "tasks"})


def _names_distributed(scheduler: Any) -> bool:
    """Whether a ``dask.config`` scheduler is a ``distributed`` client (or names one)."""
    if isinstance(scheduler, str):
        return scheduler.lower() in ("dask.distributed", "distributed")
    return "Client" in type(scheduler).__name__


def wait_with_progress(
    futures: Sequence[Any], *, show: bool = True, what: str = "tasks", stream: Any = None
) -> None:
    """Block until ``futures`` are done, showing their progress when ``show``."""
    from distributed import progress, wait

    futures = list(futures)
    stream = stream or sys.stderr
    if not show or not futures:
        wait(futures)
        return
    if _in_notebook():
        # the widget bar needs ipywidgets; without it, distributed's text bar draws in the
        # cell's output instead of failing the job
        progress(futures, notebook=_widgets_available())
        wait(futures)
        return
    if getattr(stream, "isatty", lambda: False)():
        progress(futures, notebook=False)
        print(file=stream, flush=True)
        return
    start = time.monotonic()
    while True:
        try:
            wait(futures, timeout=LINE_INTERVAL)
            break
        except TimeoutError:
            _progress_line(stream, what, sum(f.done() for f in futures), len(futures), start)
    _progress_line(stream, what, len(futures), len(futures), start, final=True)


def _progress_line(
    stream: Any, what: str, done: int, total: int, start: float, *, final: bool = False
) -> None:
    """The plain progress line: parts done so far, or (``final``) all of them and the time."""
    elapsed = time.monotonic() - start
    tail = f"done in {elapsed:.1f} s" if final else f"done, {elapsed:.0f} s elapsed"
    print(f"[dkernel] {what}: {done}/{total} {tail}", file=stream, flush=True)


def compute_with_progress(
    obj: Any, client: Any = None, *, show: bool = True, what: str = "computing"
) -> Any:
    """Compute a Dask collection (or Delayed), showing progress when ``show``.

    On ``client`` (or the active distributed client) the work runs as one future followed by
    ``wait_with_progress``; without a client, the local scheduler runs it (with dask's
    progress bar on a terminal).
    """
    client = client if client is not None else active_client()
    if client is not None:
        import dask

        many = isinstance(obj, list | tuple)
        # a (nested) tuple of collections becomes one Delayed, so it is one future
        future = client.compute(dask.delayed(tuple(obj)) if many else obj)
        wait_with_progress([future], show=show, what=what)
        result = future.result()
        return type(obj)(result) if many else result
    import dask

    with local_progress_bar(show):
        return dask.compute(obj, **local_scheduler())[0]


@contextlib.contextmanager
def local_progress_bar(show: bool) -> Iterator[None]:
    """Dask's progress bar for what dask's local scheduler computes inside, when ``show`` and
    stderr is a terminal or a notebook's output."""
    if show and (_is_terminal(sys.stderr) or _in_notebook()):
        from dask.diagnostics import ProgressBar

        with ProgressBar(out=sys.stderr):
            yield
    else:
        yield


def compute_parts(
    parts: Sequence[Any], client: Any = None, *, show: bool = False, what: str = "computing"
) -> list:
    """Values of the Dask objects ``parts`` (the per-chunk results of one pass), in order
    (a part that is not a Dask object is its own value).

    On ``client`` (or the active distributed client) every part is a future of its own,
    released as soon as its value has arrived, so a worker forgets a finished part, and the
    tasks that led to it, at once. One future for the whole list (as in
    :func:`compute_with_progress`) keeps every part's result and the record of every task
    behind it on the workers until the last part is done: their memory then grows with the
    number of chunks. Without a client, Dask's configured local scheduler (threads by
    default) computes them in one pass. When ``show``, a ``TextBar`` (parts done, rate, time
    left) is drawn when stderr is a terminal; otherwise a line gives the parts done every
    ``LINE_INTERVAL`` seconds and at the end.
    """
    import dask

    values = list(parts)
    lazy = [i for i, part in enumerate(values) if dask.is_dask_collection(part)]
    if not lazy:
        return values
    client = client if client is not None else active_client()
    if client is None:
        return _compute_parts_locally(values, lazy, show=show, what=what)
    from distributed import as_completed

    futures = client.compute([values[i] for i in lazy])
    slots: dict[Any, list[int]] = {}
    for i, future in zip(lazy, futures, strict=True):
        slots.setdefault(future.key, []).append(i)
    # as_completed waits on the default client's event loop unless told: that of ``client``
    pending = as_completed(futures, loop=client.loop, with_results=True)
    del futures, future  # the loop below holds each future only until its value is in
    report = PartsProgress(what, len(values), len(values) - len(lazy), show=show)
    for future, value in pending:
        for i in slots.pop(future.key, ()):
            values[i] = value
            report.part_done()
    report.close()
    return values


def _compute_parts_locally(values: list, lazy: list[int], *, show: bool, what: str) -> list:
    """``compute_parts`` on Dask's local scheduler: one pass over every part; a part is done
    (a scheduler callback, on the thread that schedules) when its last output key is."""
    import dask

    if not show:
        computed = dask.compute(*(values[i] for i in lazy), **local_scheduler())
    else:
        from dask.core import flatten

        report = PartsProgress(what, len(values), len(values) - len(lazy), show=True)
        parts_of: dict[Any, list[int]] = {}
        keys_left: list[int] = []
        for n, i in enumerate(lazy):
            keys = set(flatten(values[i].__dask_keys__()))
            keys_left.append(len(keys))
            for key in keys:
                parts_of.setdefault(key, []).append(n)

        def finished(key: Any, *_: Any) -> None:
            for n in parts_of.pop(key, ()):
                keys_left[n] -= 1
                if keys_left[n] == 0:
                    report.part_done()

        # passed to this compute alone: dask's global callbacks are swapped out while any
        # thread computes, so one registered here could miss this pass
        computed = dask.compute(
            *(values[i] for i in lazy),
            callbacks=[(None, None, None, finished, None)],
            **local_scheduler(),
        )
        report.close()
    for i, value in zip(lazy, computed, strict=True):
        values[i] = value
    return values


class PartsProgress:
    """Parts of a pass done, for people: a ``TextBar`` when stderr is a terminal or a
    notebook's output (without ANSI codes there), else a line
    every ``LINE_INTERVAL`` seconds and one at the end; nothing unless ``show``."""

    def __init__(self, what: str, total: int, done: int, *, show: bool) -> None:
        self.what, self.total, self.done, self.show = what, total, done, show
        self.stream = sys.stderr
        self.start = self.last = time.monotonic()
        notebook = show and _in_notebook()
        drawn = notebook or (show and _is_terminal(self.stream))
        self.bar = TextBar(self.stream, what, total, done, ansi=not notebook) if drawn else None

    def part_done(self) -> None:
        self.done += 1
        if self.bar is not None:
            self.bar.update(self.done)
        elif self.show and time.monotonic() - self.last >= LINE_INTERVAL:
            self.last = time.monotonic()
            _progress_line(self.stream, self.what, self.done, self.total, self.start)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        elif self.show:
            _progress_line(self.stream, self.what, self.total, self.total, self.start, final=True)
