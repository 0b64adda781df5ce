"""A job as one list of named stages that build one :class:`Plan`, read top to bottom here.

``dkernel validate`` runs :data:`VALIDATE` (the stages up to the output checks; nothing is
written, no cluster starts), ``dkernel run`` and :func:`~dkernel.jobs.runner.run_job` run
:data:`RUN`, all of them::

    parse → validate → resolve paths → open and check data → estimate cost → check outputs →
    lease → runtime → store → compute → write → finish

Each concern is checked once, in its stage: the spec is read once (parse), the method's cost
estimated once (estimate cost; later stages read ``plan.cost``: the runtime's choice of
threads or processes, the cluster's memory cap, a full disk's message). A stage that holds
something until the job ends (the lease, the runtime, the store) registers its release on
``plan.exit``, so the later stages' failures release them in the reverse order.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from contextlib import ExitStack, nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dkernel._budget import SizeLimit, format_size, memory_limit
from dkernel.errors import DKernelError
from dkernel.jobs.map_files import check_raster_outputs, check_side_outputs, prefetch_map_writers
from dkernel.jobs.outputs import write_outputs
from dkernel.jobs.prepare import check_cost, estimate_cost, open_data
from dkernel.jobs.registry import get_method
from dkernel.jobs.spec import JobSpec, OutputPolicy, load_spec
from dkernel.jobs.types import Cost, JobContext, Method, Output, StoreView
from dkernel.runtime.persist import graphs_may_carry
from dkernel.storage.paths import check_writable
from dkernel.storage.remote import Location, as_location, check_job_store, is_remote

# the stages from the lease on import what they need when they run: ``dkernel validate`` runs
# the others without Dask, Zarr or scikit-learn (tests/test_cli_imports.py)
if TYPE_CHECKING:
    from dkernel.io.data import LoadedData
    from dkernel.jobs.failures import FailureRecorder
    from dkernel.runtime.connect import SharedCluster
    from dkernel.runtime.threads import InProcessScheduler
    from dkernel.storage.store import ResultsStore

# the job's log lines keep the logger name they have always had (``--log-json`` readers)
logger = logging.getLogger("dkernel.jobs.runner")


@dataclass
class RunOptions:
    """What the caller asks beyond the spec (:func:`~dkernel.jobs.runner.run_job`'s keywords)."""

    scheduler: str | None = None
    n_workers: int | None = None
    threads_per_worker: int | None = None
    output: str | Path | None = None
    overwrite: bool = False
    resume: bool = False
    progress: bool = True
    quiet: bool = False
    client: Any = None
    cluster: SharedCluster | None = None
    timeout: float = 10.0
    security: Any = None
    output_policy: OutputPolicy | None = None
    with_data: bool = True  # ``dkernel validate --no-data``: False
    writes: bool = True  # ``dkernel validate``: False (an existing store is run's question)


@dataclass
class Plan:
    """One job as the stages build it; each field is set by the stage named beside it."""

    source: JobSpec | str | Path
    options: RunOptions = field(default_factory=RunOptions)
    exit: ExitStack = field(default_factory=ExitStack)
    t_start: float = field(default_factory=time.perf_counter)
    raw: Any = None  # parse
    spec: JobSpec | None = None  # validate
    method: Method | None = None  # validate
    output: Location | None = None  # resolve paths
    chosen: bool = False  # resolve paths: the caller chose the output
    data: LoadedData | None = None  # open and check data
    cost: Cost | None = None  # estimate cost
    lease: Any = None  # lease
    resume: bool = False  # lease: a store to continue was found under it
    client: Any = None  # runtime
    threads: InProcessScheduler | None = None  # runtime
    store: ResultsStore | None = None  # store
    ctx: JobContext | None = None  # compute
    outputs: Iterable[Output] | None = None  # compute
    recorder: FailureRecorder | None = None  # store
    monitoring: ExitStack | None = None  # compute: the resource monitor, closed by write

    @property
    def job(self) -> JobSpec:
        """The validated spec, its ``output`` the resolved one (from stage resolve paths)."""
        assert self.spec is not None, "the validate stage has not run"
        return self.spec


Stage = tuple[str, Callable[[Plan], None]]


# ------------------------------------------------------------------------------------------
# the stages, in order
# ------------------------------------------------------------------------------------------


def parse(plan: Plan) -> None:
    """Read the spec's file once (a :class:`JobSpec` given is taken as it is)."""
    if not isinstance(plan.source, JobSpec):
        plan.spec = load_spec(plan.source)


def validate(plan: Plan) -> None:
    """The method the validated spec names (its params checked with the spec)."""
    if plan.spec is None:
        assert isinstance(plan.source, JobSpec)
        plan.spec = plan.source
    plan.method = get_method(plan.spec.method)


def resolve_paths(plan: Plan) -> None:
    """Where the store goes: the caller's ``output`` (not confined: the caller chose it), else
    the spec's, confined by ``output_policy``; ``memory://`` is refused (the store would vanish
    with the process)."""
    spec, options = plan.job, plan.options
    if options.output is not None:
        output = as_location(options.output)
        check_job_store(output)
    elif options.output_policy is not None:
        output = options.output_policy.confine(spec.output)
    else:
        output = spec.output
    plan.chosen = options.output is not None or options.output_policy is not None
    plan.output = output
    plan.spec = replace(spec, output=output)


def open_and_check_data(plan: Plan) -> None:
    """Read the data, check it (finite, the method's shape rules)."""
    if plan.options.with_data:
        plan.data = open_data(plan.job)


def estimate(plan: Plan) -> None:
    """The method's cost, estimated once, against the spec's limits (and the free space where
    the output goes when the caller chose it)."""
    if plan.data is None:
        return
    plan.cost = estimate_cost(plan.job, plan.data)
    check_cost(plan.job, plan.data, plan.cost, output=plan.output if plan.chosen else None)


def check_outputs(plan: Plan) -> None:
    """The store's target and the files beside it, before any lease or cluster: an object
    store is reached (bounded time) before anything else reads or writes it; the image
    outputs asked for must be ones the data can give (segments need a georeferenced image)."""
    spec, output, options = plan.job, plan.output, plan.job.store_options
    assert output is not None
    remote = is_remote(output)
    if remote:
        check_writable(output, options)
    if plan.options.writes:  # an existing store: may it be replaced (`dkernel run` only)
        from dkernel.storage.store import check_target

        replace_store = plan.options.overwrite or plan.options.resume
        check_target(output, overwrite=replace_store, storage_options=options)
    if not remote:
        check_writable(output)
    if plan.data is not None:
        check_raster_outputs(spec.params, plan.data)
        check_side_outputs(output, spec.params, plan.data, options)


def lease(plan: Plan) -> None:
    """One writer per store: the lease is held until the store is marked complete or failed (a
    live holder is refused, naming it). Under it the target is checked again (another writer
    may have finished meanwhile), and a resume against the stored spec, seed and metadata."""
    from dkernel.storage.lock import acquire_lease
    from dkernel.storage.store import check_resumable, check_target

    spec = plan.job
    options = spec.store_options
    plan.lease = acquire_lease(
        spec.output, command=f"dkernel job {spec.name!r}", storage_options=options
    )
    plan.exit.callback(plan.lease.release)
    if plan.lease.info.get("took_over"):
        old = plan.lease.info["took_over"]
        logger.info(
            f"took over the stale lease of pid {old.get('pid')} on {old.get('host')}: "
            f"{old.get('reason', 'its writer is gone')}"
        )
    asked = plan.options.overwrite or plan.options.resume
    status = check_target(spec.output, overwrite=asked, storage_options=options)
    plan.resume = plan.options.resume and status is not None
    if plan.resume:
        check_resumable(spec.output, job=spec.to_dict(), seed=spec.seed, storage_options=options)


def runtime(plan: Plan) -> None:
    """Where the job runs: threads of this process for a small job, else a cluster (the
    caller's client, the shared one, or one of its own); the cost capped by the workers'
    memory."""
    from dkernel.jobs.cluster import start_runtime

    options, spec, data = plan.options, plan.job, plan.data
    assert data is not None
    memory = plan.cost.memory_bytes if plan.cost else 0.0
    plan.client, plan.threads = start_runtime(
        spec,
        data,
        memory,
        plan.exit,
        client=options.client,
        scheduler=options.scheduler,
        cluster=options.cluster,
        n_workers=options.n_workers,
        threads_per_worker=options.threads_per_worker,
        timeout=options.timeout,
        security=options.security,
        quiet=options.quiet,
    )
    if plan.cost is not None:
        _check_cluster_memory(plan.job, data, plan.cost, plan.client)


def store(plan: Plan) -> None:
    """Create (or reopen, to resume) the store; from here on a failure marks it ``failed``."""
    from dkernel.jobs.failures import FailureRecorder

    spec = plan.job
    plan.store = _open_store(spec, plan)
    plan.recorder = recorder = FailureRecorder(
        spec.name, spec.output, plan.store, plan.lease, plan.cost
    )
    plan.exit.push(recorder.on_exit)
    # every compute inside the job goes to the job's client: with another client current
    # (a notebook's `with Client(...)`), a compute sent from it could reach the scheduler
    # before this client's persist of its input ("lost dependencies")
    client = plan.client
    plan.exit.enter_context(nullcontext() if client is None else client.as_current())
    recorder.reserve()


def compute(plan: Plan) -> None:
    """The method's ``compute`` over the data held where the job runs (its input recorded)."""
    from dkernel._validation import is_dask_array  # scikit-learn: not at `dkernel validate`
    from dkernel.jobs.cluster import runtime_info, written_input
    from dkernel.runtime.monitor import InProcessMonitor, ResourceMonitor

    spec, data, result = plan.job, plan.data, plan.store
    assert data is not None and result is not None
    result.update_attrs(runtime=runtime_info(plan.client, plan.options.scheduler, plan.threads))
    logger.info(
        f"job {spec.name!r}: method {spec.method}, {data.n_samples} "
        f"sample{'s' * (data.n_samples != 1)} × {data.n_features} "
        f"feature{'s' * (data.n_features != 1)} → {spec.output}"
    )
    client, recorder = plan.client, plan.recorder
    assert recorder is not None
    monitor = ResourceMonitor(client) if plan.threads is None else InProcessMonitor(plan.threads)
    plan.monitoring = plan.exit.enter_context(ExitStack())
    recorder.monitor = plan.monitoring.enter_context(monitor)
    plan.data = data = written_input(result, data, client)
    if client is not None and not is_dask_array(data.X):
        # a table read whole travels in the job's graphs by design (its rows persisted once,
        # or inside a pass's graph, with n-vectors of the same order): distributed's warning
        # and its advice to load the data with Dask were noise in the job's log
        plan.exit.enter_context(graphs_may_carry(2 * 8 * data.n_samples * data.n_features))
    plan.ctx = JobContext(
        method=spec.method,
        params=spec.params,
        data=data,
        client=client,
        store=StoreView(result),
        seed=spec.seed,
        progress=plan.options.progress,
        limits=spec.limits,
    )
    prefetch_map_writers(plan.ctx)
    assert plan.method is not None
    plan.outputs = plan.method.compute(plan.ctx)


def write(plan: Plan) -> None:
    """Write what the method yields, as it comes (:func:`~dkernel.jobs.outputs.write_outputs`)."""
    assert plan.outputs is not None and plan.store is not None and plan.ctx is not None
    assert plan.monitoring is not None
    with plan.monitoring:  # the monitor stops with the writes (lost workers raise here)
        write_outputs(plan.outputs, plan.store, plan.ctx)


def finish(plan: Plan) -> None:
    """Record resources and time, then mark the store complete (never a replaced directory's,
    never a remote one whose lease was lost)."""
    assert plan.recorder is not None
    plan.recorder.complete(plan.t_start)


#: Every stage of ``dkernel run``, in order.
RUN: tuple[Stage, ...] = (
    ("parse", parse),
    ("validate", validate),
    ("resolve paths", resolve_paths),
    ("open and check data", open_and_check_data),
    ("estimate cost", estimate),
    ("check outputs", check_outputs),
    ("lease", lease),
    ("runtime", runtime),
    ("store", store),
    ("compute", compute),
    ("write", write),
    ("finish", finish),
)

#: The stages of ``dkernel validate``: all before the lease (nothing written, no cluster).
VALIDATE: tuple[Stage, ...] = RUN[:6]  # parse … check outputs


def run_stages(plan: Plan, stages: Iterable[Stage]) -> Plan:
    """Run ``stages`` in order on ``plan``; what they hold is released when they end."""
    with plan.exit:
        for _name, stage in stages:
            stage(plan)
    return plan


# ------------------------------------------------------------------------------------------
# what the stages share
# ------------------------------------------------------------------------------------------


def _check_cluster_memory(spec: JobSpec, data: LoadedData, cost: Cost, client: Any) -> None:
    """The cost against ``max_memory`` capped at the workers' total memory limit.

    Only known once the cluster answers; a worker without a limit caps nothing (nor do the
    threads of this process: ``client`` None). Refused before the store is opened."""
    if client is None:
        return
    workers = client.scheduler_info(n_workers=-1).get("workers", {}).values()
    limits = [float(w.get("memory_limit") or 0) for w in workers]
    if not limits or not all(limits):
        return
    total, current = sum(limits), memory_limit(spec.limits.get("max_memory"))
    if total >= current:
        return
    capped = SizeLimit(
        total,
        f"{current.note}, capped at the "
        + (
            "worker's memory limit"
            if len(limits) == 1
            else f"{len(limits)} workers' total memory limit"
        )
        + f" {format_size(total)}",
    )
    check_cost(replace(spec, limits={**spec.limits, "max_memory": capped}), data, cost)


def _open_store(spec: JobSpec, plan: Plan) -> ResultsStore:
    """Create (or reopen, to resume) the job's store; a failure is one line, exit 1."""
    from dkernel.jobs.failures import JobFailedError, describe_failure
    from dkernel.storage.store import ResultsStore

    try:
        options = spec.store_options
        if plan.resume:
            opened = ResultsStore.resume(
                spec.output, job=spec.to_dict(), seed=spec.seed, storage_options=options
            )
            logger.info(f"resuming {spec.output} (finished groups are kept)")
            return opened
        return ResultsStore.create(
            spec.output,
            job=spec.to_dict(),
            seed=spec.seed,
            overwrite=True,
            storage_options=options,
        )
    except DKernelError:
        raise
    except Exception as exc:  # noqa: BLE001
        needed = plan.cost.disk_bytes if plan.cost else None
        raise JobFailedError(
            f"job {spec.name!r} could not {'reopen' if plan.resume else 'create'} its results "
            f"store: {describe_failure(exc, spec.output, needed or None)}",
            spec.output,
        ) from exc
