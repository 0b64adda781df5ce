"""Writers shared by job methods for the groups every clustering method produces."""

from __future__ import annotations

from typing import Any

import numpy as np
import xarray as xr

from dkernel.jobs.registry import JobContext
from dkernel.metrics import clustering_scores


def write_clustering_metrics(ctx: JobContext, y_true: Any, labels: Any) -> dict[str, float]:
    """Score ``labels`` against the ground truth and write ``/metrics`` (ACC, NMI, ARI).

    The scores are stored both as 0-d variables and as the group's attributes, and logged.
    """
    scores = clustering_scores(np.asarray(y_true), np.asarray(labels))
    ctx.store.write("metrics", xr.Dataset({k: ((), v) for k, v in scores.items()}, attrs=scores))
    ctx.log("[dkernel] " + ", ".join(f"{k.upper()} {v:.3f}" for k, v in scores.items()))
    return scores
