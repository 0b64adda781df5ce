"""Creating and connecting Dask clients: the only place in dkernel that does so."""

from __future__ import annotations

import contextlib
import logging
import math
import os
import sys
import weakref
from typing import Any

from dkernel.errors import DKernelError, InvalidInputError, RuntimeConnectionError
from dkernel.runtime._main_guard import check_main_guard
from dkernel.runtime.memory import REUSE_MMAP_THRESHOLD, REUSE_TRIM_THRESHOLD

logger = logging.getLogger(__name__)

#: Most threads the embedded cluster may run per CPU core (workers × threads per worker ≤
#: ``MAX_THREADS_PER_CORE × os.cpu_count()``). More only adds processes and memory, not
#: speed: 64 workers on 2 cores grew past 6 GiB before doing any work (issue 34).
MAX_THREADS_PER_CORE = 4
#: Smallest memory limit per worker of the embedded cluster (bytes). A worker process holds
#: ~150 MiB of interpreter and libraries at rest; with less its nanny kills it as it starts
#: and the client waits for workers that never come (``memory_limit: 1kB`` hung 180 s).
MIN_WORKER_MEMORY = 256 * 2**20
#: Longest wait for a scheduler (seconds) that ``connect`` accepts.
MAX_TIMEOUT = 3600.0
#: Jobs with fewer samples (rows or pixels) than this, and an estimated peak memory below
#: :data:`IN_PROCESS_MAX_MEMORY`, are small: they run on threads of this process
#: (:class:`~dkernel.runtime.threads.InProcessScheduler`; the spec's ``runtime.in_process``, on
#: by default) unless a scheduler or a number of workers is asked for. Starting and stopping
#: process workers (each re-imports dkernel) took ~8 of the 9.4 s of ``dkernel run
#: jobs/wine-rbf-kpca.yaml``; and MSSC on the 10⁶-pixel synthetic scene of
#: ``benchmarks/bench_otb.py`` took 13.9 s in process against 29.5 s on two process workers,
#: on 4 · 10⁶ pixels 29.7 s against 39.1 s (2 CPUs; the tasks are NumPy and BLAS, which
#: release the GIL, and nothing is serialised).
IN_PROCESS_MAX_SAMPLES = 5 * 10**6
#: Largest estimated peak memory (bytes) of a small job.
IN_PROCESS_MAX_MEMORY = 2 * 2**30


def default_workers(cpu_count: int | None = None) -> tuple[int, int]:
    """(n_workers, threads_per_worker) sized to the machine: up to 4 process workers."""
    cpus = cpu_count or os.cpu_count() or 1
    n_workers = max(1, min(4, cpus))
    return n_workers, max(1, cpus // n_workers)


def runs_in_process(
    n_samples: int,
    memory_bytes: float,
    *,
    requested: bool = True,
    scheduler: str | None = None,
    n_workers: int | None = None,
) -> bool:
    """Whether a job runs on threads of this process (Dask's threaded scheduler, an
    :class:`~dkernel.runtime.threads.InProcessScheduler`) rather than on process workers.

    The default for a small job: no cluster to start or stop, which is
    most of a small job's time, and no dashboard. The threads share this process's memory
    and GIL; NumPy and the BLAS release the GIL, and the BLAS runs one thread per task as it
    does in a process worker, so the tasks give the process workers' results bit for bit.
    While the job runs this process's own BLAS runs on one thread too, so
    what a job computes outside its tasks (small eigenproblems, metrics) may differ from a
    process-worker run in the last bits (the wine job's store is the same bit for bit).

    Parameters
    ----------
    n_samples : int
        The job's rows (pixels of an image).
    memory_bytes : float
        The method's estimated peak memory (0 when it has no estimate).
    requested : bool
        The spec allows it (``runtime.in_process``, true by default; false starts process
        workers and the dashboard).
    scheduler : str, optional
        An address asked for: the job runs there, never in process.
    n_workers : int, optional
        A number of workers asked for (``--workers``, ``runtime.n_workers``): process workers.

    Returns
    -------
    bool
        True for a small job (fewer than ``IN_PROCESS_MAX_SAMPLES`` samples and at most
        ``IN_PROCESS_MAX_MEMORY`` bytes) with neither a scheduler nor a worker count asked for.

    Examples
    --------
    >>> runs_in_process(178, 2e6)
    True
    >>> runs_in_process(178, 2e6, n_workers=2)
    False
    """
    if not requested or scheduler is not None or n_workers is not None:
        return False
    return n_samples < IN_PROCESS_MAX_SAMPLES and memory_bytes <= IN_PROCESS_MAX_MEMORY


def connect(
    scheduler: str | None = None,
    n_workers: int | None = None,
    threads_per_worker: int | None = None,
    *,
    memory_limit: str | float | None = "auto",
    processes: bool = True,
    timeout: float = 10.0,
    quiet: bool = False,
    security: Any = None,
    dashboard: bool = True,
) -> Any:
    """Return a :class:`distributed.Client`.

    Parameters
    ----------
    scheduler : str, optional
        Address of a running scheduler (``tcp://host:8786``). When None, an embedded
        ``LocalCluster`` (process workers unless ``processes=False``) is started on 127.0.0.1
        (dashboard included, bound to 127.0.0.1 on a free port) and closed with the client;
        its scheduler runs with ``dkernel.runtime.connect.EMBEDDED_SCHEDULER_CONFIG`` (a
        cluster of your own keeps its own configuration).
    n_workers, threads_per_worker : int, optional
        Size of the embedded cluster; by default sized to the machine.
    memory_limit : str or float, optional
        Per-worker memory limit of the embedded cluster.
    processes : bool
        Run the embedded cluster's workers as processes (default) or as threads of this
        process. Process workers re-import the main script, so a script that starts them must
        call ``connect()`` under ``if __name__ == "__main__":``; threads need no guard but share
        the GIL. Thread workers run the BLAS on one thread while the client is open, as
        process workers do.
    timeout : float
        Seconds to wait for an existing scheduler before failing.
    quiet : bool
        Do not print the dashboard link (to stderr). ``dkernel.jobs.run_job`` passes True and
        logs the link instead.
    dashboard : bool
        Serve the embedded cluster's dashboard (importing it takes ~1 s; ``run_job`` leaves it
        out for a job small enough to run in this process). Without it there is no link to
        print.
    security : distributed.Security, optional
        TLS configuration for connecting to a secured scheduler. Connecting to the address of
        an embedded cluster of this process needs none: its credentials are used.

    Raises
    ------
    InvalidInputError
        When ``timeout`` is not a number of seconds in (0, 3600], or the embedded cluster
        would not fit the machine (``dkernel.runtime.connect.check_cluster_size``); raised
        before any connection or process starts.
    RuntimeConnectionError
        When the scheduler cannot be reached within ``timeout``.
    DKernelError
        When the embedded cluster's TLS credentials cannot be made (``cryptography`` is not
        installed).
    UnguardedMainError
        When process workers would be started from a script's top level outside
        ``if __name__ == "__main__":`` (they re-import the script); raised before any process
        starts.

    Notes
    -----
    The embedded cluster is authenticated: it listens on ``tls://127.0.0.1`` with credentials
    made for it alone (distributed's ``Security.temporary()``: a self-signed certificate and
    key held in this process's memory and handed to its workers), and accepts only clients
    that present them. Another local user, or another container sharing the host's network,
    cannot submit work to it. Its dashboard is plain HTTP on 127.0.0.1 (read-only).

    Examples
    --------
    In a script, connect under the main guard::

        import dkernel

        if __name__ == "__main__":
            with dkernel.connect() as client:
                ...
    """
    import dask
    from distributed import Client

    if scheduler is not None:
        _check_timeout(timeout)
        if security is None:
            security = _embedded_security(scheduler)
        registered = _registered_clients()
        try:
            _probe_scheduler(scheduler, security, timeout)
            client = Client(scheduler, timeout=timeout, security=security)
        except (OSError, TimeoutError, ValueError, TypeError) as exc:
            _forget_clients_since(registered)
            raise RuntimeConnectionError(
                f"could not reach the Dask scheduler at {scheduler} within {timeout:g} s ({exc}). "
                "Check the address and that `dask scheduler` is running there, or run the job "
                "on an embedded LocalCluster instead (`dkernel run JOB` without --scheduler)."
            ) from exc
    else:
        dw, dt = default_workers()
        n_workers = dw if n_workers is None else n_workers
        threads_per_worker = dt if threads_per_worker is None else threads_per_worker
        check_cluster_size(n_workers, threads_per_worker, memory_limit)
        if processes:
            check_main_guard(dask.config.get("distributed.worker.multiprocessing-method"))
        with dask.config.set(EMBEDDED_SCHEDULER_CONFIG):
            client = _local_client(
                n_workers, threads_per_worker, processes, memory_limit, dashboard=dashboard
            )
        if not dashboard:
            return client
    if not quiet:
        print(f"Dask dashboard: {client.dashboard_link}", file=sys.stderr, flush=True)
    return client


#: Scheduler settings of the embedded cluster. A worker is sent a new task without inputs (a
#: read of the image, say) only when it has a free thread, not one more (distributed's
#: default 1.1 is 2 for a one-thread worker), and no worker takes another's ready tasks: a
#: read's strips stay with the worker that read them, and each worker holds one read per
#: thread at a time in a streaming pass, not two or three (``benchmarks/results/
#: full_tile.md``). The load is balanced by handing out the reads to whichever worker is
#: free; the tasks are long enough (a strip is ~2^18 pixels) not to leave a worker idle.
#: The workers' glibc keeps one malloc arena (``MALLOC_ARENA_MAX``, set before they start):
#: freed memory in the per-thread arenas was not given back, and a worker's resting memory
#: grew with the length of a job (≈ 45 MiB more after a 3 · 10⁷-pixel MSSC than after 10⁶;
#: with one arena 0.50 instead of 0.54–0.60 GiB at the peak, the same time).
#: Their freed blocks up to 32 MiB are reused, not unmapped (``dkernel.runtime.memory``'s
#: reuse thresholds, in place of distributed's ``MALLOC_TRIM_THRESHOLD_=65536``, which turns
#: glibc's dynamic thresholds off: every block above 128 KiB was then mapped afresh, a page
#: fault per 4 KiB). The MSSC of a 9 · 10⁶-pixel scene took 44.8 s instead of 56.5–64.3 s,
#: each worker's peak 0.44 instead of 0.42 GiB at 10⁶ and 9 · 10⁶ pixels alike
#: (``benchmarks/bench_full_tile.py``, 2 workers, 2 CPUs).
#: The workers' statistical profiler (the dashboard's Profile page) files its call trees every
#: 10 s instead of every second: it keeps the last 1000 of them twice (whole worker and per
#: task), about 36 KiB a second, so a worker's memory grew by ~16 MiB in the first 450 s of
#: a 10⁸-pixel MSSC and would by ~36 MiB in a longer job. The samples are the same.
EMBEDDED_SCHEDULER_CONFIG = {
    "distributed.scheduler.worker-saturation": 1.0,
    "distributed.scheduler.work-stealing": False,
    "distributed.nanny.pre-spawn-environ.MALLOC_ARENA_MAX": 1,
    "distributed.nanny.pre-spawn-environ.MALLOC_MMAP_THRESHOLD_": REUSE_MMAP_THRESHOLD,
    "distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": REUSE_TRIM_THRESHOLD,
    "distributed.worker.profile.cycle": "10s",
}


def cluster_config_yaml() -> str:
    """:data:`EMBEDDED_SCHEDULER_CONFIG` as a Dask configuration file, for a cluster of your
    own (``dkernel cluster-config``; ``deploy/dask/dkernel.yaml`` is this text): put it where
    the scheduler's and the workers' Dask reads its configuration (``/etc/dask/``,
    ``~/.config/dask/`` or ``$DASK_CONFIG``) before they start, and they run as the embedded
    cluster does."""
    import yaml

    nested: dict[str, Any] = {}
    for dotted, value in EMBEDDED_SCHEDULER_CONFIG.items():
        # the nanny's environment names keep their dots-free spelling as one key
        head, _, env_name = dotted.partition(".pre-spawn-environ.")
        keys = [*head.split("."), "pre-spawn-environ", env_name] if env_name else dotted.split(".")
        node = nested
        for key in keys[:-1]:
            node = node.setdefault(key, {})
        node[keys[-1]] = value
    header = (
        "# Dask settings of dkernel's embedded cluster, for a scheduler and workers of your own\n"
        "# (written by `dkernel cluster-config`; why each one: dkernel.runtime.connect).\n"
        "# Put this file in /etc/dask/, ~/.config/dask/ or $DASK_CONFIG on every machine that\n"
        "# runs `dask scheduler` or `dask worker`, before they start.\n"
    )
    return header + yaml.safe_dump(nested, sort_keys=True)


class SharedCluster:
    """One embedded cluster for several jobs, started by the first job that needs one.

    ``dkernel run a.yaml b.yaml``: a small job still runs on threads of this process
    (``dkernel.runtime.connect.runs_in_process``), so a command of small jobs starts no
    cluster at all; the first job that needs process workers starts the cluster (its dashboard
    link logged once) and the later ones run on it, warm. :meth:`close` (or leaving the
    ``with`` block) closes it.

    Parameters
    ----------
    n_workers, threads_per_worker : int, optional
        Size of the cluster, as for :func:`connect`; a worker count asked for makes every job
        run on it.
    """

    def __init__(self, n_workers: int | None = None, threads_per_worker: int | None = None):
        self.n_workers = n_workers
        self.threads_per_worker = threads_per_worker
        self._client: Any = None

    @property
    def started(self) -> bool:
        """Whether a job has started the cluster."""
        return self._client is not None

    def client(self) -> Any:
        """The cluster's :class:`distributed.Client`, starting the cluster on the first call."""
        if self._client is None:
            self._client = connect(
                n_workers=self.n_workers, threads_per_worker=self.threads_per_worker, quiet=True
            )
            logger.info(
                "one cluster for the jobs of this command that need one; Dask dashboard: "
                f"{self._client.dashboard_link}"
            )
        return self._client

    def close(self) -> None:
        """Close the cluster if a job started it."""
        if self._client is not None:
            self._client.close()
            self._client = None

    def __enter__(self) -> SharedCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


#: The embedded clusters of this process by scheduler address, so that ``connect(address)``
#: (``dkernel run --scheduler`` in the same process, a test) finds their credentials.
_EMBEDDED: weakref.WeakValueDictionary[str, Any] = weakref.WeakValueDictionary()


def _local_client(
    n_workers: int, threads: int, processes: bool, memory_limit: Any, *, dashboard: bool = True
) -> Any:
    from distributed import Client

    if processes:
        _require_cryptography()
    # Thread workers talk over inproc://, which no other process can reach (and which hands
    # over the objects themselves: no serialisation, no TLS handshake; starting it takes
    # 0.02 s against 0.2 s). Process workers use TLS with credentials made for this cluster
    # alone (Security.temporary(), in memory): scheduler, workers and this client present
    # them, and nothing else is let in. Only security=True hands them to the LocalCluster the
    # client starts (an object is kept by the client for itself).
    network = {"protocol": "tls://", "security": True, "host": "127.0.0.1", "scheduler_port": 0}
    client = (Client if processes else _in_process_client_class())(
        n_workers=n_workers,
        threads_per_worker=threads,
        processes=processes,
        **(network if processes else {"protocol": "inproc://"}),
        dashboard_address="127.0.0.1:0" if dashboard else None,
        memory_limit=memory_limit,
        silence_logs=logging.ERROR,
    )
    if client.cluster is not None:
        # the address the client connected to (Client._start reads the same property)
        _EMBEDDED[client.cluster.scheduler_address] = client.cluster
    return client


def _in_process_client_class() -> type:
    """A ``Client`` whose in-process cluster runs the BLAS on one thread while it is open.

    A process worker gets ``OMP_NUM_THREADS=1`` (and the MKL/OpenBLAS equivalents) from
    distributed's ``nanny.pre-spawn-environ``; thread workers share this process, so the limit
    is set here and lifted on close: the same BLAS threading, the same results bit for bit,
    and no oversubscription of the cores.
    """
    from distributed import Client
    from threadpoolctl import threadpool_limits

    class InProcessClient(Client):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self._blas_limits = threadpool_limits(limits=1)
            try:
                super().__init__(*args, **kwargs)
            except BaseException:
                self._blas_limits.restore_original_limits()
                raise

        def close(self, *args: Any, **kwargs: Any) -> Any:
            try:
                return super().close(*args, **kwargs)
            finally:
                # once: Client.__del__ closes again when the client is collected, and a
                # second restore would reset whatever limits are in force by then
                limits, self._blas_limits = self._blas_limits, None
                if limits is not None:
                    limits.restore_original_limits()

    return InProcessClient


def _require_cryptography() -> None:
    try:
        import cryptography  # noqa: F401  (what Security.temporary() makes the keys with)
    except ImportError:
        raise DKernelError(
            "the embedded cluster needs the 'cryptography' package for its TLS credentials; "
            "install it (pip install cryptography) or connect to a scheduler of your own "
            "(--scheduler)."
        ) from None


def _probe_scheduler(address: str, security: Any, timeout: float) -> None:
    """Open one connection to ``address`` and read the scheduler's handshake within ``timeout``
    seconds, then close it.

    distributed bounds the TCP connect by the client's timeout but reads the handshake without
    one: a port that accepts and never speaks held ``Client(..., timeout=5)`` for as long as
    the peer stayed silent (issue 54). Runs its own event loop on a short-lived thread so that
    it works whether or not the caller already runs one.
    """
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    from distributed.comm import connect as comm_connect
    from distributed.security import Security

    args = (security if security is not None else Security()).get_connection_args("client")

    async def probe() -> None:
        try:
            comm = await asyncio.wait_for(comm_connect(address, timeout=timeout, **args), timeout)
        except TimeoutError:
            raise TimeoutError("no Dask scheduler answered there") from None
        await comm.close()

    pool = ThreadPoolExecutor(1, thread_name_prefix="dkernel-probe")
    try:
        pool.submit(asyncio.run, probe()).result()
    finally:  # not waited for: SIGTERM or Ctrl-C during the probe ends the job at once
        pool.shutdown(wait=False)


def _embedded_security(address: str) -> Any:
    """The credentials of this process's running embedded cluster at ``address``, or None."""
    cluster = _EMBEDDED.get(address)
    if cluster is None or getattr(getattr(cluster, "status", None), "name", "") != "running":
        return None
    return cluster.security


def check_cluster_size(
    n_workers: Any,
    threads_per_worker: Any,
    memory_limit: Any = "auto",
    *,
    cpu_count: int | None = None,
) -> None:
    """Refuse an embedded cluster this machine cannot run, before it starts.

    Parameters
    ----------
    n_workers, threads_per_worker : int
        Each an integer ≥ 1; together at most ``MAX_THREADS_PER_CORE`` (4) threads per CPU
        core of the machine (``os.cpu_count()``).
    memory_limit : str, float or None
        Per-worker limit as distributed reads it (``'auto'``, ``'4GiB'``, a fraction of the
        machine's memory ≤ 1, bytes; None or 0 for no limit); when set, at least
        ``MIN_WORKER_MEMORY`` (256 MiB) per worker.
    cpu_count : int, optional
        The machine's cores (default ``os.cpu_count()``).

    Raises
    ------
    InvalidInputError
        Naming the option (``--workers``/``runtime.n_workers``, ``--threads``/
        ``runtime.threads_per_worker``, ``runtime.memory_limit``), the allowed range and the
        value received.

    Examples
    --------
    >>> check_cluster_size(2, 1, "4GiB", cpu_count=2)
    >>> check_cluster_size(64, 1, cpu_count=2)
    Traceback (most recent call last):
    ...
    dkernel.errors.InvalidInputError: n_workers (--workers, runtime.n_workers) must be an integer in [1, 8] (4 threads per core, 2 CPU cores); got 64.
    """  # noqa: E501
    cores = cpu_count or os.cpu_count() or 1
    most = MAX_THREADS_PER_CORE * cores
    where = f"({MAX_THREADS_PER_CORE} threads per core, {cores} CPU cores)"
    for value, name, options in (
        (n_workers, "n_workers", "--workers, runtime.n_workers"),
        (threads_per_worker, "threads_per_worker", "--threads, runtime.threads_per_worker"),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= most:
            raise InvalidInputError(
                f"{name} ({options}) must be an integer in [1, {most}] {where}; got {value!r}."
            )
    if n_workers * threads_per_worker > most:
        raise InvalidInputError(
            f"{n_workers} workers × {threads_per_worker} threads = "
            f"{n_workers * threads_per_worker} threads is more than this machine runs: at most "
            f"{most} {where}. Lower --workers/--threads (runtime.n_workers/threads_per_worker)."
        )
    per_worker = _worker_memory(memory_limit, threads_per_worker, cores)
    if per_worker is not None and per_worker < MIN_WORKER_MEMORY:
        from dask.utils import format_bytes

        got, least = format_bytes(per_worker), format_bytes(MIN_WORKER_MEMORY)
        if got == least:
            got, least = f"{per_worker:,} bytes", f"{MIN_WORKER_MEMORY:,} bytes"
        raise InvalidInputError(
            f"memory_limit (runtime.memory_limit) gives each worker {got}; a worker needs at "
            f"least {least} to start. Got {memory_limit!r}; use e.g. '2GiB' or 'auto'."
        )


def _worker_memory(memory_limit: Any, threads: int, cores: int) -> int | None:
    """Bytes per worker as distributed will read ``memory_limit`` (None: no limit)."""
    if memory_limit is None:
        return None
    from distributed.worker_memory import parse_memory_limit

    if isinstance(memory_limit, bool):
        raise InvalidInputError(f"memory_limit must be a size such as '4GiB'; got {memory_limit}.")
    try:
        return parse_memory_limit(memory_limit, threads, cores, logger=logger)
    except (ValueError, TypeError, KeyError, OverflowError):
        raise InvalidInputError(
            f"memory_limit (runtime.memory_limit) must be 'auto' or a size such as '4GiB'; "
            f"got {memory_limit!r}."
        ) from None


def _check_timeout(timeout: Any) -> None:
    ok = isinstance(timeout, int | float) and not isinstance(timeout, bool)
    if not (ok and math.isfinite(timeout) and 0 < timeout <= MAX_TIMEOUT):
        raise InvalidInputError(
            f"timeout (--timeout) must be a number of seconds in (0, {MAX_TIMEOUT:g}]; "
            f"got {timeout!r}."
        )


#: Largest security config read: it holds three paths and a flag.
SECURITY_CONFIG_MAX_BYTES = 64 * 1024


def _security_error(message: str) -> Exception:
    from dkernel.errors import SpecError

    return SpecError(message, "--security-config")


def load_security(
    *,
    config: str | None = None,
    ca_file: str | None = None,
    cert: str | None = None,
    key: str | None = None,
) -> Any:
    """A :class:`distributed.Security` for TLS, from a YAML file or certificate paths.

    Parameters
    ----------
    config : str, optional
        A YAML file with keys ``tls_ca_file``, ``tls_client_cert``, ``tls_client_key`` (paths
        relative to the file) and optionally ``require_encryption`` (default true). The format
        is documented in ``deploy/tls/README.md``.
    ca_file, cert, key : str, optional
        Paths of the CA certificate, the client certificate and its key (``--tls-*`` flags);
        they override the file's entries.

    Returns
    -------
    distributed.Security or None
        None when nothing was given.

    Raises
    ------
    SpecError
        When the file does not parse, holds unknown keys, or a certificate file is missing.
    """
    from pathlib import Path

    from dkernel.errors import SpecError

    if config is None and not (ca_file or cert or key):
        return None
    settings: dict[str, Any] = {"require_encryption": True}
    base = Path.cwd()
    if config is not None:
        import yaml

        from dkernel.io.files import read_bounded

        path = Path(config)
        if not path.exists():
            raise SpecError(f"security config {config} does not exist.", "--security-config")
        text = read_bounded(
            path, SECURITY_CONFIG_MAX_BYTES, "security config", error=_security_error
        )
        allowed = {"tls_ca_file", "tls_client_cert", "tls_client_key", "require_encryption"}
        # never echo the file: given a key or certificate by mistake, the message must not
        # print the secret
        if b"-----BEGIN" in text:
            raise _security_error(
                f"security config {config} is a PEM certificate or key, not the YAML file that "
                f"names them (keys {sorted(allowed)}); pass the key with --tls-key."
            )
        try:
            raw = yaml.safe_load(text.decode("utf-8")) or {}
        except (yaml.YAMLError, UnicodeDecodeError):
            raise _security_error(
                f"security config {config} is not valid YAML (a mapping with keys "
                f"{sorted(allowed)})."
            ) from None
        if not isinstance(raw, dict):
            raise _security_error(
                f"security config {config} must be a mapping with keys {sorted(allowed)}; it "
                f"holds a {type(raw).__name__}."
            )
        unknown = sorted(str(k)[:40] for k in set(raw) - allowed)
        if unknown:
            raise _security_error(
                f"security config {config}: unknown keys {unknown}; allowed: {sorted(allowed)}."
            )
        for name in ("tls_ca_file", "tls_client_cert", "tls_client_key"):
            if name in raw and not isinstance(raw[name], str):
                raise _security_error(
                    f"security config {config}: {name} must be one file path (a string); it "
                    f"holds a {type(raw[name]).__name__}."
                )
        if not isinstance(raw.get("require_encryption", True), bool):
            raise _security_error(
                f"security config {config}: require_encryption must be true or false."
            )
        settings.update(raw)
        base = path.resolve().parent
    for name, value in (
        ("tls_ca_file", ca_file),
        ("tls_client_cert", cert),
        ("tls_client_key", key),
    ):
        if value:
            settings[name] = value
            if config is None:
                base = Path.cwd()
    missing = [
        n for n in ("tls_ca_file", "tls_client_cert", "tls_client_key") if not settings.get(n)
    ]
    if missing:
        raise SpecError(
            f"TLS needs a CA certificate, a client certificate and its key; missing {missing}. "
            "Pass --tls-ca-file/--tls-cert/--tls-key or a --security-config file.",
            "--security-config",
        )
    for name in ("tls_ca_file", "tls_client_cert", "tls_client_key"):
        p = Path(settings[name])
        p = p if p.is_absolute() else base / p
        if not p.is_file():
            raise SpecError(f"{name}: file {p} does not exist.", "--security-config")
        settings[name] = str(p)
    from distributed.security import Security

    return Security(**settings)


def _registered_clients() -> set:
    from distributed import client as dclient

    return set(dclient._global_clients)


def _forget_clients_since(before: set) -> None:
    """Drop clients registered after ``before`` by a failed ``Client(...)``.

    distributed registers a client as the default before it connects; a failed connection
    would otherwise stay the default and later ``compute()`` calls would go to it.
    """
    from distributed import client as dclient

    for key in set(dclient._global_clients) - before:
        stale = dclient._global_clients.pop(key, None)
        if stale is not None:
            with contextlib.suppress(Exception):
                stale.close(timeout=1)
