"""Input files opened safely: regular files only, their size checked before they are read.

A path a job reads may name a FIFO (``open`` waits for a writer, forever), a device
(``/dev/zero`` never ends, ``/dev/urandom`` neither) or a sparse file of gigabytes that holds
almost nothing on disk. Each is refused from ``fstat`` of the opened descriptor, before a byte
is read; the descriptor is opened with ``O_NONBLOCK`` so that opening a FIFO returns at once,
and a file is never read past its cap, even if it grows meanwhile.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

from dkernel._files import FileRefused, file_kind, open_regular_fd, read_regular
from dkernel.errors import InvalidInputError


def not_regular_message(path: str | os.PathLike, mode: int, what: str = "") -> str:
    """The refusal of a path that is not a regular file (the same words for every reader)."""
    label = f"{what}: " if what else ""
    return (
        f"{label}could not read {path}: it is {file_kind(mode)}, and dkernel reads regular "
        "files only (a pipe or a device could block or never end). Copy the data into a "
        "regular file."
    )


def check_regular(
    path: str | os.PathLike,
    what: str = "",
    *,
    allow_dir: bool = False,
    error: Callable[[str], Exception] = InvalidInputError,
) -> os.stat_result:
    """``os.stat(path)`` (links followed), refused unless a regular file (or a directory
    when ``allow_dir``).

    Raises
    ------
    error
        Naming the path and what it is (FIFO, device, socket, directory).
    """
    try:
        st = os.stat(path)
    except OSError as exc:
        raise error(f"{what + ' ' if what else ''}{str(path)!r} could not be read: {exc}.") from exc
    if stat.S_ISREG(st.st_mode) or (allow_dir and stat.S_ISDIR(st.st_mode)):
        return st
    raise error(not_regular_message(path, st.st_mode, what))


def open_regular(
    path: str | os.PathLike,
    what: str = "",
    *,
    error: Callable[[str], Exception] = InvalidInputError,
) -> tuple[int, os.stat_result]:
    """A read-only descriptor of ``path`` and its ``fstat``, refused unless a regular file
    (:func:`dkernel._files.open_regular_fd`: the open never blocks, the check is made on the
    descriptor). The caller closes the descriptor."""
    try:
        return open_regular_fd(path)
    except FileRefused as exc:
        raise error(not_regular_message(path, exc.mode, what)) from None
    except OSError as exc:
        raise error(f"{what + ' ' if what else ''}{str(path)!r} could not be read: {exc}.") from exc


def read_bounded(
    path: str | os.PathLike,
    max_bytes: int,
    what: str = "",
    *,
    error: Callable[[str], Exception] = InvalidInputError,
    advice: str = "",
) -> bytes:
    """The bytes of the regular file ``path``, refused when it is larger than ``max_bytes``
    (:func:`dkernel._files.read_regular`: size from ``fstat`` first, never read past the cap).

    Raises
    ------
    error
        Not a regular file, larger than ``max_bytes``, or unreadable.
    """
    label = f"{what} " if what else ""
    try:
        return read_regular(path, max_bytes)
    except FileRefused as exc:
        if exc.mode is not None:
            raise error(not_regular_message(path, exc.mode, what)) from None
        raise error(
            f"{label}{str(path)!r} is {exc.size:,} bytes; at most {max_bytes:,} are read. "
            f"{advice}".rstrip()
        ) from None
    except OSError as exc:
        raise error(f"{label}{str(path)!r} could not be read: {exc}.") from exc


def inside(path: str | os.PathLike, root: Path) -> bool:
    """Whether ``path``, with its links resolved, lies in ``root`` (resolved)."""
    return Path(path).resolve().is_relative_to(root)


def load_npy(path: str | os.PathLike, key: str, *, mmap: bool = True):
    """``np.load`` of one ``.npy`` array, every failure an :class:`InvalidInputError` naming
    the file and the fix: not a regular file, empty, truncated header, pickled objects, or a
    ``.npz`` archive (refused, naming the arrays it holds: this reader reads one ``.npy``
    array; nothing is guessed).

    Returns
    -------
    numpy.ndarray or numpy.memmap
    """
    import numpy as np

    from dkernel.schema.params import show_value

    st = check_regular(path, key)
    if st.st_size == 0:
        raise InvalidInputError(
            f"{key}: {path} is empty (0 bytes); a .npy file written by numpy.save is "
            "expected. Check that the file was copied completely."
        )
    try:
        loaded = np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)
    except Exception as exc:  # noqa: BLE001  (EOFError, ValueError, OSError, ...)
        raise InvalidInputError(
            f"{key}: could not read {path} as a .npy array: {str(exc)[:200]} "
            f"({type(exc).__name__}). Write it with numpy.save(path, array) (numeric, not "
            "pickled objects)."
        ) from exc
    if isinstance(loaded, np.lib.npyio.NpzFile):
        names = list(loaded.files)
        loaded.close()
        shown = show_value(names[:10]) + (f" and {len(names) - 10} more" if len(names) > 10 else "")
        first = show_value(names[0]) if names else "'name'"
        raise InvalidInputError(
            f"{key}: {path} is a .npz archive holding {len(names)} array(s) ({shown}), not a "
            f".npy array; this reader reads one .npy array and does not pick one for you. "
            f"Extract it: numpy.save('x.npy', numpy.load(path)[{first}])."
        )
    return loaded
