"""Running a job: spec → validation → data → cost check → cluster → method → store."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from dkernel._budget import check_budget
from dkernel.errors import DKernelError, InvalidInputError, ResourceLimitError
from dkernel.io.data import LoadedData
from dkernel.io.preprocess import standardize
from dkernel.io.registry import get_reader
from dkernel.jobs.registry import JobContext, get_method
from dkernel.jobs.spec import JobSpec, load_spec
from dkernel.storage.store import ResultsStore


class JobFailedError(DKernelError, RuntimeError):
    """A job that failed while running; its store is marked ``failed``."""

    def __init__(self, message: str, store: Path) -> None:
        self.store = store
        super().__init__(message)


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def load_data(spec: JobSpec) -> LoadedData:
    """Read the spec's data with its reader and apply the common preprocessing."""
    reader = get_reader(spec.reader)
    try:
        data = reader.load(**spec.data)
    except DKernelError:
        raise
    except (OSError, ValueError, KeyError) as exc:
        raise InvalidInputError(f"reader {spec.reader!r} failed: {exc}") from exc
    if data.X.ndim != 2:
        raise InvalidInputError(
            f"reader {spec.reader!r} returned {data.X.ndim}-D data; methods need 2-D "
            "(samples × features)."
        )
    if data.X.shape[0] == 0:
        raise InvalidInputError(f"the data read by {spec.reader!r} has no samples.")
    if spec.standardize:
        data = replace(data, X=standardize(data.X, data.feature_names))
        data.meta["standardized"] = True
    return data


def prepare_job(spec: JobSpec | str | Path) -> tuple[JobSpec, LoadedData]:
    """Validate the spec, read the data and check the cost: everything before a cluster starts."""
    if not isinstance(spec, JobSpec):
        spec = load_spec(spec)
    method = get_method(spec.method)
    data = load_data(spec)
    if method.check_data is not None:
        method.check_data(spec.params, data)
    if method.estimate is not None:
        cost = method.estimate(spec.params, data.n_samples, data.n_features)
        check_budget(
            what=cost.what or f"method {spec.method!r} on {data.n_samples} samples",
            memory_bytes=cost.memory_bytes,
            disk_bytes=cost.disk_bytes,
            max_memory=spec.limits.get("max_memory"),
            max_disk=spec.limits.get("max_disk"),
            alternative=cost.alternative,
        )
    return spec, data


def run_job(
    spec: JobSpec | str | Path,
    *,
    scheduler: str | None = None,
    n_workers: int | None = None,
    threads_per_worker: int | None = None,
    output: str | Path | None = None,
    overwrite: bool = False,
    progress: bool = True,
    quiet: bool = False,
    client: Any = None,
    timeout: float = 10.0,
    log: Callable[[str], None] = _stderr,
) -> Path:
    """Run a job end to end and return the path of its complete results store.

    Parameters
    ----------
    spec : JobSpec or path
        A validated spec or the path of a YAML spec.
    scheduler : str, optional
        Address of a running Dask scheduler; an embedded LocalCluster otherwise.
    n_workers, threads_per_worker : int, optional
        Size of the embedded cluster (default: the spec's ``runtime``, else the machine).
    output : path, optional
        Overrides the spec's ``output``.
    overwrite : bool
        Replace an existing complete store.
    progress : bool
        Show progress bars.
    client : distributed.Client, optional
        Use this client instead of creating one (notebooks, tests).
    timeout : float
        Seconds to wait for ``scheduler``.

    Raises
    ------
    SpecError, InvalidInputError, ResourceLimitError, StoreError
        Invalid spec, data or limits: raised before any cluster starts or store is written.
    JobFailedError
        The method failed while running; the store is marked ``failed`` with the error.
    """
    from dkernel.runtime import connect

    spec, data = prepare_job(spec)
    if output is not None:
        spec = replace(spec, output=Path(output))
    method = get_method(spec.method)
    t_start = time.perf_counter()

    own_client = client is None
    if own_client:
        client = connect(
            scheduler,
            n_workers=n_workers or spec.runtime.get("n_workers"),
            threads_per_worker=threads_per_worker or spec.runtime.get("threads_per_worker"),
            memory_limit=spec.runtime.get("memory_limit", "auto"),
            timeout=timeout,
            quiet=quiet,
        )
    try:
        store = ResultsStore.create(
            spec.output, job=spec.to_dict(), seed=spec.seed, overwrite=overwrite
        )
        log(
            f"[dkernel] job {spec.name!r}: method {spec.method}, {data.n_samples} samples × "
            f"{data.n_features} features → {spec.output}"
        )
        try:
            _write_input(store, data)
            ctx = JobContext(
                spec=spec,
                params=spec.params,
                data=data,
                client=client,
                store=store,
                seed=spec.seed,
                progress=progress,
                log=log,
            )
            method.run(ctx)
            store.record_timing("total", time.perf_counter() - t_start)
            store.mark_complete()
        except BaseException as exc:
            store.mark_failed(exc)
            # bad input found while running keeps its own type (exit code 2 in the CLI)
            if isinstance(exc, KeyboardInterrupt | InvalidInputError | ResourceLimitError):
                raise
            raise JobFailedError(
                f"job {spec.name!r} failed while running: {type(exc).__name__}: {exc}",
                spec.output,
            ) from exc
    finally:
        if own_client:
            client.close()
    log(f"[dkernel] complete in {time.perf_counter() - t_start:.1f} s: {spec.output}")
    return spec.output


def _write_input(store: ResultsStore, data: LoadedData) -> None:
    variables = {}
    if data.y is not None:
        variables["labels_true"] = (("sample",), np.asarray(data.y))
    attrs = {
        "n_samples": data.n_samples,
        "n_features": data.n_features,
        "n_missing": int(np.isnan(np.asarray(data.X)).sum())
        if isinstance(data.X, np.ndarray)
        else None,
        "feature_names": data.feature_names or [],
        **data.meta,
    }
    store.write("input", xr.Dataset(variables, attrs=attrs))
