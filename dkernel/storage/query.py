"""Query a results store from a notebook: its ``/ranking`` group (lazy, no cluster needed)
and the evidence of a number of clusters chosen by ``n_clusters: auto`` (``/model_order``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from dkernel.errors import InvalidInputError, StoreError
from dkernel.storage.store import open_results

if TYPE_CHECKING:
    from dkernel.model_order import ModelOrder


def _ranking(store: str | Path):
    tree = open_results(store)
    if "ranking" not in tree.children:
        raise StoreError(f"{store} has no /ranking group; it was not written by a ranking job.")
    return tree["ranking"].to_dataset()


def seed_scores(store: str | Path, rows: Any, *, weights: Any = None) -> np.ndarray:
    """Scores of every stored row for a seed chosen after the job, from the stored projection.

    The seed is uniform over ``rows`` (or weighted by ``weights``); its restart mean is
    ``m'_s = Σ_i w_i z'_i / (β d̂_i)`` from the stored coordinates of the seed rows (Def. 3; for
    in-sample rows this equals the in-sample mean, by the Nyström property), and every row's
    score is ``z_i · [1; m'_s]``: O(k) per row, no kernel, no cluster.

    Parameters
    ----------
    store : path (or URL, ``s3://...``) of a results store written by a ``kppr`` job with
        ``store_projection``.
    rows : int or sequence of int
        Row positions (along ``sample``) of the seed points.
    weights : sequence of float, optional
        Non-negative seed weights, one per row (normalised to sum to one).

    Returns
    -------
    ndarray (n,)
        Scores in the stored precision.

    Examples
    --------
    >>> seed_scores("results/kppr.zarr", [12, 40])  # doctest: +SKIP
    """
    ds = _ranking(store)
    if "projection" not in ds:
        raise StoreError(
            f"{store} holds scores for its named seeds only (no projection); rerun the kppr job "
            "with params.store_projection: true to rank for new seeds from the store."
        )
    n = int(ds.sizes["sample"])
    idx = np.atleast_1d(np.asarray(rows))
    if idx.size == 0 or idx.ndim != 1 or not np.issubdtype(idx.dtype, np.integer):
        raise InvalidInputError(f"rows must be one or more integer row positions; got {rows!r}.")
    if np.any((idx < -n) | (idx >= n)):
        raise InvalidInputError(
            f"rows {idx[(idx < -n) | (idx >= n)].tolist()} are outside [0, {n})."
        )
    idx = idx % n
    if weights is None:
        w = np.full(idx.size, 1.0 / idx.size)
    else:
        w = np.asarray(weights, dtype=np.float64).ravel()
        if w.shape != idx.shape or np.any(w < 0) or not np.isfinite(w).all() or w.sum() <= 0:
            raise InvalidInputError(
                "weights must be finite, non-negative, one per row, and not all zero."
            )
        w = w / w.sum()
    Z = ds["projection"]
    Zs = np.asarray(Z[idx].values, dtype=np.float64)
    beta, volume = float(ds.attrs["beta"]), float(ds.attrs["volume"])
    d_hat = volume * Zs[:, 0]
    if not np.all(d_hat > 0):
        raise InvalidInputError(
            "a seed row has zero affinity to every in-sample point; it cannot seed a ranking."
        )
    mean = (w / (beta * d_hat)) @ Zs[:, 1:]
    head = np.concatenate([[1.0], mean]).astype(Z.dtype)
    return np.asarray((Z.data @ head).compute())


def _select(col: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    kk = min(k, col.size)
    cand = np.argpartition(-col, kk - 1)[:kk]
    order = np.lexsort((cand, -col[cand]))
    return cand[order], col[cand[order]]


def top_k(store: str | Path, seed: Any, k: int = 10) -> pd.DataFrame:
    """The ``k`` best-ranked points of a store for a named seed or for seed rows.

    A named seed uses the stored ``top_index``/``top_score`` when they hold at least ``k``
    ranks; otherwise it reads the seed's score column (O(N) read, lazily) and selects. Seed
    rows (an int or a list of ints) are ranked from the stored projection (:func:`seed_scores`).

    Parameters
    ----------
    store : path (or URL, ``s3://...``) of a results store with a ``/ranking`` group.
    seed : str, int or sequence of int
        A seed name (``tree['ranking'].seed`` lists them), or row positions of seed points.
    k : int

    Returns
    -------
    pandas.DataFrame
        Indexed by rank (1..k), columns ``index`` (row position), ``sample`` (the sample
        coordinate) and ``score``.

    Examples
    --------
    >>> top_k("results/kppr.zarr", "class_0", k=5)  # doctest: +SKIP
    >>> top_k("results/kppr.zarr", [12, 40], k=5)  # doctest: +SKIP
    """
    if not isinstance(k, int | np.integer) or k < 1:
        raise InvalidInputError(f"k must be an int >= 1; got {k!r}.")
    ds = _ranking(store)
    if not isinstance(seed, str):
        idx, val = _select(np.asarray(seed_scores(store, seed), dtype=np.float64), k)
        return _frame(ds, idx, val)
    names = [str(s) for s in ds["seed"].values]
    if seed not in names:
        raise InvalidInputError(
            f"unknown seed {seed!r} in {store}. Stored seeds: {', '.join(names)}."
        )
    j = names.index(seed)
    if "top_index" in ds and ds.sizes.get("rank", 0) >= k:
        idx = np.asarray(ds["top_index"][j, :k].values, dtype=np.int64)
        val = np.asarray(ds["top_score"][j, :k].values, dtype=np.float64)
    else:
        idx, val = _select(np.asarray(ds["score"][:, j].values, dtype=np.float64), k)
    return _frame(ds, idx, val)


def _frame(ds, idx: np.ndarray, val: np.ndarray) -> pd.DataFrame:
    sample = np.asarray(ds["sample"].values)[idx]
    return pd.DataFrame(
        {"index": idx, "sample": sample, "score": val},
        index=pd.RangeIndex(1, idx.size + 1, name="rank"),
    )


def read_model_order(
    store: str | Path, *, storage_options: dict[str, Any] | None = None
) -> ModelOrder | None:
    """The evidence of the number of clusters a job chose (``n_clusters: auto``), read back
    from the store's ``/model_order`` group; None when the job was given its number.

    Examples
    --------
    >>> order = read_model_order("results/spectral.zarr")  # doctest: +SKIP
    >>> order.n_clusters, order.rule  # doctest: +SKIP
    (4, 'timescale-gap')
    """
    from dkernel.storage.layout.model_order import model_order_from_dataset

    tree = open_results(store, storage_options=storage_options)
    if "model_order" not in tree.children:
        return None
    return model_order_from_dataset(tree["model_order"].to_dataset())
