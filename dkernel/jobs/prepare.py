"""Everything before a job's cluster starts: read and check the data, check the method's cost.

The work of the stages "open and check data" and "estimate cost" (``dkernel.jobs.stages``). Light by design: it
imports no Dask, scikit-learn or SciPy (readers and job steps import what they need when they
load data or run), so validating a table job starts in well under a second
(``tests/test_cli_imports.py``).
"""

from __future__ import annotations

import contextlib
import warnings
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from dkernel._budget import SCRATCH_BLOCK_BYTES, check_budget, rows_for_budget
from dkernel.errors import DKernelError, InvalidInputError
from dkernel.io.data import LoadedData
from dkernel.io.gdal import limit_gdal_cache
from dkernel.io.preprocess import standardize
from dkernel.io.registry import get_reader
from dkernel.jobs.map_files import check_raster_outputs
from dkernel.jobs.registry import METHODS, get_method
from dkernel.jobs.spec import JobSpec, data_root_confinement, load_spec
from dkernel.jobs.types import Cost
from dkernel.runtime.memory import limit_freed_memory, reuse_freed_memory
from dkernel.runtime.progress import without_client


def _source_of(spec: JobSpec) -> str:
    paths = [str(v) for k, v in spec.data.items() if (k == "path" or k.endswith("_path")) and v]
    return f" on {paths[0]}" if paths else ""


def load_data(spec: JobSpec) -> LoadedData:
    """Read the spec's data with its reader, check it and apply the common preprocessing.

    Raises
    ------
    InvalidInputError
        When the reader fails, or the data is not a non-empty 2-D numeric array, or every
        sample is identical (nothing to cluster).
    """
    from dkernel.io.files import data_root_in_force

    reader = get_reader(spec.reader)
    try:
        # the files are checked against the data root again where they are opened: one may
        # have been swapped for a link to outside it since the spec was validated
        with data_root_in_force(data_root_confinement(spec.runtime.get("data_root"))):
            data = reader.load(**spec.data)
    except InvalidInputError as exc:
        from dkernel.data.registry import fetch_hint

        hint = fetch_hint(spec.reader, str(exc))
        if hint is None or type(exc) is not InvalidInputError:
            raise
        raise InvalidInputError(f"{exc} {hint}") from exc
    except DKernelError:
        raise
    except Exception as exc:  # noqa: BLE001  (every reader failure becomes a message)
        from dkernel.data.registry import fetch_hint

        hint = fetch_hint(spec.reader, f"{type(exc).__name__}: {exc}")
        raise InvalidInputError(
            f"reader {spec.reader!r} failed{_source_of(spec)}: {type(exc).__name__}: "
            f"{str(exc)[:300]}. "
            + (
                hint
                or f"Check the file and the data: options (`dkernel methods {spec.reader}` lists them)."
            )
        ) from exc
    source = data.meta.get("source") or spec.reader
    if data.X.ndim != 2:
        raise InvalidInputError(
            f"reader {spec.reader!r} returned {data.X.ndim}-D data; methods need 2-D "
            "(samples × features)."
        )
    dtype = np.dtype(data.X.dtype)
    if dtype.kind not in "biuf":
        raise InvalidInputError(
            f"{source} holds {dtype.str} ({dtype.name}) values; dkernel needs a numeric "
            "(integer or real floating-point) array. Convert it, e.g. with "
            "numpy.asarray(x, dtype=float)."
        )
    if data.X.shape[0] == 0 or data.X.shape[1] == 0:
        raise InvalidInputError(
            f"the data read by {spec.reader!r} from {source} is empty "
            f"(shape {tuple(data.X.shape)})."
        )
    if dtype.kind == "b":  # true/false features: as 0/1
        data = replace(data, X=data.X.astype(np.float64))
    if isinstance(data.X, np.ndarray) and np.isnan(data.X).all():
        raise InvalidInputError(
            f"every value of {source} is missing (NaN): there is no data to use. Check the "
            "file, data.missing_values and data.skip_columns."
        )
    if isinstance(data.X, np.ndarray) and data.X.shape[0] > 1:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            spread = np.nanmax(data.X, axis=0) - np.nanmin(data.X, axis=0)
        if not np.any(spread > 0):
            raise InvalidInputError(
                f"every sample of {source} is identical (all {data.X.shape[1]} features are "
                "constant), so there is nothing to cluster or rank. Check the file and "
                "data.skip_columns."
            )
    if spec.standardize:
        data = replace(data, X=standardize(data.X, data.feature_names))
        data.meta["standardized"] = True
    return data


def handles_missing() -> dict[str, str | None]:
    """The methods that handle missing values (NaN) themselves, each with the kernel it needs
    for it (None: any), from the methods' registry entries (``Method.handles_missing``)."""
    found = {}
    for name in METHODS.names():
        needs = METHODS[name].handles_missing
        if needs:
            found[name] = None if needs is True else str(needs)
    return found


def __getattr__(name: str) -> Any:
    if name == "HANDLES_MISSING":  # its former spelling: a dict built when read
        return handles_missing()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def check_finite(spec: JobSpec, data: LoadedData) -> None:
    """Refuse NaN (unless the method handles missing values) and ±inf, before any cluster.

    Reads the data in row blocks (a Dask array block by block, on the local threads), so
    memory stays at one block; counts every non-finite value and names the first one's row
    and column.

    Raises
    ------
    InvalidInputError
        Naming the counts, the first row and column, and what to do.
    """
    method = get_method(spec.method)
    needs = method.handles_missing
    allow_nan = method.allows_missing(spec.params)
    X = data.X
    if hasattr(X, "dask") and allow_nan and data.raster is not None:
        return  # lazily read rasters: their reader masks nodata; no extra pass over the scene
    n_nan = n_inf = 0
    first: tuple[int, int] | None = None
    if hasattr(X, "dask"):
        import dask.threaded

        # this process's threads, named as a callable: a name made Dask import distributed
        offsets = np.cumsum((0, *X.chunks[0][:-1]))
        pieces = (
            (int(offsets[i]), np.asarray(X.blocks[i].compute(scheduler=dask.threaded.get)))
            for i in range(X.numblocks[0])
        )
    else:
        # rows of about SCRATCH_BLOCK_BYTES of float64 values at a time
        step = rows_for_budget(SCRATCH_BLOCK_BYTES, X.shape[1], 8)
        pieces = ((i, np.asarray(X[i : i + step])) for i in range(0, X.shape[0], step))
    for offset, block in pieces:
        if block.dtype.kind not in "fc":
            continue
        nan = np.isnan(block)
        inf = np.isinf(block)
        n_nan += int(nan.sum())
        n_inf += int(inf.sum())
        bad = inf if allow_nan else nan | inf
        if first is None and bad.any():
            r, c = np.argwhere(bad)[0]
            first = (offset + int(r), int(c))
    if first is None:
        return
    source = data.meta.get("source") or spec.reader
    names = data.feature_names or []
    col = f"column {first[1]}" + (f" ({names[first[1]]})" if first[1] < len(names) else "")
    where = f"the first at row {first[0]}, {col} (counting from 0, after data.skip_columns)"
    if n_inf:
        raise InvalidInputError(
            f"{source} holds {n_inf} infinite values"
            + (f" and {n_nan} missing (NaN) ones" if n_nan and not allow_nan else "")
            + f"; {where}. method {spec.method} needs finite data: fix or drop those rows."
        )
    alternative = (
        f"set params.kernel: {needs}, which handles them"
        if needs
        else "use method: kernel-kmeans or pck-spectral, which model them"
    )
    raise InvalidInputError(
        f"{spec.method} does not handle missing values ({n_nan} NaN found) in {source}; "
        f"{where}. Impute or drop them, or {alternative}."
    )


def _lower_counts(method: Any, params: dict[str, Any]) -> str:
    """An alternative for a cost estimate that names none: the count parameters set far
    above their defaults."""
    raised = []
    for p in method.params:
        value, default = params.get(p.name), p.default
        if p.kind == "int" and isinstance(default, int) and isinstance(value, int):
            if value > 10 * max(default, 1):
                raised.append(f"params.{p.name} ({value:,}; default {default:,})")
    if not raised:
        return ""
    return "lower " + ", ".join(raised) + "."


def prepare_job(spec: JobSpec | str | Path) -> tuple[JobSpec, LoadedData]:
    """Validate the spec, read the data and check the cost: everything before a cluster starts.

    The stages parse, validate, open and check data and estimate cost of
    ``dkernel.jobs.stages``, and check outputs' refusal of image outputs the data cannot give
    (``dkernel.jobs.map_files.check_raster_outputs``), for a caller that wants the data
    (a notebook, a test).
    """
    if not isinstance(spec, JobSpec):
        spec = load_spec(spec)
    data = open_data(spec)
    check_cost(spec, data, estimate_cost(spec, data))
    check_raster_outputs(spec.params, data)
    return spec, data


def open_data(spec: JobSpec) -> LoadedData:
    """Read the spec's data and check it: finite (:func:`check_finite`) and the method's own
    rules (``check_data``: ``n_clusters`` against the samples).

    For an image reader, this process's GDAL block cache is bounded first
    (``dkernel.io.gdal.limit_gdal_cache``): a raster reader's statistics pass decodes every
    tile here, on the local threads, and GDAL's default cache (5 % of the RAM) kept up to the
    whole decoded scene in the client. For the same pass, glibc is told to give freed heap
    memory back to the system as distributed's workers do
    (``dkernel.runtime.memory.limit_freed_memory``), and after it to keep freed blocks for
    reuse again (``reuse_freed_memory``). The pass runs on Dask's threaded scheduler, with
    rechunks by tasks (``dkernel.runtime.progress.without_client``): Dask would otherwise
    import ``distributed`` to look for a client (0.1–0.2 s), which a small job never needs.
    A table reader uses no GDAL (and validating its job does not load it, nor Dask).
    """
    method = get_method(spec.method)
    reading = contextlib.ExitStack()
    if get_reader(spec.reader).raster:
        limit_gdal_cache()
        reading.enter_context(without_client())
    limit_freed_memory()
    with reading:
        data = load_data(spec)
        check_finite(spec, data)
    reuse_freed_memory()  # the reading pass is over: the numerics reuse their blocks
    if method.check_data is not None:
        method.check_data(spec.params, data)
    return data


def estimate_cost(spec: JobSpec, data: LoadedData) -> Cost | None:
    """The method's cost estimate on ``data`` (None when the method has none)."""
    method = get_method(spec.method)
    if method.estimate is None:
        return None
    return method.estimate(spec.params, data.n_samples, data.n_features)


def check_cost(
    spec: JobSpec, data: LoadedData, cost: Cost | None, output: Path | str | None = None
) -> None:
    """``cost`` (:func:`estimate_cost`) against the spec's limits (the disk limit capped by the
    free space where ``output`` goes, when given)."""
    if cost is None:
        return
    check_budget(
        what=cost.what or f"method {spec.method!r} on {data.n_samples} samples",
        memory_bytes=cost.memory_bytes,
        disk_bytes=cost.disk_bytes,
        max_memory=spec.limits.get("max_memory"),
        max_disk=spec.limits.get("max_disk"),
        alternative=cost.alternative or _lower_counts(get_method(spec.method), spec.params),
        output=output,
    )
