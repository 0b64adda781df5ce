"""The store lease: one writer per results store.

A writer (``dkernel run`` / ``dkernel submit``) takes the lease before any cluster starts and
holds it until the store is marked ``complete`` or ``failed``. The lease is the file
``dkernel.lease`` inside the store directory; it records the holder's host, pid, start time
and a heartbeat that a background thread refreshes every :data:`HEARTBEAT_S` seconds. Zarr
ignores the file (it is not a Zarr key).

Taking the lease
    On a local disk the lease file is also locked with ``flock``: the kernel gives it to one
    process at a time and releases it when that process dies, however it dies. A second
    writer (and ``--overwrite``) is refused while the holder lives, with the holder named.
A stale lease
    is one whose holder is gone: the lease is on this host and its ``flock`` is free (the pid
    ended, or was reused by another program), its pid is dead on this host, its heartbeat is
    older than :func:`stale_after` seconds (``DKERNEL_LEASE_TIMEOUT``, default 120), or its
    heartbeat is dated more than that into the future (a skewed clock or a forged lease:
    otherwise it would stay live for ever). A stale lease is taken over by the next writer
    (``--resume`` continues the store it left).
An unusable lease
    (a directory, a symbolic link, a FIFO or device, more than :data:`MAX_LEASE_BYTES`, bytes
    that are not UTF-8 JSON, or fields of the wrong type) is never read through, waited on or
    taken over: the writer is refused at once with what is wrong and the file to remove.
The reserve
    While it holds the lease a writer also keeps :data:`RESERVE_FILE` beside it, a few
    hundred KiB set aside so that the final ``complete``/``failed`` status can still be
    written when another process fills the disk (:meth:`StoreLease.reserve`).

Where it lives
    :mod:`dkernel.storage.lease` holds the record (reading, describing and judging it) and the
    :class:`Lease` interface; :mod:`dkernel.storage.local_lease` the lease on a filesystem
    (:class:`StoreLease`), :mod:`dkernel.storage.remote_lease` the one on an object store
    (:class:`RemoteStoreLease`). This module takes either (:func:`acquire_lease`) and
    re-exports their names.

What is guaranteed where (see ``docs/store_lock.md``)
    * local disks: mutual exclusion (the lease is published with an atomic ``link`` or
      ``rename`` and held with ``flock``);
    * NFS v4 / Lustre / GPFS with working POSIX locks: the same, since ``flock`` is forwarded
      to the server;
    * filesystems without ``flock`` (NFS v3 without ``lockd``, FUSE mounts): only the
      heartbeat protects: two writers started on different hosts at the same moment can
      both start, and a holder whose heartbeat stalls for longer than the timeout loses its
      lease;
    * S3 (and S3-compatible servers that honour conditional writes): mutual exclusion. The
      lease is the object ``dkernel.lease`` in the store's prefix, created with
      ``If-None-Match: *`` and heartbeated, taken over and released with ``If-Match`` on its
      ETag (:class:`RemoteStoreLease`);
    * other object stores (GCS, Azure through fsspec), and S3 servers that refuse or ignore
      conditional writes: no atomic primitive. A store is taken only when it has no lease;
      an existing lease, live or stale, is never taken over (``--overwrite`` and
      ``--resume`` are refused, naming the lease object to remove by hand).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dkernel.storage.lease import (  # noqa: F401  (where they were)
    _LEASE_BLOCK,
    _PID_MAX,
    _TIMEOUT_ENV,
    HEARTBEAT_S,
    LEASE_FILE,
    MAX_LEASE_BYTES,
    RESERVE_FILE,
    Lease,
    _held,
    _parse,
    _Unusable,
    describe_holder,
    is_lease_file,
    lease_objects_unlisted,
    stale_after,
    why_stale,
)
from dkernel.storage.local_lease import (  # noqa: F401  (where they were)
    StoreLease,
    _flock,
    _load,
    _open_lease,
    _take_over_if_stale,
    read_lease,
)
from dkernel.storage.remote_lease import (  # noqa: F401  (where they were)
    LEASE_CALL_S,
    RemoteStoreLease,
    read_remote_lease,
)


def acquire_lease(
    store: str | Path, *, command: str = "", storage_options: dict[str, Any] | None = None
) -> StoreLease | RemoteStoreLease:
    """Take the lease of ``store``: a local directory (:class:`StoreLease`) or an
    object-store URL (:class:`RemoteStoreLease`)."""
    from dkernel.storage.remote import is_remote

    if is_remote(store):
        return RemoteStoreLease.acquire(str(store), command=command, options=storage_options)
    return StoreLease.acquire(store, command=command)
