"""Where a results store may go: the checks made before any cluster starts.

Light on purpose (no xarray or Zarr): ``dkernel validate`` runs them without loading the store
machinery of ``dkernel.storage.store``.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dkernel.errors import StoreError
from dkernel.storage.remote import as_location, check_remote_writable


def check_writable(path: str | Path, store_options: Mapping[str, Any] | None = None) -> None:
    """Check that a store can be written at ``path`` (before any cluster starts).

    ``path`` may be an object-store URL (``s3://bucket/x.zarr``): its bucket is then checked
    within bounded time with ``store_options`` (``dkernel.storage.remote``); nothing is
    written.

    Raises
    ------
    StoreError
        Naming the directory that is not writable (or the file in the way) and the fix; or
        the URL and what is wrong with it (unknown scheme, missing bucket, unreachable).
    """
    location = as_location(path)
    if isinstance(location, str):
        check_remote_writable(location, store_options)
        return
    path = Path(os.path.abspath(location))
    probe = path
    while not probe.exists():
        if probe.parent == probe:
            break
        probe = probe.parent
    if not probe.is_dir():
        raise StoreError(
            f"cannot create the results store {path}: {probe} is a file, not a directory. "
            "Choose another output path."
        )
    problem = None
    if not os.access(probe, os.W_OK | os.X_OK):
        problem = "is not writable by this user"
    else:  # os.access says yes to root even on read-only mounts: try it
        try:
            fd, name = tempfile.mkstemp(prefix=".dkernel-probe-", dir=probe)
        except OSError as exc:
            problem = f"cannot be written ({exc.strerror or exc})"
        else:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(name)
    if problem:
        what = "the store" if probe == path else "its directory"
        raise StoreError(
            f"cannot write the results store {path}: {what} {probe} {problem}. Fix its "
            "permissions or choose another --output."
        )
