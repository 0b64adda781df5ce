"""Query a results store's ``/ranking`` group from a notebook: lazy, no cluster needed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from dkernel.errors import InvalidInputError, StoreError
from dkernel.storage import open_results


def top_k(store: str | Path, seed: str, k: int = 10) -> pd.DataFrame:
    """The ``k`` best-ranked points of a store for one named seed.

    Uses the stored ``top_index``/``top_score`` when they hold at least ``k`` ranks; otherwise
    reads the seed's score column (O(N) read, lazily) and selects.

    Parameters
    ----------
    store : path of a results store with a ``/ranking`` group.
    seed : str
        A seed name (``tree['ranking'].seed`` lists them).
    k : int

    Returns
    -------
    pandas.DataFrame
        Indexed by rank (1..k), columns ``index`` (row position), ``sample`` (the sample
        coordinate) and ``score``.

    Examples
    --------
    >>> top_k("results/kppr.zarr", "class_0", k=5)  # doctest: +SKIP
    """
    if not isinstance(k, int | np.integer) or k < 1:
        raise InvalidInputError(f"k must be an int >= 1; got {k!r}.")
    tree = open_results(store)
    if "ranking" not in tree.children:
        raise StoreError(f"{store} has no /ranking group; it was not written by a ranking job.")
    ds = tree["ranking"].to_dataset()
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
        col = np.asarray(ds["score"][:, j].values, dtype=np.float64)
        kk = min(k, col.size)
        cand = np.argpartition(-col, kk - 1)[:kk]
        order = np.lexsort((cand, -col[cand]))
        idx, val = cand[order], col[cand[order]]
    sample = np.asarray(ds["sample"].values)[idx]
    return pd.DataFrame(
        {"index": idx, "sample": sample, "score": val},
        index=pd.RangeIndex(1, idx.size + 1, name="rank"),
    )
