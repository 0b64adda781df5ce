"""S3 requests bounded as a whole: an endpoint that stalls fails a request, it does not hold it.

botocore's ``read_timeout`` bounds the wait for the next bytes of an answer, yet a PUT sent to
an endpoint that stops answering (accepts the bytes, never replies) waited past it: measured,
a 100-byte chunk write to such an endpoint was still waiting after 120 s with a 3 s read
timeout, and a job writing its results store hung for as long as the endpoint stalled (28
minutes in the issue's probe). :class:`BoundedSession` is the HTTP session of the S3 clients
dkernel configures (``http_session_cls`` of aiobotocore's config, set by
:func:`dkernel.storage.remote.storage_options`): each request is given up after its connect and
read timeouts plus the time its body needs at :data:`MIN_UPLOAD_RATE`, raising
:class:`TimeoutError`, which s3fs retries (at most five times) and then reports. The class is
named in the storage options, so the file systems the job's Dask workers rebuild from them
(process workers unpickle the Zarr arrays they write) get it too.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiobotocore.httpsession import AIOHTTPSession  # type: ignore[import-untyped]

#: Slowest upload that is still progress (bytes per second): a request's bound grows with
#: its body at this rate (a 128 MiB chunk: 34 minutes at most).
MIN_UPLOAD_RATE = 64 * 1024


def request_bound(connect_s: float | None, read_s: float | None, body_bytes: int) -> float:
    """Seconds one request may take: connecting, sending ``body_bytes`` at
    :data:`MIN_UPLOAD_RATE`, and waiting for the answer (botocore's defaults, 60 s, where a
    timeout is not set)."""
    return (connect_s or 60.0) + (read_s or 60.0) + body_bytes / MIN_UPLOAD_RATE


def _body_bytes(request: Any) -> int:
    body = getattr(request, "body", None)
    if isinstance(body, bytes | bytearray | memoryview):
        return len(body)
    try:
        return int(request.headers.get("Content-Length") or 0)
    except (TypeError, ValueError):
        return 0


class BoundedSession(AIOHTTPSession):
    """aiobotocore's HTTP session, each request bounded as a whole (:func:`request_bound`)."""

    async def send(self, request: Any) -> Any:
        timeout = self._timeout  # aiohttp.ClientTimeout(sock_connect=, sock_read=)
        bound = request_bound(timeout.sock_connect, timeout.sock_read, _body_bytes(request))
        try:
            return await asyncio.wait_for(super().send(request), bound)
        except TimeoutError:
            raise TimeoutError(
                f"the S3 endpoint did not answer {request.method} {request.url.split('?')[0]} "
                f"within {bound:.0f} s"
            ) from None
