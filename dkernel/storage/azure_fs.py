"""Azure Blob file systems whose every request is bounded.

adlfs passes its ``connection_timeout`` / ``read_timeout`` only to the blob reads and writes
(``cat``, ``pipe``, ``get``, ``put``); listings, ``info``, deletes and container calls keep the
Azure SDK's transport default (300 s for an answer; ``benchmarks/results/stalled_az.md``),
and the SDK's storage retry policy waits 15, 18 and 24 s between its four tries. :class:`BoundedAzureBlobFileSystem` gives the service
client itself those timeouts, so they are the transport's defaults for every request its
container and blob clients make, and a retry policy whose waits are those of s3fs and gcsfs
(seconds, not tens of seconds). Without timeouts it is adlfs's file system unchanged.

:func:`use_bounded_azure` makes it the ``az://``, ``abfs://`` and ``abfss://`` implementation
of fsspec in this process, which Zarr and xarray open stores through; a file system pickled
to a Dask worker keeps its class.
"""

from __future__ import annotations

import functools
from typing import Any

from adlfs import AzureBlobFileSystem

#: The storage retry policy of a bounded client: 3 retries, after about 2, 4 and 6 s.
RETRY_POLICY: dict[str, int] = {
    "retry_total": 3,
    "initial_backoff": 2,
    "increment_base": 2,
    "random_jitter_range": 1,
}
#: adlfs's per-call timeouts that become the client's transport defaults.
_TRANSPORT_LIMITS = ("connection_timeout", "read_timeout")


class BoundedAzureBlobFileSystem(AzureBlobFileSystem):
    """adlfs's file system, with its connect and read timeouts on every request."""

    service_client: Any

    def do_connect(self) -> None:
        super().do_connect()
        limits = {k: v for k, v in self._timeout_kwargs.items() if k in _TRANSPORT_LIMITS}
        if not limits:
            return
        from adlfs.spec import _USER_AGENT
        from azure.storage.blob.aio import BlobServiceClient

        given = self.service_client
        options: dict[str, Any] = {"user_agent": _USER_AGENT, **limits, **RETRY_POLICY}
        if self.location_mode is not None:
            options["_location_mode"] = self.location_mode
        # the client adlfs built (from a connection string, a key, a SAS token or a
        # credential) carries its URL (with any SAS) and credential: the same account
        self.service_client = BlobServiceClient(
            account_url=given.url, credential=given.credential, **options
        )


@functools.cache
def use_bounded_azure() -> None:
    """Register :class:`BoundedAzureBlobFileSystem` for fsspec's Azure schemes (once)."""
    import fsspec

    for scheme in ("az", "abfs", "abfss"):
        fsspec.register_implementation(scheme, BoundedAzureBlobFileSystem, clobber=True)
