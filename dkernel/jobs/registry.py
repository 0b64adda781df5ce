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


def _letters(name: str) -> str:
    return "".join(c for c in name.lower() if c.isalnum())


def method_of_estimator(name: str) -> str | None:
    """The one job method that ``name`` spells otherwise: its estimator's class
    (``JointRankingClustering``, ``joint-ranking-clustering``, ``kernel_pca``: in any case and
    separators, or the start of it), a longer form of its own name
    (``PCKSpectralClustering``) or the start of it (``pck``); for the message of an unknown
    method. None when no method, or more than one, matches."""
    wanted = _letters(name)
    if len(wanted) < 3:
        return None
    found = set()
    for method_name in METHODS.names():
        own = _letters(method_name)
        spellings = [
            _letters(
                s.source.rsplit(":", 1)[-1] if isinstance(s.source, str) else s.source.__name__
            )
            for s in METHODS[method_name].estimators
            if not s.prefix  # a second estimator the step configures (the PCK of kppr)
        ]
        if (
            wanted.startswith(own)
            or own.startswith(wanted)
            or any(cls.startswith(wanted) for cls in spellings)
        ):
            found.add(method_name)
    return found.pop() if len(found) == 1 else None


#: The job methods; every module of ``dkernel.jobs.steps`` registers its own on import.
METHODS: Registry[Method] = Registry(
    "method",
    error=lambda message: SpecError(message, "method"),
    discover="dkernel.jobs.steps",
    suggest=method_of_estimator,
)


def register_method(method: Method) -> Method:
    """Add a method to the registry (module import time)."""
    return METHODS.register(method.name, method)


def get_method(name: Any) -> Method:
    """Look a method up by name; unknown names suggest a close one and list the valid ones."""
    return METHODS.lookup(name)
