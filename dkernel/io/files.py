"""Input files opened safely: regular files only, their size checked before they are read.

A path a job reads may name a FIFO (``open`` waits for a writer, forever), a device
(``/dev/zero`` never ends, ``/dev/urandom`` neither) or a sparse file of gigabytes that holds
almost nothing on disk. Each is refused from ``fstat`` of the opened descriptor, before a byte
is read; the descriptor is opened with ``O_NONBLOCK`` so that opening a FIFO returns at once,
and a file is never read past its cap, even if it grows meanwhile.
"""

from __future__ import annotations

import io
import os
import stat
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

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
    path = at_open(path, what, error=error)
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
        return open_regular_fd(at_open(path, what, error=error))
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
        return read_regular(at_open(path, what, error=error), max_bytes)
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


#: Where a data root comes from, named in its refusals.
DATA_ROOT_SOURCE = "DKERNEL_DATA_ROOT / runtime.data_root"


def confine(
    href: str | os.PathLike,
    root: Path,
    *,
    via: str = "",
    error: Callable[[str], Exception] = InvalidInputError,
) -> Path:
    """The local file ``href`` names, its links resolved, refused unless it lies in ``root``.

    The one check of a data root (``DKERNEL_DATA_ROOT`` / ``runtime.data_root``), for every
    file a job reads: a reader's path options, and what its ``files`` lead to (a STAC item's
    asset hrefs, a Parquet folder's members, the links inside a Zarr store, a GeoTIFF's
    sidecars). ``href`` is a path or a URL: a ``file://`` URL is the local path it names
    (never a relative path), any other URL or GDAL network path is a remote input and is
    refused, since a data root confines a job to local files.

    Parameters
    ----------
    href : str or path-like
    root : Path
        The data root, resolved.
    via : str
        What leads to ``href``, for the message (``"reader 'stac' would read "``).
    error : callable
        Builds the exception raised from the message.

    Returns
    -------
    Path
        ``href`` resolved.

    Raises
    ------
    error
        Naming ``href`` (and where its links lead) and the data root.
    """
    from dkernel.storage.remote import is_remote, is_url, local_path

    text = os.fspath(href)
    shown = text if len(text) <= 300 else text[:297] + "..."
    if is_remote(text):
        raise error(
            f"{via}{shown} is a remote input, and a data root ({root}) confines this job to "
            f"local files below it ({DATA_ROOT_SOURCE})."
        )
    local = Path(local_path(text)) if is_url(text) else Path(text)
    resolved = local.resolve()
    if resolved.is_relative_to(root):
        return resolved
    if is_url(text):
        shown += f" (the local file {resolved})"
    elif resolved != Path(os.path.abspath(local)):
        shown += f" (a link to {resolved})"
    where = f"{via}{shown}, which is" if via else f"{shown} is"
    raise error(
        f"{where} outside the data root {root}; only files below it may be read "
        f"({DATA_ROOT_SOURCE}). Copy the file into the data root instead of linking it."
    )


#: The data root in force while a job reads its data (:func:`data_root_in_force`); where
#: none is set (a Dask worker process), ``$DKERNEL_DATA_ROOT``.
_IN_FORCE: list[Path] = []


@contextmanager
def data_root_in_force(root: Path | None) -> Iterator[None]:
    """While open, :func:`at_open` confines what is opened to ``root`` (the job's data root,
    resolved; None: none but ``$DKERNEL_DATA_ROOT``)."""
    if root is None:
        yield
        return
    _IN_FORCE.append(root)
    try:
        yield
    finally:
        _IN_FORCE.remove(root)


def data_root_now(*, task: bool = False) -> Path | None:
    """The data root opens are checked against now: the job's (:func:`data_root_in_force`);
    for a ``task`` (a Dask task reading a part of the data, maybe in a worker process where no
    job set one) else ``$DKERNEL_DATA_ROOT`` (resolved); else None. Files that are not data
    (the job spec) are read with no root in force."""
    if _IN_FORCE:
        return _IN_FORCE[-1]
    env = os.environ.get("DKERNEL_DATA_ROOT") if task else None
    return Path(os.path.expandvars(os.path.expanduser(env))).resolve() if env else None


def at_open(
    path: str | os.PathLike,
    what: str = "",
    *,
    task: bool = False,
    root: Path | None = None,
    error: Callable[[str], Exception] = InvalidInputError,
) -> str:
    """The local ``path`` to open now: with a data root in force (``root`` when given: the
    one a task carries from the job that built it; else :func:`data_root_now`), resolved
    again and checked by :func:`confine` at the point of opening, so that a file swapped for
    a link to outside the root after the spec was validated is refused rather than read.
    Returns the resolved path, which the caller opens (no link is then followed between this
    check and the open but one swapped in that instant); ``path`` itself when no data root
    is in force.

    Raises
    ------
    error
        Naming the path, where it leads and the data root.
    """
    if root is None:
        root = data_root_now(task=task)
    if root is None:
        return os.fspath(path)
    via = f"{what}: " if what else ""
    return str(confine(path, root, via=f"{via}at the time of reading, ", error=error))


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

    path = at_open(path, key)
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


# ---------------------------------------------------------------------------------------
# text inputs read whole (a CSV table): compressed or remote, within a cap
# ---------------------------------------------------------------------------------------

#: Compressions of a text input, by the suffix of its name (those pandas infers).
COMPRESSIONS = {".gz": "gzip", ".bz2": "bz2", ".xz": "xz", ".zip": "zip", ".zst": "zstd"}


def compression_of(name: str) -> str | None:
    """The compression of a file named ``name`` (its suffix, :data:`COMPRESSIONS`).

    Raises
    ------
    InvalidInputError
        For a tar archive (``.tar``, ``.tgz``, ``.tar.gz``, …): extract the table first.
    """
    lower = name.lower().split("?", 1)[0]
    if lower.endswith((".tar", ".tgz")) or ".tar." in lower.rsplit("/", 1)[-1]:
        raise InvalidInputError(
            f"{name} is a tar archive; extract the table from it first (tar -xf)."
        )
    for suffix, kind in COMPRESSIONS.items():
        if lower.endswith(suffix):
            return kind
    return None


def _decompressing(raw: Any, kind: str, name: str) -> Any:
    """A binary file object of the decompressed bytes of ``raw`` (compressed ``kind``)."""
    if kind == "zstd":
        try:
            import zstandard
        except ImportError:
            raise InvalidInputError(
                f"{name} is zstd-compressed, which needs the zstandard package "
                "(pip install zstandard), or decompress it first (zstd -d)."
            ) from None
        return zstandard.ZstdDecompressor().stream_reader(raw, closefd=True)
    from fsspec.compression import compr

    return compr[kind](raw, mode="rb")


@dataclass(frozen=True)
class BoundedInput:
    """A text input read whole (a CSV table), at most :attr:`max_bytes` once decompressed.

    :func:`bounded_input` checks the cap before anything parses the input: a local file's
    size from ``fstat``, a remote object downloaded once and never past the cap (a server
    streaming an endless body is cut off), a compressed input decompressed as a stream and
    counted (a small gzip that inflates to gigabytes is refused after ``max_bytes``, in
    constant memory). :meth:`open` then gives the decompressed bytes as often as needed.
    """

    name: str
    max_bytes: int
    local: str | None = None
    data: bytes | None = None
    compression: str | None = None

    def open(self) -> BinaryIO:
        """A fresh binary file object of the (decompressed) bytes; the caller closes it."""
        if self.local:
            raw: Any = open(at_open(self.local, self.name), "rb")  # noqa: SIM115
        else:
            raw = io.BytesIO(self.data or b"")
        if self.compression is None:
            return raw
        return _decompressing(raw, self.compression, self.name)


def bounded_input(
    path: str,
    max_bytes: int,
    what: str = "data.path",
    storage_options: Mapping[str, Any] | None = None,
    *,
    advice: str = "",
) -> BoundedInput:
    """``path`` (a local file, ``file://`` or remote URL, maybe compressed) as a
    :class:`BoundedInput` of at most ``max_bytes`` decompressed.

    Raises
    ------
    InvalidInputError
        Not a regular file, unreadable, a tar archive, or more than ``max_bytes`` (stored
        or decompressed): naming the input, the cap and ``advice``.
    """
    from dkernel.storage.remote import is_remote, local_path

    kind = compression_of(path)
    too_big = (
        f"{what}: {path} holds more than {max_bytes:,} bytes"
        f"{' once decompressed' if kind else ''}; at most {max_bytes:,} are read. "
        f"{advice}".rstrip()
    )
    if is_remote(path):
        from dkernel.io.remote import read_remote_bounded

        source = BoundedInput(
            path,
            max_bytes,
            data=read_remote_bounded(path, max_bytes, what, storage_options, advice=advice),
            compression=kind,
        )
    else:
        local = local_path(str(path))
        st = check_regular(local, what)
        if st.st_size > max_bytes:
            raise InvalidInputError(too_big)
        source = BoundedInput(path, max_bytes, local=local, compression=kind)
    if kind is not None:
        total = 0
        try:
            with source.open() as fh:
                while block := fh.read(1 << 20):
                    total += len(block)
                    if total > max_bytes:
                        raise InvalidInputError(too_big)
        except InvalidInputError:
            raise
        except Exception as exc:  # noqa: BLE001  (gzip.BadGzipFile, lzma, zlib, zip errors)
            raise InvalidInputError(
                f"{what}: could not decompress {path} ({kind}): {str(exc)[:200]} "
                f"({type(exc).__name__}). Check the file."
            ) from None
    return source
