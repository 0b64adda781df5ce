"""The ``/model_order`` group: the evidence of a number of clusters chosen by ``'auto'``.

:func:`model_order_dataset` builds it from a :class:`~dkernel.model_order.ModelOrder` (an
estimator's ``model_order_``); :func:`model_order_from_dataset` turns the stored group back
into one (``dkernel.storage.query.read_model_order`` reads it from a store).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import xarray as xr

if TYPE_CHECKING:
    from dkernel.model_order import ModelOrder

#: ``details`` entries stored as variables over a dimension of their own (the others of
#: candidate length over ``candidate``; scalars in the ``details`` attribute).
DETAIL_DIMS = {"spectrum": "rank"}


def model_order_dataset(order: ModelOrder) -> xr.Dataset:
    """The ``/model_order`` group: every candidate k with its score, and the choice.

    Parameters
    ----------
    order : ModelOrder
        The evidence (``n_clusters``, ``candidates``, ``scores``, ``rule``,
        ``higher_is_better``, ``details``).

    Returns
    -------
    Dataset
        ================  =============  ==============================================
        variable          dims           meaning
        ================  =============  ==============================================
        ``n_clusters``    ``candidate``  candidate number of clusters (int64)
        ``score``         ``candidate``  the rule's score of every candidate (NaN: none)
        ``spectrum``      ``rank``       leading eigenvalues the score came from
                                         (spectrum rules only)
        ================  =============  ==============================================

        Attributes ``rule``, ``n_clusters_chosen``, ``higher_is_better`` and ``details``
        (the rule's scalar details, e.g. ``n_subsamples`` of the stability rule). A 1-d
        detail of one value per candidate is stored over ``candidate``.
    """
    candidates = np.asarray(order.candidates, dtype=np.int64).ravel()
    data: dict[str, tuple[tuple[str, ...], Any]] = {
        "n_clusters": (("candidate",), candidates),
        "score": (("candidate",), np.asarray(order.scores, dtype=np.float64).ravel()),
    }
    scalars: dict[str, Any] = {}
    for name, value in (order.details or {}).items():
        if isinstance(value, str | bool | int | float | np.generic) or value is None:
            scalars[str(name)] = value.item() if isinstance(value, np.generic) else value
            continue
        arr = np.asarray(value)
        if arr.ndim != 1 or name in data:
            continue  # no place in the layout: kept by the estimator only
        dim = DETAIL_DIMS.get(str(name), "candidate" if arr.size == candidates.size else None)
        if dim is not None:
            data[str(name)] = ((dim,), arr)
    attrs = {
        "rule": str(order.rule),
        "n_clusters_chosen": int(order.n_clusters),
        "higher_is_better": bool(order.higher_is_better),
        "details": scalars,
    }
    return xr.Dataset(data, attrs=attrs)


def model_order_from_dataset(ds: xr.Dataset) -> ModelOrder:
    """The :class:`~dkernel.model_order.ModelOrder` a ``/model_order`` group holds (the
    inverse of :func:`model_order_dataset`; array details back in ``details``)."""
    from dkernel.model_order import ModelOrder

    attrs = ds.attrs
    details: dict[str, Any] = dict(attrs.get("details") or {})
    for name, var in ds.data_vars.items():
        if name not in ("n_clusters", "score"):
            details[str(name)] = np.asarray(var.values)
    return ModelOrder(
        n_clusters=int(attrs["n_clusters_chosen"]),
        candidates=np.asarray(ds["n_clusters"].values, dtype=np.int64),
        scores=np.asarray(ds["score"].values, dtype=np.float64),
        rule=str(attrs["rule"]),
        higher_is_better=bool(attrs.get("higher_is_better", True)),
        details=details,
    )
