"""Kernel-decomposition groups: ``/decomposition``, ``/posteriors`` and ``/selection``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import xarray as xr
from dask import is_dask_collection


def _sample_cluster_coords(n_samples: int, n_clusters: int) -> dict[str, np.ndarray]:
    return {"sample": np.arange(n_samples), "cluster": np.arange(n_clusters)}


def decomposition_dataset(
    W: np.ndarray,
    H: np.ndarray,
    priors: np.ndarray,
    *,
    spectrum: np.ndarray | None = None,
    attrs: Mapping[str, Any] | None = None,
) -> xr.Dataset:
    """The ``/decomposition`` group: the aggregate Markov model's factors [SzymkowiakHave2006].

    Parameters
    ----------
    W : ndarray (n_samples, n_clusters)
        ``P(x_i | c)``, columns sum to 1.
    H : ndarray (n_clusters, n_samples)
        ``P(c | x_j)``, columns sum to 1.
    priors : ndarray (n_clusters,)
        ``P(c)``.
    spectrum : ndarray (n_rank,), optional
        Leading eigenvalues (descending) of the affinity whose eigenvectors started the
        factorisation: the eigengap evidence of ``n_clusters='auto'`` (attribute
        ``n_clusters_chosen``).
    attrs : mapping, optional
        The model (``n_neighbors``, ``n_clusters``, ``kernel``, ``loss``, ``objective``,
        ``bandwidth`` or ``scale_neighbors`` / ``median_sigma``, the scaling, …).

    Returns
    -------
    Dataset
        ============  =========================  ===================
        variable      dims                       meaning
        ============  =========================  ===================
        ``W``         ``sample``, ``cluster``    ``P(x_i | c)``
        ``H``         ``cluster``, ``sample``    ``P(c | x_j)``
        ``priors``    ``cluster``                ``P(c)``
        ``spectrum``  ``rank``                   eigengap evidence
        ============  =========================  ===================

        Coordinates ``sample`` and ``cluster`` (``0 … n - 1``); attributes ``attrs`` plus
        ``W`` and ``H`` (their meaning).
    """
    return xr.Dataset(
        {
            "W": (("sample", "cluster"), W),
            "H": (("cluster", "sample"), H),
            "priors": (("cluster",), priors),
            **({} if spectrum is None else {"spectrum": (("rank",), np.asarray(spectrum))}),
        },
        coords=_sample_cluster_coords(*W.shape),
        attrs={
            **(attrs or {}),
            "W": "P(x_i | c), columns sum to 1",
            "H": "P(c | x_j), columns sum to 1",
        },
    )


def posteriors_dataset(posteriors: np.ndarray) -> xr.Dataset:
    """The ``/posteriors`` group: every sample's class posteriors ([SzymkowiakHave2006], Eq. 9).

    Parameters
    ----------
    posteriors : ndarray or dask array (n_samples, n_clusters)
        ``P(c | x)``, rows sum to 1. A Dask array stays lazy until the store writes it (no
        ``sample`` coordinate then).

    Returns
    -------
    Dataset
        ==============  =========================  ===================
        variable        dims                       meaning
        ==============  =========================  ===================
        ``posteriors``  ``sample``, ``cluster``    ``P(c | x)``
        ==============  =========================  ===================
    """
    coords = _sample_cluster_coords(*posteriors.shape)
    if is_dask_collection(posteriors):  # lazy: no index of length N held in the client
        del coords["sample"]
    return xr.Dataset(
        {"posteriors": (("sample", "cluster"), posteriors)},
        coords=coords,
        attrs={"posteriors": "Eq. 9 class posteriors P(c | x) (rows sum to 1)"},
    )


def selection_dataset(
    *,
    errors: np.ndarray,
    error_mean: np.ndarray,
    error_sem: np.ndarray,
    error_vs_sigma_mean: np.ndarray,
    error_vs_sigma_sem: np.ndarray,
    confidence: np.ndarray,
    accuracy: np.ndarray | None,
    sigmas: Sequence[float],
    n_neighbors: Sequence[int | None],
    n_clusters: Sequence[int],
    chosen: Mapping[str, Any],
    c_rule: str,
    attrs: Mapping[str, Any] | None = None,
) -> xr.Dataset:
    """The ``/selection`` group: the held-out error surface of a kernel-decomposition grid.

    Parameters
    ----------
    errors : ndarray (n_repeats, n_neighbors, n_sigmas, n_clusters)
        Negative mean held-out log-likelihood ([SzymkowiakHave2006], Eq. 11-14) of every fit.
    error_mean, error_sem : ndarray (n_neighbors, n_sigmas, n_clusters)
        Its mean and standard error over repeats.
    error_vs_sigma_mean, error_vs_sigma_sem : ndarray (n_neighbors, n_sigmas)
        The error averaged over model orders: mean and standard error over repeats.
    confidence : ndarray, shape of ``errors``
        Mean maximum posterior on the held-out points.
    accuracy : ndarray, shape of ``errors``, or None
        Held-out accuracy (only with labels).
    sigmas, n_neighbors, n_clusters : sequences
        The grid (``None`` in ``n_neighbors``, the dense kernel, is stored as 0).
    chosen : mapping
        The chosen model (``sigma``, ``n_neighbors``, ``n_clusters``, ``sigma_index`` and
        the other grid indices), stored as ``chosen_<key>`` attributes (``None`` as 0).
    c_rule : str
        How the model order was chosen.
    attrs : mapping, optional
        More attributes (the selection's ``meta``, ``n_selection_samples``).

    Returns
    -------
    Dataset
        ===========================  ==============================================
        variable                     dims
        ===========================  ==============================================
        ``error``                    ``repeat``, ``neighbors``, ``bandwidth``,
                                     ``n_clusters``
        ``error_mean``               ``neighbors``, ``bandwidth``, ``n_clusters``
        ``error_sem``                ``neighbors``, ``bandwidth``, ``n_clusters``
        ``confidence``               as ``error``
        ``accuracy`` (with labels)   as ``error``
        ``error_vs_bandwidth_mean``  ``neighbors``, ``bandwidth``
        ``error_vs_bandwidth_sem``   ``neighbors``, ``bandwidth``
        ===========================  ==============================================

        Every dimension has the grid as its coordinate (``repeat``: ``0 … n_repeats - 1``).
        The kernel width keeps its stored name ``bandwidth`` (dimension, the
        ``error_vs_bandwidth_*`` variables and the ``chosen_bandwidth`` /
        ``chosen_bandwidth_index`` attributes) so that existing stores and readers stay valid;
        the attributes also carry ``chosen_sigma`` and ``chosen_sigma_index``.
    """
    nn = np.asarray([0 if k is None else k for k in n_neighbors], dtype=np.int64)
    dims = ("repeat", "neighbors", "bandwidth", "n_clusters")
    data = {
        "error": (dims, errors),
        "error_mean": (dims[1:], error_mean),
        "error_sem": (dims[1:], error_sem),
        "confidence": (dims, confidence),
    }
    if accuracy is not None:
        data["accuracy"] = (dims, accuracy)
    data["error_vs_bandwidth_mean"] = (("neighbors", "bandwidth"), error_vs_sigma_mean)
    data["error_vs_bandwidth_sem"] = (("neighbors", "bandwidth"), error_vs_sigma_sem)
    stored_choice = {k: (v if v is not None else 0) for k, v in chosen.items()}
    # the keys before the rename to sigma, first, as existing stores have them
    stored_choice = {
        "bandwidth": stored_choice["sigma"],
        "n_neighbors": stored_choice["n_neighbors"],
        "n_clusters": stored_choice["n_clusters"],
        "bandwidth_index": stored_choice["sigma_index"],
        **stored_choice,
    }
    return xr.Dataset(
        data,
        coords={
            "repeat": np.arange(errors.shape[0]),
            "neighbors": nn,
            "bandwidth": np.asarray(sigmas, dtype=np.float64),
            "n_clusters": np.asarray(n_clusters, dtype=np.int64),
        },
        attrs={
            "error": "negative mean held-out log-likelihood (Eq. 11-14)",
            "neighbors_note": "0 = dense kernel (no k-NN sparsification)",
            "c_rule": c_rule,
            **{f"chosen_{k}": v for k, v in stored_choice.items()},
            **(attrs or {}),
        },
    )
