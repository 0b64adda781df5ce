"""Registry of job methods: ``method:`` in a spec names one of these, nothing else runs.

A method module (``dkernel/jobs/steps/<name>.py``, found by :data:`METHODS` on the first lookup:
no list of modules to edit) declares its parameter schema, an optional
cross-check against the data's shape, a cost estimate (checked against the job's limits before
any cluster starts) and ``compute(ctx)``: a generator that fits and yields its results as
typed outputs (:mod:`dkernel.jobs.types`: groups, the label or score map, metrics, timings),
which the runner writes as they come. A step never writes; it reads back what was written
through ``ctx.store``, a :class:`~dkernel.jobs.types.StoreView`. The types live in
:mod:`dkernel.jobs.types` (re-exported here).
"""

from __future__ import annotations

from typing import Any

from dkernel.errors import SpecError
from dkernel.jobs.types import (  # noqa: F401  (re-exported: the step modules' imports)
    Cost,
    JobContext,
    Method,
    StoreView,
    chunk_rows_param,
    refuse_missing_values,
)
from dkernel.registry import Registry
from dkernel.runtime.persist import persist, with_own_keys  # noqa: F401  (re-exported)

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
