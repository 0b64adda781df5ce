"""What every stored variable is: CF ``long_name``, ``units`` and a ``description``.

One catalogue for the whole store layout. ``ResultsStore.write`` fills in the three
attributes of every data variable from it (attributes a step sets itself win); a name is
looked up as ``group/name`` first, then as ``name``. ``units`` follow CF/UDUNITS: ``"1"`` for
dimensionless numbers, indices and labels. The test ``tests/storage/test_attributes.py``
checks that every variable the example jobs write is described here.
"""

from __future__ import annotations

import xarray as xr

_CENTRE = ("cluster centre", "1", "k-means centre of every cluster in the embedding")
_PIXEL_LABEL = (
    "cluster label",
    "1",
    "cluster of every pixel on the image grid; _FillValue (-1) where the pixel has no data",
)

#: name or group/name (a trailing ``*`` matches any rest) -> (long_name, units, description)
VARIABLES: dict[str, tuple[str, str, str]] = {
    # input
    "input/labels_true": ("ground-truth class", "1", "the reader's class of every sample"),
    # labels, map, mssc
    "labels": ("cluster label", "1", "cluster of every sample (0 … n_clusters - 1)"),
    "labels/centers": _CENTRE,
    "labels/cluster_centers": _CENTRE,
    "map/labels": _PIXEL_LABEL,
    "mssc/labels": _PIXEL_LABEL,
    "mssc/partition": (
        "mean-shift partition",
        "1",
        "stage-one partition (mode) of every pixel; _FillValue (-1) where the pixel has no data",
    ),
    "valid": ("valid pixel mask", "1", "true where the pixel has data and was clustered"),
    "mssc/modes": ("mean-shift mode", "1", "mode of every partition in feature space"),
    "mssc/partition_labels": ("partition cluster", "1", "output cluster of every partition"),
    "mssc/partition_sizes": ("partition size", "1", "pixels in every partition"),
    "mssc/affinity": (
        "partition affinity",
        "1",
        "Cauchy-Schwarz affinity between partitions (normalized as normalization_chosen says)",
    ),
    "mssc/embedding": ("partition embedding", "1", "spectral embedding of the partitions"),
    "mssc/density": (
        "density sample",
        "1",
        "feature vectors the mean-shift density estimate is built from",
    ),
    "mssc/seeds": ("mean-shift seed", "1", "starting vectors of the mode search"),
    "mssc/seed_partition": ("seed partition", "1", "partition every seed converged to"),
    # embedding / eigen problems
    "embedding": ("embedding", "1", "coordinates of every sample in the kernel embedding"),
    "eigenvalues": ("eigenvalue", "1", "eigenvalue of every embedding component"),
    "degrees": ("degree", "1", "kernel row sum (graph degree) of every sample"),
    "criterion": (
        "selection criterion",
        "1",
        "the score the components were ordered by (see the group's ordering attribute)",
    ),
    "eigen_index": ("eigen index", "1", "index of the eigenpair each component is"),
    "spectrum": ("eigenvalue spectrum", "1", "leading eigenvalues of the kernel matrix"),
    "global_rank": (
        "global rank score",
        "1",
        "stationary (degree-proportional) PageRank score of every sample",
    ),
    "fit_index": ("fit sample index", "1", "row of every in-sample point in the input"),
    "index": ("landmark index", "1", "row of every landmark in the input"),
    "landmarks/landmarks": ("landmark", "1", "landmark feature vectors of the Nyström method"),
    # kernel and features
    "kernel": ("kernel matrix", "1", "kernel value of every pair of samples"),
    "features": ("feature map", "1", "explicit kernel feature map of every sample"),
    # posteriors, decomposition
    "posteriors": ("cluster posterior", "1", "posterior probability of every cluster"),
    "priors": ("cluster prior", "1", "prior probability of every cluster"),
    "W": ("decomposition factor W", "1", "sample-by-cluster factor of the kernel decomposition"),
    "H": ("decomposition factor H", "1", "cluster-by-sample factor of the kernel decomposition"),
    # model selection
    "accuracy": ("accuracy", "1", "fraction of samples assigned to their majority cluster"),
    "confidence": ("confidence", "1", "mean maximum posterior"),
    "error": ("held-out error", "1", "held-out reconstruction error of every repeat"),
    "error_mean": ("mean held-out error", "1", "held-out error averaged over repeats"),
    "error_sem": ("held-out error SEM", "1", "standard error of the mean held-out error"),
    "error_vs_bandwidth_mean": (
        "mean held-out error by bandwidth",
        "1",
        "held-out kernel density error for every bandwidth, averaged over repeats",
    ),
    "error_vs_bandwidth_sem": (
        "held-out error SEM by bandwidth",
        "1",
        "standard error of the held-out kernel density error for every bandwidth",
    ),
    # ranking
    "score": ("ranking score", "1", "personalized PageRank score of every sample for each seed"),
    "top_score": ("top score", "1", "the highest scores of every seed, in rank order"),
    "top_index": ("top sample", "1", "row of the highest-scoring samples of every seed"),
    "cluster_top_index": (
        "top sample per cluster",
        "1",
        "row of the highest-scoring samples of every seed within every cluster",
    ),
    "in_sample": ("in-sample flag", "1", "true for the samples the model was fitted on"),
    "projection": (
        "score coordinates",
        "1",
        "[d/Vol, beta sqrt(d) z'] of every row: a seed's scores are projection @ [1; m'_s]",
    ),
    "score_map": (
        "ranking score map",
        "1",
        "ranking score of every pixel for each seed; NaN where the pixel has no data",
    ),
    # Gaussian mixtures
    "means": ("component mean", "1", "mean of every mixture component (per model)"),
    "variances": ("component variance", "1", "diagonal covariance of every component"),
    "covariances": ("component covariance", "1", "full covariance of every component"),
    "weights": ("component weight", "1", "mixing weight of every component"),
    "mean_entropy": (
        "mean posterior entropy",
        "1",
        "average posterior entropy of every model of the ensemble",
    ),
    "location": ("feature location", "1", "per-feature offset subtracted before fitting"),
    "feature_index": ("feature index", "1", "column of the input every feature is"),
    "missing_probs": (
        "missingness probability",
        "1",
        "probability that a feature is missing, per component (PCKID)",
    ),
    "projection_variance_ratio": (
        "explained variance ratio",
        "1",
        "variance captured by every projection axis",
    ),
    "gmm/projection": ("projection axes", "1", "random projection the mixtures are fitted in"),
    # change detection
    "change/variates": (
        "MAD variate",
        "1",
        "difference of the canonical variates of the two dates, least correlated pair first; "
        "NaN where a pixel has no data",
    ),
    "change/intensity": (
        "change intensity",
        "1",
        "sum of the squared MAD variates over their no-change variances (chi-squared); NaN "
        "where a pixel has no data",
    ),
    "change/labels": (
        "change mask",
        "1",
        "1 where the intensity exceeds the threshold, 0 elsewhere; _FillValue (-1) where no data",
    ),
    "change/valid": ("valid pixel mask", "1", "true where the pixel has data at both dates"),
    "change/correlations": ("canonical correlation", "1", "correlation of every canonical pair"),
    "change/sigma": ("MAD variate scale", "1", "no-change standard deviation of every variate"),
    # model order (n_clusters: auto)
    "model_order/n_clusters": (
        "candidate number of clusters",
        "1",
        "a number of clusters the model-order rule scored",
    ),
    "model_order/score": (
        "model-order score",
        "1",
        "the rule's score of every candidate number of clusters (see the rule and "
        "higher_is_better attributes); NaN where undefined",
    ),
    "model_order/spectrum": (
        "eigenvalue spectrum",
        "1",
        "leading eigenvalues (descending) the spectrum rule scored the candidates from",
    ),
    # metrics
    "acc": ("clustering accuracy", "1", "best-matching accuracy against the ground truth"),
    "nmi": ("normalized mutual information", "1", "NMI against the ground truth"),
    "ari": ("adjusted Rand index", "1", "ARI against the ground truth"),
    "metrics/ndcg@10_*": (
        "NDCG@10",
        "1",
        "normalized discounted cumulative gain of the seed's top 10 against exact PageRank",
    ),
}


def lookup(group: str, name: str) -> tuple[str, str, str] | None:
    """The catalogue entry of variable ``name`` in ``group`` (``None`` when undescribed).

    Keys ending in ``*`` describe families of names (one per seed, …).
    """
    for key in (f"{group}/{name}", name):
        if key in VARIABLES:
            return VARIABLES[key]
    for key, entry in VARIABLES.items():
        if key.endswith("*") and f"{group}/{name}".startswith(key[:-1]):
            return entry
    return None


def describe_variables(group: str, dataset: xr.Dataset) -> xr.Dataset:
    """``dataset`` with ``long_name`` / ``units`` / ``description`` on every data variable.

    Attributes already set win; an undescribed variable gets its name as ``long_name``.
    """
    for name, var in dataset.data_vars.items():
        entry = lookup(group, str(name))
        long_name, units, description = entry or (str(name).replace("_", " "), None, None)
        var.attrs.setdefault("long_name", long_name)
        if units is not None:
            var.attrs.setdefault("units", units)
        if description is not None:
            var.attrs.setdefault("description", description)
    return dataset
