"""Creating and connecting Dask clients: the only place in dkernel that does so."""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

from dkernel.errors import RuntimeConnectionError


def default_workers(cpu_count: int | None = None) -> tuple[int, int]:
    """(n_workers, threads_per_worker) sized to the machine: up to 4 process workers."""
    cpus = cpu_count or os.cpu_count() or 1
    n_workers = max(1, min(4, cpus))
    return n_workers, max(1, cpus // n_workers)


def connect(
    scheduler: str | None = None,
    n_workers: int | None = None,
    threads_per_worker: int | None = None,
    *,
    memory_limit: str | float | None = "auto",
    timeout: float = 10.0,
    quiet: bool = False,
    security: Any = None,
) -> Any:
    """Return a :class:`distributed.Client`.

    Parameters
    ----------
    scheduler : str, optional
        Address of a running scheduler (``tcp://host:8786``). When None, an embedded
        ``LocalCluster`` of process workers is started on 127.0.0.1 (dashboard included,
        bound to 127.0.0.1 on a free port) and closed with the client.
    n_workers, threads_per_worker : int, optional
        Size of the embedded cluster; by default sized to the machine.
    memory_limit : str or float, optional
        Per-worker memory limit of the embedded cluster.
    timeout : float
        Seconds to wait for an existing scheduler before failing.
    quiet : bool
        Do not print the dashboard link.
    security : distributed.Security, optional
        TLS configuration for connecting to a secured scheduler.

    Raises
    ------
    RuntimeConnectionError
        When the scheduler cannot be reached within ``timeout``.
    """
    from distributed import Client

    if scheduler is not None:
        try:
            client = Client(scheduler, timeout=timeout, security=security)
        except (OSError, TimeoutError) as exc:
            raise RuntimeConnectionError(
                f"could not reach the Dask scheduler at {scheduler} within {timeout:g} s ({exc}). "
                "Check the address and that `dask scheduler` is running, or drop --scheduler to "
                "use an embedded LocalCluster."
            ) from exc
    else:
        dw, dt = default_workers()
        client = Client(
            n_workers=n_workers or dw,
            threads_per_worker=threads_per_worker or dt,
            processes=True,
            host="127.0.0.1",
            scheduler_port=0,
            dashboard_address="127.0.0.1:0",
            memory_limit=memory_limit,
            silence_logs=logging.ERROR,
        )
    if not quiet:
        print(f"Dask dashboard: {client.dashboard_link}", file=sys.stderr, flush=True)
    return client


def compute_with_progress(obj: Any, client: Any, *, show: bool = True) -> Any:
    """Compute a Dask collection (or Delayed) on ``client``, with a progress bar when ``show``."""
    from distributed import progress

    future = client.compute(obj)
    if show:
        progress(future, notebook=False)
        print(file=sys.stderr, flush=True)
    return future.result()
