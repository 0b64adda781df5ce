"""Registry of job methods: ``method:`` in a spec names one of these, nothing else runs.

A method module (``dkernel/jobs/steps/<name>.py``, found by :data:`METHODS` on the first lookup:
no list of modules to edit) declares its parameter schema, an optional
cross-check against the data's shape, a cost estimate (checked against the job's limits before
any cluster starts) and ``run(ctx)``, which computes and writes its groups to ``ctx.store``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dkernel.errors import SpecError
from dkernel.registry import Registry
from dkernel.schema.estimator import EstimatorSchema
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
    estimators : tuple of EstimatorSchema
        The estimators whose parameters ``params`` derives from (a test holds every shared
        parameter to its estimator's default, kind and range).
    """

    name: str
    params: tuple[Param, ...]
    run: Callable[[JobContext], None]
    check_data: Callable[[dict[str, Any], LoadedData], None] | None = None
    estimate: Callable[[dict[str, Any], int, int], Cost] | None = None
    needs_raster: bool = False
    description: str = ""
    estimators: tuple[EstimatorSchema, ...] = ()


#: The job methods; every module of ``dkernel.jobs.steps`` registers its own on import.
METHODS: Registry[Method] = Registry(
    "method", error=lambda message: SpecError(message, "method"), discover="dkernel.jobs.steps"
)


def register_method(method: Method) -> Method:
    """Add a method to the registry (module import time)."""
    return METHODS.register(method.name, method)


def get_method(name: Any) -> Method:
    """Look a method up by name; unknown names suggest a close one and list the valid ones."""
    return METHODS.lookup(name)
