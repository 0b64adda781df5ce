"""Groups every job writes: ``/input``, ``/labels`` and ``/metrics``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np
import xarray as xr


def input_dataset(
    *,
    n_samples: int,
    n_features: int,
    n_missing: int | None,
    feature_names: Sequence[str] | None,
    labels_true: Any = None,
    meta: Mapping[str, Any] | None = None,
) -> xr.Dataset:
    """The ``/input`` group: what the reader gave.

    Parameters
    ----------
    n_samples, n_features : int
        The data's shape (rows are the ``sample`` dimension of every other group).
    n_missing : int or None
        NaN entries in the data; ``None`` when the data are lazy (not counted).
    feature_names : sequence of str or None
        The reader's column names (``None``: none).
    labels_true : array-like (n_samples,), optional
        The reader's ground-truth class of every sample.
    meta : mapping, optional
        The reader's own provenance (path, bands, scene, …), merged into the attributes.

    Returns
    -------
    Dataset
        ========================  ============  ==========================================
        variable                  dims          meaning
        ========================  ============  ==========================================
        ``labels_true``           ``sample``    ground-truth class (only with labels)
        ========================  ============  ==========================================

        Attributes ``n_samples``, ``n_features``, ``n_missing``, ``feature_names`` and the
        reader's ``meta``.
    """
    variables = {}
    if labels_true is not None:
        variables["labels_true"] = (("sample",), np.asarray(labels_true))
    attrs = {
        "n_samples": n_samples,
        "n_features": n_features,
        "n_missing": n_missing,
        "feature_names": feature_names or [],
        **(meta or {}),
    }
    return xr.Dataset(variables, attrs=attrs)


def labels_dataset(
    labels: Any,
    *,
    n_clusters: int,
    clustering: str,
    centers: Any = None,
    centers_name: Literal["centers", "cluster_centers"] = "centers",
    inertia: float | None = None,
    cluster_coordinate: bool = False,
    distance: Any = None,
) -> xr.Dataset:
    """The ``/labels`` group: the cluster of every sample.

    Parameters
    ----------
    labels : array-like (n_samples,)
        Cluster of every sample, ``0 … n_clusters - 1`` (stored as int64).
    n_clusters : int
    clustering : str
        How the labels were found (``'k-means'``, ``'angular k-means'``, …).
    centers : array-like (n_clusters, n_components), optional
        Cluster centres in the embedding.
    centers_name : {'centers', 'cluster_centers'}
        The centres' variable name: ``'centers'``, or ``'cluster_centers'`` in JRC stores.
    inertia : float, optional
        The k-means cost of the labels.
    cluster_coordinate : bool
        Give the ``cluster`` dimension a coordinate ``0 … n_clusters - 1`` (JRC stores).
    distance : array-like (n_samples,), optional
        Squared distance of every sample to its centre (kernel k-means, in the kernel's
        feature space).

    Returns
    -------
    Dataset
        ===================  ===========================  ==========================
        variable             dims                         meaning
        ===================  ===========================  ==========================
        ``labels``           ``sample``                   cluster of every sample
        ``centers``          ``cluster``, ``component``   cluster centres (optional)
        ``distance``         ``sample``                   squared distance to the
                                                          centre (optional)
        ===================  ===========================  ==========================

        Attributes ``n_clusters``, ``clustering`` and, when given, ``inertia``.
    """
    # NumPy or Dask labels: a Dask array stays lazy until the store writes it
    labels = labels.astype(np.int64) if hasattr(labels, "astype") else np.asarray(labels, np.int64)
    data: dict[str, tuple[tuple[str, ...], Any]] = {"labels": (("sample",), labels)}
    if centers is not None:
        data[centers_name] = (("cluster", "component"), centers)
    if distance is not None:
        data["distance"] = (("sample",), distance)
    attrs: dict[str, Any] = {"n_clusters": n_clusters, "clustering": clustering}
    if inertia is not None:
        attrs["inertia"] = inertia
    coords = {"cluster": np.arange(n_clusters)} if cluster_coordinate else None
    return xr.Dataset(data, coords=coords, attrs=attrs)


def metrics_dataset(scores: Mapping[str, float]) -> xr.Dataset:
    """The ``/metrics`` group: one scalar per score, also kept in the attributes.

    Parameters
    ----------
    scores : mapping of str to float
        E.g. ``acc``, ``nmi``, ``ari`` (against the ground truth) or ``ndcg@10_<seed>``.

    Returns
    -------
    Dataset
        One 0-d variable per score (no dims); the attributes hold the same numbers.
    """
    return xr.Dataset({k: ((), v) for k, v in scores.items()}, attrs=dict(scores))
