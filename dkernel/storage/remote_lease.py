"""A lease on an object store: the object ``dkernel.lease`` in the store's prefix, written
with conditional requests where the server honours them (:class:`RemoteStoreLease`)."""

from __future__ import annotations

import contextlib
import logging
import time
import uuid
from typing import Any

from dkernel.errors import StoreError
from dkernel.storage.lease import (
    LEASE_FILE,
    MAX_LEASE_BYTES,
    Lease,
    _encode,
    _held,
    _holder_info,
    _parse,
    _Unusable,
    describe_holder,
    stale_after,
    why_stale,
)

# the lease's messages keep the logger they had when this was part of dkernel.storage.lock
logger = logging.getLogger("dkernel.storage.lock")

#: Longest one call on the lease object may take (seconds): an object store that stalls
#: (stops answering without closing) fails the call, it does not hold the heartbeat or the
#: job's release (botocore's read timeout does not bound a PUT waiting for its answer).
LEASE_CALL_S = 20.0


def _call(fs: Any, method: str, *args: Any, deadline: float | None = None, **kwargs: Any) -> Any:
    """``fs.method(*args, **kwargs)``, given up after :data:`LEASE_CALL_S` seconds, or at
    ``deadline`` (``time.monotonic()``) when that comes first (``TimeoutError``), on an
    asynchronous file system (s3fs, gcsfs, adlfs)."""
    timeout = LEASE_CALL_S
    if deadline is not None:
        timeout = min(timeout, deadline - time.monotonic())
        if timeout <= 0:
            raise TimeoutError(f"no time left for {method} on the lease object")
    coroutine = getattr(fs, f"_{method}", None)
    if not getattr(fs, "async_impl", False) or coroutine is None:
        return getattr(fs, method)(*args, **kwargs)
    from fsspec.asyn import sync

    return sync(fs.loop, coroutine, *args, timeout=timeout, **kwargs)


class _Precondition(Exception):
    """The object store refused a conditional write: the condition does not hold."""


class _NoConditions(Exception):
    """The object store does not support conditional writes."""


def _classify(exc: BaseException) -> BaseException:
    """``exc`` from s3fs/botocore as :class:`_Precondition` (HTTP 412), :class:`_NoConditions`
    (501, or an argument the server does not know), or itself."""
    seen: set[int] = set()
    error: BaseException | None = exc
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        response = getattr(error, "response", None)
        if isinstance(response, dict):
            code = str(response.get("Error", {}).get("Code", ""))
            http = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if code in ("PreconditionFailed", "ConditionalRequestConflict") or http in (409, 412):
                return _Precondition(code)
            if code in ("NotImplemented", "InvalidArgument") or http == 501:
                return _NoConditions(code)
        text = str(error)
        if "pre-condition" in text or "PreconditionFailed" in text or "412" in text:
            return _Precondition(text)
        if "NotImplemented" in text or "not implemented" in text.lower():
            return _NoConditions(text)
        error = error.__cause__ or error.__context__
    return exc


class RemoteStoreLease(Lease):
    """The lease of a store on an object store, held by this process (:meth:`acquire`).

    On S3 the lease object is written with conditional requests: created only when absent
    (``If-None-Match: *``), rewritten (heartbeat, takeover) and deleted only while its ETag
    is the one this holder last saw (``If-Match``). Two writers cannot both hold it. Where
    the server has no conditional writes the lease is advisory (see the module docstring).
    """

    # a heartbeat that fails (the network, the server) is tried again at the next beat
    _beat_errors = (Exception,)

    def __init__(
        self, store: str, fs: Any, key: str, info: dict[str, Any], etag: str | None, atomic: bool
    ) -> None:
        self.store = store
        self._fs = fs
        self._key = key
        self.info = info
        self._etag = etag
        self.atomic = atomic
        #: set when another writer took the lease over (this holder's heartbeat was refused)
        self.lost = False
        self._released = False
        self._start_heartbeat()

    @property
    def path(self) -> str:
        return f"{self.store}/{LEASE_FILE}"

    @classmethod
    def acquire(
        cls, store: str, *, command: str = "", options: dict[str, Any] | None = None
    ) -> RemoteStoreLease:
        """Take the lease of the store at the URL ``store``.

        Raises
        ------
        StoreError
            When a live writer holds it (naming it); when the backend has no conditional
            writes and a lease exists; when the lease object is unusable or cannot be written.
        """
        from dkernel.storage.remote import describe_error, filesystem

        # bounded connect and read: a stalled endpoint fails a heartbeat, it does not hold it
        fs, root = filesystem(store, options, purpose="lease")
        key = f"{root}/{LEASE_FILE}"
        info = _holder_info(command)
        try:
            if not (hasattr(fs, "call_s3") and _honours_conditions(fs, root)):
                return cls._acquire_plain(store, fs, key, info)
            for _ in range(20):
                try:
                    etag = _put(fs, key, _encode(info), IfNoneMatch="*")
                except _Precondition:
                    taken = cls._take_over(store, fs, key, info)
                    if taken is None:
                        continue  # the lease vanished or changed meanwhile: try again
                    return cls(store, fs, key, info, taken, atomic=True)
                return cls(store, fs, key, info, etag, atomic=True)
            raise StoreError(f"could not take the lease of {store}: it keeps changing; retry.")
        except StoreError:
            raise
        except Exception as exc:  # noqa: BLE001  (botocore: one line, no options)
            raise StoreError(
                f"cannot write the lease of the results store {store}: {describe_error(exc)}."
            ) from None

    @classmethod
    def _take_over(cls, store: str, fs: Any, key: str, info: dict[str, Any]) -> str | None:
        """Replace the lease at ``key`` by ours when its writer is gone; our new ETag, or None
        when it vanished or changed meanwhile. Raises when a live writer holds it."""
        bucket, path = key.split("/", 1)
        try:
            got = _call(fs, "call_s3", "get_object", Bucket=bucket, Key=path)
        except FileNotFoundError:
            return None
        etag = got["ETag"]
        from fsspec.asyn import sync

        # the body and its ETag come from one response: what is judged is what is replaced
        body = got["Body"]
        try:
            data = sync(fs.loop, body.read, MAX_LEASE_BYTES + 1, timeout=LEASE_CALL_S)
        finally:
            body.close()
        try:
            if len(data) > MAX_LEASE_BYTES:
                raise _Unusable(f"is more than {MAX_LEASE_BYTES:,} bytes long")
            previous = _parse(data)
        except _Unusable as exc:
            raise StoreError(
                f"the lease object {store}/{LEASE_FILE} of the results store {store} "
                f"{exc.problem}, so whether another job is writing the store cannot be told. "
                "If no dkernel job is writing it, remove that object and run again; "
                "--resume continues the store."
            ) from None
        reason = why_stale(previous)
        if reason is None:
            raise _held(store, previous)
        info["took_over"] = {k: previous.get(k) for k in ("host", "pid", "started_iso")}
        info["took_over"]["reason"] = reason
        try:
            return _put(fs, key, _encode(info), IfMatch=etag)
        except _Precondition:
            info.pop("took_over", None)
            return None

    @classmethod
    def _acquire_plain(
        cls, store: str, fs: Any, key: str, info: dict[str, Any]
    ) -> RemoteStoreLease:
        """No conditional writes: take the lease only when there is none."""
        if _call(fs, "exists", key):
            try:
                previous: dict[str, Any] | None = _load(fs, key)
            except _Unusable:
                previous = None
            raise StoreError(
                f"{store} has a lease ({describe_holder(previous)}) and its object store has no "
                "conditional writes, so dkernel cannot take it over safely, whether its writer "
                f"lives or not. If no dkernel job is writing the store, remove {store}/"
                f"{LEASE_FILE} and run again (--resume continues the store)."
            )
        _call(fs, "pipe_file", key, _encode(info))
        time.sleep(0.2)  # a writer that raced us: the last write wins, and we re-read it
        if _load(fs, key).get("token") != info["token"]:
            current = read_remote_lease(fs, key)
            raise _held(store, current)
        return cls(store, fs, key, info, None, atomic=False)

    def _write(self) -> None:
        with self._lock:
            if self._released or self.lost:
                return
            if self._etag is None:
                _call(self._fs, "pipe_file", self._key, _encode(self.info))
                return
            try:
                self._etag = _put(self._fs, self._key, _encode(self.info), IfMatch=self._etag)
            except _Precondition:
                self.lost = True
                logger.error(
                    f"the lease of {self.store} was taken over by another writer; this job "
                    "no longer holds it and will not mark the store complete"
                )

    def check_held(self) -> None:
        """Raise :class:`StoreError` when another writer took the lease over."""
        if self.lost:
            raise StoreError(
                f"the lease of {self.store} was taken over by another writer while this job "
                "ran (its heartbeat stalled for longer than the timeout); not marking it."
            )

    def reserve(self, n_bytes: int) -> bool:
        """Nothing to set aside on an object store (it does not fill up): True."""
        return True

    def free_reserve(self, keep: int = 0) -> None:
        """Nothing was set aside (see :meth:`reserve`)."""

    def release(self) -> None:
        """Give the lease up: delete the lease object while it is still ours.

        Everything the release does shares one deadline, :data:`LEASE_CALL_S` from now: the
        wait for a heartbeat under way and each call on the lease object (the conditional
        delete, or the read and the delete where the store has no conditions). When the
        object store stalls the lease is left to expire (a later job takes it over) rather
        than the job waiting on it: the release never takes longer than that one limit."""
        deadline = time.monotonic() + LEASE_CALL_S
        self._stop.set()
        if not self._lock.acquire(timeout=LEASE_CALL_S):
            self._released = True
            self._release_timed_out()
            return
        try:
            self._release_locked(deadline)
        finally:
            self._lock.release()

    def _release_timed_out(self) -> None:
        logger.warning(
            f"could not release the lease of {self.store}: its object store did not answer "
            f"within {LEASE_CALL_S:g} s; the lease expires after {stale_after():.0f} s"
        )

    def _release_locked(self, deadline: float) -> None:
        if self._released:
            return
        self._released = True
        if self.lost:
            return
        bucket, path = self._key.split("/", 1)
        try:
            if self._etag is not None:
                try:
                    _call(
                        self._fs,
                        "call_s3",
                        "delete_object",
                        Bucket=bucket,
                        Key=path,
                        IfMatch=self._etag,
                        deadline=deadline,
                    )
                    self._fs.invalidate_cache(self._key)
                    return
                except Exception as exc:  # noqa: BLE001
                    if isinstance(_classify(exc), _Precondition):
                        return  # not ours any more
                    if isinstance(exc, TimeoutError):
                        raise
            current = read_remote_lease(self._fs, self._key, deadline=deadline)
            if current is not None and current.get("token") == self.info["token"]:
                _call(self._fs, "rm_file", self._key, deadline=deadline)
        except TimeoutError:
            self._release_timed_out()  # the store stalls: the lease expires
        except Exception:  # noqa: BLE001,S110  (best effort: a lease left behind expires)
            pass


def read_remote_lease(fs: Any, key: str, *, deadline: float | None = None) -> dict[str, Any] | None:
    """The lease object at ``key`` of ``fs`` (None when there is none or it is unusable).
    With a ``deadline`` (``time.monotonic()``), a call not answered by then raises
    ``TimeoutError`` instead."""
    try:
        return _load(fs, key, start=0, end=MAX_LEASE_BYTES, deadline=deadline)
    except TimeoutError:
        if deadline is None:
            return None
        raise
    except Exception:  # noqa: BLE001
        return None


def _load(fs: Any, key: str, *, deadline: float | None = None, **window: int) -> dict[str, Any]:
    """The lease object at ``key`` of ``fs``, read (``window``: its first bytes) and parsed;
    the call given up at ``deadline`` (:func:`_call`).

    Raises :class:`~dkernel.storage.lease._Unusable` when it is not a lease."""
    data = _call(fs, "cat_file", key, deadline=deadline, **window)
    return _parse(data)


def _honours_conditions(fs: Any, root: str) -> bool:
    """Whether the S3 server behind ``fs`` refuses a second ``If-None-Match: *`` create of
    one object. A server that ignores the condition would let two writers both create the
    lease, so this is found out on a probe object of this process, never on the lease."""
    probe = f"{root}/.{LEASE_FILE}.probe-{uuid.uuid4().hex}"
    try:
        _put(fs, probe, b"", IfNoneMatch="*")
        try:
            _put(fs, probe, b"", IfNoneMatch="*")
        except _Precondition:
            return True
        logger.warning(
            f"the object store of s3://{root} ignores conditional writes: a lease is taken "
            "only where there is none, and never taken over"
        )
        return False
    except _NoConditions:
        return False
    finally:
        with contextlib.suppress(Exception):
            _call(fs, "rm_file", probe)


def _put(fs: Any, key: str, data: bytes, **condition: Any) -> str:
    """A conditional PUT of ``data`` at ``key``; its ETag. Raises :class:`_Precondition` or
    :class:`_NoConditions`."""
    bucket, path = key.split("/", 1)
    try:
        response = _call(
            fs, "call_s3", "put_object", Bucket=bucket, Key=path, Body=data, **condition
        )
    except Exception as exc:  # noqa: BLE001
        raise _classify(exc) from exc
    fs.invalidate_cache(key)
    return str(response["ETag"])
