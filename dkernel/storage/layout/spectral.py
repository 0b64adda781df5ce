"""Kernel-matrix groups: ``/kernel``, ``/features``, ``/embedding`` and ``/landmarks``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import xarray as xr

#: The ``/features`` description of the PCK posterior map (the only feature map stored today).
PCK_FEATURES = "Γ/√Z: posteriors of every (q, g) model; K = features @ features.T"


def kernel_dataset(
    kernel: Any, *, attrs: Mapping[str, Any], block_size: int | None = None
) -> xr.Dataset:
    """The ``/kernel`` group: the kernel matrix, written block by block.

    Parameters
    ----------
    kernel : array-like or dask.array.Array (n_samples, n_samples)
        K; a Dask array stays lazy and is written one block per task.
    attrs : mapping
        The kernel's name (``kernel``) and parameters (``sigma``, ``block_size``,
        ``normalized``, …).
    block_size : int, optional
        Rechunk a Dask ``kernel`` into square blocks of this many rows (fewer when
        ``n_samples`` is smaller); by default its chunks are kept.

    Returns
    -------
    Dataset
        ============  ========================  ======================================
        variable      dims                      meaning
        ============  ========================  ======================================
        ``kernel``    ``sample``, ``sample_``   kernel value of every pair of samples
        ============  ========================  ======================================

        Stored without compression (``dkernel.storage.store.UNCOMPRESSED_GROUPS``).
    """
    if block_size is not None:
        n = int(kernel.shape[0])
        kernel = kernel.rechunk((min(n, block_size), min(n, block_size)))
    return xr.Dataset({"kernel": (("sample", "sample_"), kernel)}, attrs=dict(attrs))


def features_dataset(features: Any, *, description: str = PCK_FEATURES) -> xr.Dataset:
    """The ``/features`` group: an explicit feature map, whose Gram matrix is the kernel.

    Parameters
    ----------
    features : array-like or dask.array.Array (n_samples, n_features)
        The map of every sample (PCK: the posteriors Γ/√Z).
    description : str
        What the features are (the group's ``description`` attribute).

    Returns
    -------
    Dataset
        ==============  ========================  =====================================
        variable        dims                      meaning
        ==============  ========================  =====================================
        ``features``    ``sample``, ``feature``   feature vector of every sample
        ==============  ========================  =====================================
    """
    return xr.Dataset(
        {"features": (("sample", "feature"), features)}, attrs={"description": description}
    )


def embedding_dataset(
    embedding: Any,
    eigenvalues: Any,
    *,
    criterion: Any = None,
    eigen_index: Any = None,
    degrees: Any = None,
    global_rank: Any = None,
    fit_index: Any = None,
    spectrum: Any = None,
    attrs: Mapping[str, Any] | None = None,
) -> xr.Dataset:
    """The ``/embedding`` group: spectral coordinates of every sample and their eigenvalues.

    Parameters
    ----------
    embedding : array-like or dask.array.Array (n_rows, n_components)
        Coordinates of every row.
    eigenvalues : array-like (n_components,)
    criterion : array-like (n_components,), optional
        The score the components were ordered by (eigenvalue, entropy contribution,
        [Lokse2020] Paper II Prop. 6 ``c_i^2``; named by the ``criterion`` attribute).
    eigen_index : array-like (n_components,), optional
        Index of the eigenpair every component is (stored as int64).
    degrees : array-like (n_rows,), optional
        Kernel row sums.
    global_rank : array-like (n_rows,), optional
        Stationary (degree-proportional) PageRank score.
    fit_index : array-like (n_rows,), optional
        Row of every in-sample point in the input, for an embedding of an in-sample subset
        (KPPR): the row dimension is then ``fit_sample`` instead of ``sample``.
    spectrum : array-like (n_rank,), optional
        Leading eigenvalues (descending) a clustering chose its number of clusters from
        (``n_clusters='auto'``: the eigengap; attribute ``n_clusters_chosen``).
    attrs : mapping, optional
        The method and its fitted parameters (``method``, ``criterion``, ``solver``,
        ``sigma``, ``volume``, ``beta``, …).

    Returns
    -------
    Dataset
        ===============  ==========================  ===================================
        variable         dims                        meaning
        ===============  ==========================  ===================================
        ``embedding``    ``sample``, ``component``   coordinates of every sample
        ``eigenvalues``  ``component``               eigenvalue of every component
        ``criterion``    ``component``               ordering score (optional)
        ``eigen_index``  ``component``               eigenpair index (optional)
        ``degrees``      ``sample``                  kernel row sums (optional)
        ``global_rank``  ``sample``                  stationary PageRank (optional)
        ``fit_index``    ``fit_sample``              input row of every in-sample point
        ``spectrum``     ``rank``                    eigengap evidence (optional)
        ===============  ==========================  ===================================

        ``component`` has the coordinate ``0 … n_components - 1``.
    """
    rows = "sample" if fit_index is None else "fit_sample"
    data = {
        "embedding": ((rows, "component"), embedding),
        "eigenvalues": (("component",), eigenvalues),
    }
    if criterion is not None:
        data["criterion"] = (("component",), criterion)
    if eigen_index is not None:
        data["eigen_index"] = (("component",), np.asarray(eigen_index).astype(np.int64))
    if degrees is not None:
        data["degrees"] = ((rows,), degrees)
    if global_rank is not None:
        data["global_rank"] = ((rows,), global_rank)
    if fit_index is not None:
        data["fit_index"] = ((rows,), np.asarray(fit_index).astype(np.int64))
    if spectrum is not None:
        data["spectrum"] = (("rank",), np.asarray(spectrum, dtype=np.float64))
    coords = {"component": np.arange(embedding.shape[1])}
    return xr.Dataset(data, coords=coords, attrs=dict(attrs or {}))


def landmarks_dataset(index: Any, spectrum: Any, *, coordinates: Any = None) -> xr.Dataset:
    """The ``/landmarks`` group of a spectral clustering (Nyström, exact or bipartite graph).

    Parameters
    ----------
    index : array-like (n_landmarks,) or None
        Input row of every landmark (stored as int64); None when the landmarks are not input
        rows (the k-means centres of the bipartite graph, given as ``coordinates``).
    spectrum : array-like (n_eigen,)
        Leading eigenvalues of the landmark (or graph) eigenproblem.
    coordinates : array-like (n_landmarks, n_features), optional
        The landmarks themselves, when they are not input rows.

    Returns
    -------
    Dataset
        ===============  ===========================  ========================================
        variable         dims                         meaning
        ===============  ===========================  ========================================
        ``index``        ``landmark``                 input row of every landmark (if rows)
        ``coordinates``  ``landmark``, ``feature``    the landmarks (if not input rows)
        ``spectrum``     ``eigen``                    leading eigenvalues of the r×r problem
        ===============  ===========================  ========================================
    """
    variables: dict = {"spectrum": (("eigen",), np.asarray(spectrum))}
    if index is not None:
        variables["index"] = (("landmark",), np.asarray(index).astype(np.int64))
    if coordinates is not None:
        variables["coordinates"] = (("landmark", "feature"), np.asarray(coordinates))
    return xr.Dataset(
        variables,
        attrs={"description": "landmarks (row indices or coordinates); leading eigenvalues"},
    )
