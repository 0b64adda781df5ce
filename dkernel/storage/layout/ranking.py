"""The ``/ranking`` group: scores of every sample for named seeds, and their top-k."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import dask.array as da
import numpy as np
import xarray as xr

from dkernel.errors import InvalidInputError
from dkernel.ranking.graph import top_k_graph


def ranking_dataset(
    scores: Any,
    seed_names: list[str],
    *,
    k: int = 100,
    sample: Any = None,
    attrs: Mapping[str, Any] | None = None,
    projection: Any = None,
    in_sample: Any = None,
    cluster_top_index: Any = None,
) -> xr.Dataset:
    """The ``/ranking`` group: ``score (sample, seed)``, ``top_index``/``top_score (seed, rank)``.

    Read back with :func:`dkernel.top_k` and :func:`dkernel.seed_scores`.

    Parameters
    ----------
    scores : array-like or dask.array.Array (n_samples, n_seeds)
        Score of every sample for every seed; a Dask array stays lazy (the top-k too) and is
        computed by the store write.
    seed_names : list of str
        One name per score column (the ``seed`` coordinate).
    k : int
        Ranks kept in ``top_index`` / ``top_score`` (at most ``n_samples``).
    sample : array-like (n_samples,), optional
        The ``sample`` coordinate (default ``0 … n_samples - 1``).
    attrs : mapping, optional
        The method and its parameters (``method``, ``alpha``, ``kernel``, ``seeds``, and
        ``beta`` / ``volume``, which :func:`dkernel.seed_scores` needs).
    projection : dask.array.Array (n_samples, n_components + 1), optional
        KPPR score coordinates ``[d/Vol, β√d z']``: a seed's scores are
        ``projection @ [1; m'_s]``, so seeds chosen later are ranked from the store.
    in_sample : array-like of bool (n_samples,), optional
        True for the rows the model was fitted on (chunked like ``scores``).
    cluster_top_index : array-like (n_seeds, n_clusters, k_cluster), optional
        Top rows of every seed inside every cluster (JRC; -1 pads clusters smaller than
        ``k_cluster``).

    Returns
    -------
    Dataset
        ======================  ==========================================  =================
        variable                dims                                        meaning
        ======================  ==========================================  =================
        ``score``               ``sample``, ``seed``                        score per seed
        ``top_index``           ``seed``, ``rank``                          rows of the top-k
        ``top_score``           ``seed``, ``rank``                          their scores
        ``projection``          ``sample``, ``basis``                       score coordinates
        ``in_sample``           ``sample``                                  in-sample flag
        ``cluster_top_index``   ``seed``, ``cluster``, ``cluster_rank``     top-k per cluster
        ======================  ==========================================  =================

        Coordinates ``sample``, ``seed`` (names), ``rank`` (1 … k) and, with
        ``cluster_top_index``, ``cluster`` (0 … n_clusters - 1) and ``cluster_rank``.
    """
    if not isinstance(scores, da.Array):
        scores = da.from_array(np.asarray(scores))
    if scores.shape[1] != len(seed_names):
        raise InvalidInputError(
            f"{scores.shape[1]} score columns but {len(seed_names)} seed names."
        )
    idx, val = top_k_graph(scores, k)
    n = scores.shape[0]
    coords = {
        "sample": np.arange(n) if sample is None else np.asarray(sample),
        "seed": np.asarray([str(s) for s in seed_names], dtype=object),
        "rank": np.arange(1, idx.shape[1] + 1),
    }
    ds = xr.Dataset(
        {
            "score": (("sample", "seed"), scores),
            "top_index": (("seed", "rank"), idx),
            "top_score": (("seed", "rank"), val),
        },
        coords=coords,
        attrs=dict(attrs or {}),
    )
    ds["score"].attrs["description"] = "KPPR score of every point for each named seed"
    ds["top_index"].attrs["description"] = "row index (sample coordinate position) of the top-k"
    if projection is not None:
        ds["projection"] = (("sample", "basis"), projection)
        ds["projection"].attrs["description"] = (
            "score coordinates [d/Vol, beta sqrt(d) z'] of every row: a seed's scores are "
            "projection @ [1; m'_s] (dkernel.seed_scores)"
        )
    if in_sample is not None:
        if not isinstance(in_sample, da.Array):
            in_sample = da.from_array(np.asarray(in_sample), chunks=scores.chunks[0])
        ds["in_sample"] = (("sample",), in_sample)
    if cluster_top_index is not None:
        ds["cluster_top_index"] = (("seed", "cluster", "cluster_rank"), cluster_top_index)
        n_clusters, k_cluster = cluster_top_index.shape[1:]
        ds = ds.assign_coords(
            cluster=np.arange(n_clusters), cluster_rank=np.arange(1, k_cluster + 1)
        )
        ds["cluster_top_index"].attrs["description"] = (
            "top-k rows inside each cluster for each seed (-1 pads clusters smaller than k)"
        )
    return ds
