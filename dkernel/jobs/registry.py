"""Registry of job methods: ``method:`` in a spec names one of these, nothing else runs.

A method module (``dkernel/jobs/steps/<name>.py``) declares its parameter schema, an optional
cross-check against the data's shape, a cost estimate (checked against the job's limits before
any cluster starts) and ``run(ctx)``, which computes and writes its groups to ``ctx.store``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dkernel.errors import SpecError
from dkernel.schema.params import Param

if TYPE_CHECKING:
    from distributed import Client

    from dkernel.io.data import LoadedData
    from dkernel.jobs.spec import JobSpec
    from dkernel.storage.store import ResultsStore


@dataclass(frozen=True)
class Cost:
    """Estimated peak memory (bytes, on one process) and disk (bytes) of a method."""

    memory_bytes: float = 0.0
    disk_bytes: float = 0.0
    what: str = ""
    alternative: str = ""


@dataclass
class JobContext:
    """Everything a method's ``run`` needs."""

    spec: JobSpec
    params: dict[str, Any]
    data: LoadedData
    client: Client
    store: ResultsStore
    seed: int
    progress: bool = True
    log: Callable[[str], None] = print
    timings: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Method:
    """A job method.

    Parameters
    ----------
    name : str
        The value of ``method:``.
    params : tuple of Param
        Schema of ``params:``.
    run : callable
        ``run(ctx: JobContext) -> None``.
    check_data : callable, optional
        ``check_data(params, data: LoadedData) -> None``; raise SpecError/InvalidInputError for
        combinations that cannot work (``n_clusters > n_samples``).
    estimate : callable, optional
        ``estimate(params, n_samples, n_features) -> Cost``.
    needs_raster : bool
        The method needs an image reader (``data.raster`` set).
    description : str
    """

    name: str
    params: tuple[Param, ...]
    run: Callable[[JobContext], None]
    check_data: Callable[[dict[str, Any], LoadedData], None] | None = None
    estimate: Callable[[dict[str, Any], int, int], Cost] | None = None
    needs_raster: bool = False
    description: str = ""


METHODS: dict[str, Method] = {}


def register_method(method: Method) -> Method:
    """Add a method to the registry (module import time)."""
    if method.name in METHODS:
        raise ValueError(f"method {method.name!r} is already registered")
    METHODS[method.name] = method
    return method


def get_method(name: Any) -> Method:
    """Look a method up by name; unknown names list the valid ones."""
    from dkernel.jobs import steps  # noqa: F401  (registers the built-in methods)

    if not isinstance(name, str) or name not in METHODS:
        valid = ", ".join(sorted(METHODS))
        raise SpecError(f"unknown method {name!r}. Valid methods: {valid}.", "method")
    return METHODS[name]
