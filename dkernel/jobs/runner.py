"""Running a job: the stages of :mod:`dkernel.jobs.stages` from the spec to a complete store."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dkernel.jobs.cluster import (  # noqa: F401  (re-exported)
    IN_PROCESS_SCHEDULER,
    _close_quietly,
    runtime_info,
)
from dkernel.jobs.failures import RESERVE_BYTES, JobFailedError  # noqa: F401  (re-exported)
from dkernel.jobs.prepare import (  # noqa: F401  (re-exported: the pre-cluster checks)
    check_cost,
    check_finite,
    load_data,
    prepare_job,
)
from dkernel.jobs.spec import JobSpec, OutputPolicy
from dkernel.jobs.stages import RUN, Plan, RunOptions, run_stages

if TYPE_CHECKING:
    from dkernel.runtime.connect import SharedCluster

logger = logging.getLogger(__name__)


def run_job(
    spec: JobSpec | str | Path,
    *,
    scheduler: str | None = None,
    n_workers: int | None = None,
    threads_per_worker: int | None = None,
    output: str | Path | None = None,
    overwrite: bool = False,
    resume: bool = False,
    progress: bool = True,
    quiet: bool = False,
    client: Any = None,
    cluster: SharedCluster | None = None,
    timeout: float = 10.0,
    security: Any = None,
    output_policy: OutputPolicy | None = None,
) -> Path | str:
    """Run a job end to end and return the path (or URL) of its complete results store.

    Parameters
    ----------
    spec : JobSpec or path
        A validated spec or the path of a YAML spec.
    scheduler : str, optional
        Address of a running Dask scheduler; an embedded LocalCluster otherwise.
    n_workers, threads_per_worker : int, optional
        Size of the embedded cluster (default: the spec's ``runtime``, else the machine).
    output : path or URL, optional
        Overrides the spec's ``output`` (not subject to ``output_policy``: the caller chose it).
        A URL (``s3://bucket/x.zarr``) writes the store to an object store, with the spec's
        ``store_options`` or the environment's credentials.
    overwrite : bool
        Replace an existing complete store.
    resume : bool
        Continue an unfinished store of the same spec: finished groups are kept, interrupted
        ones write only their missing chunks. Without a store to resume the job starts
        fresh; a store of a different spec is refused (use ``overwrite``).
    progress : bool
        Show progress bars.
    quiet : bool
        Do not log the dashboard link of the cluster the job starts or connects to.
    client : distributed.Client, optional
        Use this client instead of creating one (notebooks, tests).
    cluster : SharedCluster, optional
        Several jobs' cluster: a job that is not small runs on it (and starts it if no job has).
    timeout : float
        Seconds to wait for ``scheduler``.
    security : distributed.Security, optional
        TLS settings for ``scheduler`` (see ``dkernel.runtime.load_security``).
    output_policy : OutputPolicy, optional
        Confine the spec's ``output`` to these roots (the CLI always passes one).

    Raises
    ------
    SpecError, InvalidInputError, ResourceLimitError, StoreError
        Invalid spec, data, output or limits: raised before any cluster starts or store is
        written.
    JobFailedError
        The method failed while running; the store is marked ``failed`` with the error.

    Notes
    -----
    What the job does is logged (INFO) to the ``dkernel.jobs`` loggers: the ``dkernel``
    command shows it; in Python, ``logging.basicConfig(level="INFO")`` does.
    Root attributes record per-phase wall times (``timings``) and, from the scheduler, the
    number of tasks run and the peak memory of each worker (``resources``).
    """
    options = RunOptions(
        scheduler=scheduler,
        n_workers=n_workers,
        threads_per_worker=threads_per_worker,
        output=output,
        overwrite=overwrite,
        resume=resume,
        progress=progress,
        quiet=quiet,
        client=client,
        cluster=cluster,
        timeout=timeout,
        security=security,
        output_policy=output_policy,
    )
    plan = run_stages(Plan(spec, options), RUN)
    logger.info(f"complete in {time.perf_counter() - plan.t_start:.1f} s: {plan.job.output}")
    return plan.job.output


def __getattr__(name: str) -> Any:
    if name == "HANDLES_MISSING":  # re-exported, built when read (dkernel.jobs.prepare)
        from dkernel.jobs import prepare

        return prepare.handles_missing()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
