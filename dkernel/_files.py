"""Reading a small file safely: a regular file only, never blocking, never past a size cap.

A path may name a FIFO (``open`` waits for a writer, forever), a device (``/dev/zero`` never
ends) or a sparse file of gigabytes. :func:`open_regular_fd` opens with ``O_NONBLOCK`` and
decides from ``fstat`` of the descriptor, so a file swapped after a check cannot slip in;
:func:`read_regular` reads at most the cap. Messages are the callers' (a reader's input, a
store's metadata, a lease): :class:`FileRefused` says only what the file is.
"""

from __future__ import annotations

import errno
import os
import stat

#: What a file is, by the type bits of its ``stat`` mode.
_KINDS = {
    stat.S_IFREG: "a regular file",
    stat.S_IFDIR: "a directory",
    stat.S_IFLNK: "a symbolic link",
    stat.S_IFIFO: "a FIFO (named pipe)",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
}


def file_kind(mode: int) -> str:
    """``'a regular file'``, ``'a directory'``, ``'a FIFO (named pipe)'``, … for a
    ``st_mode``."""
    return _KINDS.get(stat.S_IFMT(mode), "not a regular file")


class FileRefused(Exception):
    """Not read: the file is not a regular file (``mode`` set) or is larger than the cap
    (``size`` set)."""

    def __init__(self, *, mode: int | None = None, size: int | None = None) -> None:
        self.mode, self.size = mode, size
        what = f"is {file_kind(mode)}" if mode is not None else f"is {size:,} bytes"
        super().__init__(what)


def open_regular_fd(
    path: str | os.PathLike, *, follow_links: bool = True
) -> tuple[int, os.stat_result]:
    """A read-only, blocking descriptor of the regular file ``path`` and its ``fstat``.

    Without ``follow_links`` a link is refused (``mode`` of a link) and nothing that is not a
    regular file is even opened. The caller closes the descriptor.

    Raises
    ------
    FileRefused
        Not a regular file.
    OSError
        Missing or unreadable (``FileNotFoundError`` among them).
    """
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    if not follow_links:
        st = os.lstat(path)
        if not stat.S_ISREG(st.st_mode):
            raise FileRefused(mode=st.st_mode)
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # replaced by a link after the lstat
            raise FileRefused(mode=stat.S_IFLNK) from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise FileRefused(mode=st.st_mode)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def read_regular(path: str | os.PathLike, max_bytes: int, *, follow_links: bool = True) -> bytes:
    """The bytes of the regular file ``path``: the size is checked from ``fstat`` first, and
    at most ``max_bytes + 1`` bytes are read (a file that grows meanwhile is refused).

    Raises
    ------
    FileRefused
        Not a regular file, or larger than ``max_bytes`` (``size``).
    OSError
        Missing or unreadable.
    """
    fd, st = open_regular_fd(path, follow_links=follow_links)
    try:
        if st.st_size > max_bytes:
            raise FileRefused(size=st.st_size)
        parts, total = [], 0
        while total <= max_bytes:
            block = os.read(fd, min(1 << 20, max_bytes + 1 - total))
            if not block:
                break
            parts.append(block)
            total += len(block)
        if total > max_bytes:
            raise FileRefused(size=total)
        return b"".join(parts)
    finally:
        os.close(fd)
