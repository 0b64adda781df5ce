"""Files written beside a results store: side files and the scratch folder, safely.

A job on an image writes files beside its store, named after it (``<stem>.labels.tif``,
``<stem>.labels.classes.csv``, ``<stem>.quicklook.png``, ``<stem>.segments.gpkg``), and MSSC
keeps intermediate arrays in a scratch folder ``.<store>.scratch``. Both follow the store's
rules (``dkernel.storage.store.check_target``):

* **confined**: a side file is a plain name in the store's directory (``root``);
* **no link followed**: a symbolic link (dangling or not) at a side path or at the scratch
  path is refused, never written through nor replaced. The file is written in a private
  temporary folder beside the target and moved into place with :func:`os.replace`, which
  replaces a directory entry: even a link planted after the check is replaced, its target
  never written;
* **foreign data kept**: a side path holding anything but a regular file (a directory, a
  FIFO, a socket, a device) is refused; a regular file is replaced only when the caller says
  it may (a job: when its store recorded the file, :func:`recorded_side_files`). The scratch
  folder is emptied only when this store made it (its marker file, owned by this user);
* **temporaries cleaned**: on every exit path of :func:`side_file`; those of a killed writer
  by :func:`remove_stale_temps`.

Refusals are :class:`~dkernel.errors.StoreError` naming the path and what to remove.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from dkernel._files import FileRefused, file_kind, read_regular
from dkernel.errors import StoreError

logger = logging.getLogger(__name__)

#: Suffix of the private temporary folder a side file is written in (``.<name>.<token>.tmp``).
TEMP_SUFFIX = ".tmp"

#: Root attribute of a results store: the side files its jobs wrote (relative to the store).
SIDE_FILES_ATTR = "side_files"

#: Group attributes that recorded side files before :data:`SIDE_FILES_ATTR` existed.
LEGACY_SIDE_FILE_KEYS = ("label_geotiff", "class_table_csv", "quicklook_png", "segments")

#: The file that marks a scratch folder as made by dkernel for one store.
SCRATCH_MARKER = ".dkernel-scratch"

#: Longest marker file read (bytes).
_MARKER_MAX = 4096


# ---------------------------------------------------------------------------------------
# side files
# ---------------------------------------------------------------------------------------


def _link_target(path: Path) -> str:
    try:
        return os.readlink(path)
    except OSError:  # pragma: no cover - replaced meanwhile
        return "?"


def _check_confined(path: Path, root: str | os.PathLike | None) -> None:
    if path.name in ("", ".", ".."):
        raise StoreError(f"{path} is not a file name; dkernel writes side files by name.")
    if root is None:
        return
    parent, top = os.path.realpath(path.parent), os.path.realpath(root)
    if parent != top and not parent.startswith(top.rstrip(os.sep) + os.sep):
        raise StoreError(
            f"{path} is outside the output root {root} (its folder resolves to {parent}); "
            "refusing to write it."
        )


def check_side_file(
    path: str | os.PathLike,
    *,
    replace: bool = False,
    root: str | os.PathLike | None = None,
    what: str = "file",
) -> bool:
    """Check that ``path`` may be written; return whether something is there to replace.

    Parameters
    ----------
    path : path of the side file
    replace : bool
        An existing regular file may be replaced (it was written by this store's job).
    root : path, optional
        The folder ``path`` must lie in (the store's directory); links resolved.
    what : str
        The file's role in messages (``'label GeoTIFF'``).

    Returns
    -------
    bool
        True when a regular file that may be replaced is at ``path``.

    Raises
    ------
    StoreError
        ``path`` is outside ``root``, a symbolic link, a directory or another file that is
        not regular, or a regular file while ``replace`` is False; the message names the path
        and what to remove.

    Notes
    -----
    Reads ``lstat(path)`` only: never opens, follows or blocks on what is there.
    """
    path = Path(path)
    _check_confined(path, root)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise StoreError(f"cannot check the {what} path {path}: {exc.strerror or exc}.") from exc
    fix = f"Remove it (rm {_quote(path)}) or choose another --output."
    if stat.S_ISLNK(st.st_mode):
        raise StoreError(
            f"{path} is a symbolic link (to {_link_target(path)}) where dkernel writes the "
            f"{what}; dkernel never writes through a link nor replaces one. {fix}"
        )
    if not stat.S_ISREG(st.st_mode):
        kind = file_kind(st.st_mode)
        rm = f"rm -r {_quote(path)}" if stat.S_ISDIR(st.st_mode) else f"rm {_quote(path)}"
        raise StoreError(
            f"{path} is {kind} where dkernel writes the {what}; refusing to replace it. "
            f"Remove it ({rm}) or choose another --output."
        )
    if not replace:
        raise StoreError(
            f"{path} exists and was not written by the job of this results store; refusing "
            f"to replace it with the {what} (--overwrite replaces only the files a store's "
            f"job wrote). {fix}"
        )
    return True


def _quote(path: Path) -> str:
    import shlex

    return shlex.quote(str(path))


@contextlib.contextmanager
def side_file(
    path: str | os.PathLike,
    *,
    replace: bool = False,
    root: str | os.PathLike | None = None,
    what: str = "file",
) -> Iterator[Path]:
    """Write ``path`` safely: yield a temporary path to write, then move it into place.

    The temporary path has ``path``'s name (so writers choose their format from its suffix)
    inside a private folder ``.<name>.<token>.tmp`` created beside ``path``. When the block
    ends without an error, ``path`` is checked again and the written file replaces it
    atomically (:func:`os.replace`, same directory and file system); on every exit the
    temporary folder and whatever the writer left in it are removed.

    Parameters
    ----------
    path : path of the file to write (its folder is created)
    replace, root, what
        As in :func:`check_side_file`.

    Yields
    ------
    Path
        Where to write the file (it does not exist yet).

    Raises
    ------
    StoreError
        From :func:`check_side_file`, before the block runs or before the move; or the folder
        cannot be written.

    Examples
    --------
    >>> with side_file(tmp / "x.labels.classes.csv", root=tmp) as out:  # doctest: +SKIP
    ...     out.write_text("class,pixels\\n")
    """
    path = Path(path)
    check_side_file(path, replace=replace, root=root, what=what)
    with contextlib.suppress(OSError):  # an unwritable folder is reported just below
        path.parent.mkdir(parents=True, exist_ok=True)
    try:
        tmp_dir = Path(
            tempfile.mkdtemp(prefix=f".{path.name}.", suffix=TEMP_SUFFIX, dir=path.parent)
        )
    except OSError as exc:
        raise StoreError(
            f"cannot write the {what} {path}: its folder {path.parent} cannot be written "
            f"({exc.strerror or exc}). Fix its permissions or choose another --output."
        ) from exc
    try:
        tmp = tmp_dir / path.name
        yield tmp
        try:
            st = os.lstat(tmp)
        except FileNotFoundError:
            raise StoreError(f"the {what} {path} was not written (no file came out).") from None
        if not stat.S_ISREG(st.st_mode):
            raise StoreError(f"the {what} {path} was not written as a regular file.")
        # again: something may have been put there while the file was being written
        check_side_file(path, replace=replace, root=root, what=what)
        try:
            os.replace(tmp, path)
        except IsADirectoryError as exc:
            raise StoreError(
                f"{path} became a directory while the {what} was written; refusing to "
                f"replace it. Remove it (rm -r {_quote(path)}) or choose another --output."
            ) from exc
    finally:
        shutil.rmtree(tmp_dir, ignore_errors=True)


def _temp_pattern(name: str) -> re.Pattern[str]:
    # this module's folders (.<name>.<token>.tmp) and the label COG writer's files of
    # dkernel before it (.<name>.<token>.tmp.tif); tokens are tempfile's [a-z0-9_]
    return re.compile(rf"^\.{re.escape(name)}\.[A-Za-z0-9_]+{re.escape(TEMP_SUFFIX)}(\.tif)?$")


def stale_temps(path: str | os.PathLike) -> list[Path]:
    """The temporaries of ``path`` in its folder (see :func:`remove_stale_temps`)."""
    path = Path(path)
    pattern = _temp_pattern(path.name)
    try:
        names = os.listdir(path.parent)
    except OSError:
        return []
    return sorted(path.parent / n for n in names if pattern.match(n))


def remove_stale_temps(path: str | os.PathLike) -> list[Path]:
    """Remove the temporaries a killed writer of ``path`` left beside it; return them.

    Only entries named exactly as :func:`side_file` (or an older label COG writer) names the
    temporaries of ``path`` are considered (the temporaries of another store's files have
    another name), and of those only the ones owned by this user. Links are removed, never
    followed; a folder is removed with ``shutil.rmtree``, which does not follow the links
    inside it. The caller must hold the store's lease: a live writer's temporary would go too.
    """
    removed = []
    me = os.geteuid()
    for entry in stale_temps(path):
        try:
            st = os.lstat(entry)
            if st.st_uid != me:
                logger.warning(f"left {entry}: a temporary name, but owned by uid {st.st_uid}")
                continue
            if stat.S_ISDIR(st.st_mode):
                shutil.rmtree(entry)
            else:
                os.unlink(entry)
        except FileNotFoundError:
            continue
        except OSError as exc:
            logger.warning(f"could not remove the stale temporary {entry}: {exc}")
            continue
        removed.append(entry)
    if removed:
        logger.info(f"removed {len(removed)} temporary file(s) of a killed run: {removed[0].name}")
    return removed


def recorded_side_files(store: str | os.PathLike) -> set[str]:
    """The side files the results store at ``store`` recorded as its jobs' (absolute paths).

    Read from the root attribute :data:`SIDE_FILES_ATTR` and, for stores written before
    it, from the paths in the groups' attributes (:data:`LEGACY_SIDE_FILE_KEYS`). Empty when
    ``store`` holds no readable store: call it once ``check_target``
    has found a dkernel store (or nothing) there. Only paths directly beside the store count;
    they are normalised without following links (compare them with :func:`side_file_key`).

    Notes
    -----
    Reads the root's and the groups' ``zarr.json`` only, each as ``_read_attrs`` does
    (regular files of at most 16 MiB, never a link or a FIFO).
    """
    store = Path(store)
    attrs = _read_attrs(store / "zarr.json")
    recorded = list(_strings(attrs.get(SIDE_FILES_ATTR)))
    for group in _strings(attrs.get("groups")):
        if group and "/" not in group and not group.startswith("."):
            g = _read_attrs(store / group / "zarr.json")
            recorded += [g[k] for k in LEGACY_SIDE_FILE_KEYS if isinstance(g.get(k), str)]
    base = os.path.abspath(store)
    paths = {os.path.normpath(os.path.join(base, r)) for r in recorded}
    return {p for p in paths if os.path.dirname(p) == os.path.dirname(base)}


#: Largest ``zarr.json`` ``_read_attrs`` reads (bytes).
_METADATA_MAX = 16 << 20


def _read_attrs(file: Path) -> dict:
    """The ``attributes`` of a ``zarr.json``; ``{}`` unless it is a readable regular file
    (not a link, not a FIFO) of at most :data:`_METADATA_MAX` bytes holding a JSON object."""
    import json

    try:
        meta = json.loads(read_regular(file, _METADATA_MAX, follow_links=False).decode("utf-8"))
    except (OSError, FileRefused, ValueError):
        return {}
    attrs = meta.get("attributes") if isinstance(meta, dict) else None
    return attrs if isinstance(attrs, dict) else {}


def _strings(value: object) -> Iterable[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def side_file_key(path: str | os.PathLike) -> str:
    """``path`` as :func:`recorded_side_files` lists it (absolute, normalised, links kept)."""
    return os.path.normpath(os.path.abspath(path))


def side_file_record(store: str | os.PathLike, paths: Iterable[str | os.PathLike]) -> list[str]:
    """The value of :data:`SIDE_FILES_ATTR` for ``paths``: relative to the store, sorted."""
    base = os.path.abspath(store)
    return sorted({os.path.relpath(side_file_key(p), base) for p in paths})


# ---------------------------------------------------------------------------------------
# scratch folder
# ---------------------------------------------------------------------------------------


def check_remote_side_files(
    url: str, storage_options: dict | None, names: Iterable[str], owned: set[str] | None = None
) -> set[str]:
    """Refuse objects beside the store at ``url`` (on an object store) that its job did not
    write; return the side files the store recorded (``../<name>``).

    ``owned``: the recorded names when the caller has the store open; read from the store's
    root ``zarr.json`` otherwise (none when there is no store yet).

    Raises
    ------
    StoreError
        An object at one of ``names`` beside the store is not one of the store's.
    """
    from dkernel.storage import remote

    fs, key = remote.filesystem(url, storage_options)
    if owned is None:
        owned = set(_strings(_remote_attrs(fs, f"{key}/zarr.json").get(SIDE_FILES_ATTR)))
    parent_url, parent_key = url.rpartition("/")[0], key.rpartition("/")[0]
    for name in names:
        if f"../{name}" not in owned and fs.exists(f"{parent_key}/{name}"):
            raise StoreError(
                f"{parent_url}/{name} exists and was not written by the job of {url}; "
                "refusing to replace it. Remove it, or choose another --output."
            )
    return owned


def _remote_attrs(fs: Any, key: str) -> dict:
    """The ``attributes`` of a ``zarr.json`` object, as :func:`_read_attrs` reads a file."""
    import json

    try:
        if fs.size(key) > _METADATA_MAX:
            return {}
        meta = json.loads(fs.cat_file(key).decode("utf-8"))
    except (OSError, ValueError):
        return {}
    attrs = meta.get("attributes") if isinstance(meta, dict) else None
    return attrs if isinstance(attrs, dict) else {}


@contextlib.contextmanager
def staged_remote_side_files(store: Any, names: Iterable[str]) -> Iterator[Path]:
    """Side files of a store on an object store: written locally, then uploaded beside it.

    GDAL cannot write a COG to an object store in place, so the caller writes each file
    ``names`` lists into the yielded private local folder; on a clean exit every file written
    there is uploaded beside the store's prefix. Before anything is written, the objects there
    are checked (:func:`check_remote_side_files`); the names are then claimed in
    :data:`SIDE_FILES_ATTR`, so that the files of a run killed while uploading stay its own.

    Parameters
    ----------
    store : ResultsStore
        An open store on an object store (``store.remote``), holding its lease.
    names : iterable of str
        Plain file names beside the store.

    Raises
    ------
    StoreError
        An object at one of the names was not written by the store's job.
    """
    from dkernel.storage import remote

    names = list(names)
    owned = set(_strings(store.attrs.get(SIDE_FILES_ATTR)))
    check_remote_side_files(store.path, store.storage_options, names, owned)
    if names:
        store.update_attrs(**{SIDE_FILES_ATTR: sorted(owned | {f"../{n}" for n in names})})
    fs, key = remote.filesystem(store.path, store.storage_options)
    parent_key = key.rpartition("/")[0]
    with tempfile.TemporaryDirectory(prefix="dkernel-side-files-") as tmp:
        yield Path(tmp)
        for name in names:
            if (Path(tmp) / name).exists():
                fs.put_file(str(Path(tmp) / name), f"{parent_key}/{name}")


def _marker_text(owner: str) -> str:
    return f"dkernel scratch folder of {owner}\n"


def _refuse_scratch(path: Path, why: str, rm: str = "rm -r") -> StoreError:
    return StoreError(
        f"the scratch folder {path} {why}; dkernel neither follows nor empties it. Remove it "
        f"({rm} {_quote(path)}) if it is left over, or choose another --output."
    )


def check_scratch_dir(path: str | os.PathLike, owner: str) -> bool:
    """Whether ``path`` is the scratch folder of the store ``owner`` (False: nothing there).

    The scratch folder is this store's when it is a real folder (not a link), owned by this
    user, holding the marker :data:`SCRATCH_MARKER` that :func:`make_scratch_dir` wrote (a
    regular file naming ``owner``). An empty folder is not this store's but may be used
    (False: a run killed between making the folder and writing its marker leaves one).

    Raises
    ------
    StoreError
        ``path`` is a link, not a folder, owned by another user, or a folder with other
        content and no valid marker: the message names the path to remove.
    """
    path = Path(path)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise _refuse_scratch(path, f"cannot be checked ({exc.strerror or exc})") from exc
    if stat.S_ISLNK(st.st_mode):
        raise _refuse_scratch(path, f"is a symbolic link (to {_link_target(path)})", "rm")
    if not stat.S_ISDIR(st.st_mode):
        raise _refuse_scratch(path, f"is {file_kind(st.st_mode)}, not a folder", "rm")
    if st.st_uid != os.geteuid():
        raise _refuse_scratch(path, f"is owned by uid {st.st_uid}, not by this user")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as exc:
        raise _refuse_scratch(path, f"cannot be opened ({exc.strerror or exc})") from exc
    try:
        if _marker_ok(fd, owner):
            return True
        if not os.listdir(fd):
            return False
    finally:
        os.close(fd)
    raise _refuse_scratch(
        path, f"holds files that dkernel did not put there (no valid {SCRATCH_MARKER} marker)"
    )


def _marker_ok(dir_fd: int, owner: str) -> bool:
    try:
        fd = os.open(SCRATCH_MARKER, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dir_fd)
    except OSError:
        return False
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
            return False
        return os.read(fd, _MARKER_MAX) == _marker_text(owner).encode()
    finally:
        os.close(fd)


def make_scratch_dir(path: str | os.PathLike, owner: str) -> Path:
    """Create the scratch folder of the store ``owner`` with its marker, or check it is one.

    Raises
    ------
    StoreError
        As :func:`check_scratch_dir`.
    """
    path = Path(path)
    if check_scratch_dir(path, owner):
        return path
    with contextlib.suppress(FileExistsError):  # an empty folder (checked just above)
        os.mkdir(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as exc:  # replaced by a link or a file meanwhile
        raise _refuse_scratch(path, f"cannot be opened ({exc.strerror or exc})") from exc
    try:
        if os.fstat(fd).st_uid != os.geteuid():
            raise _refuse_scratch(path, "is owned by another user")
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
        marker = os.open(SCRATCH_MARKER, flags, 0o644, dir_fd=fd)
        try:
            os.write(marker, _marker_text(owner).encode())
        finally:
            os.close(marker)
    except FileExistsError as exc:
        raise _refuse_scratch(path, "got a marker from elsewhere while it was made") from exc
    finally:
        os.close(fd)
    return path


def scratch_entry(path: str | os.PathLike, owner: str, name: str) -> Path:
    """``path / name`` in the scratch folder of ``owner`` (made if needed), emptied first.

    Whatever is at the entry (a previous array, a link) is removed without being followed,
    so a writer that follows links (Zarr) starts from a new folder.
    """
    if not name or name in (".", "..") or "/" in name or os.sep in name:
        raise StoreError(f"invalid scratch entry name {name!r}.")
    entry = make_scratch_dir(path, owner) / name
    with contextlib.suppress(FileNotFoundError):
        if stat.S_ISDIR(os.lstat(entry).st_mode):
            shutil.rmtree(entry)
        else:
            os.unlink(entry)
    return entry


def remove_scratch_dir(path: str | os.PathLike, owner: str, *, strict: bool = True) -> None:
    """Remove the scratch folder of the store ``owner`` if it is there.

    A folder that is not this store's (:func:`check_scratch_dir`) is left as it is: a
    :class:`~dkernel.errors.StoreError`, or with ``strict=False`` a logged warning (for a
    store being marked complete or failed, whose status must still be written). An empty
    unmarked folder is removed.
    """
    path = Path(path)
    try:
        ours = check_scratch_dir(path, owner)
    except StoreError as exc:
        if strict:
            raise
        logger.warning(str(exc))
        return
    if ours:
        shutil.rmtree(path, ignore_errors=True)  # does not follow the links inside it
    else:
        with contextlib.suppress(OSError):  # nothing there, or an empty folder
            os.rmdir(path)
