"""The ``/mssc`` group: mean-shift spectral clustering of an image, maps and second stage."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import xarray as xr

from dkernel.storage.geo import LABEL_NODATA, label_map, valid_mask, with_crs_attrs


def mssc_dataset(
    *,
    labels: Any,
    partition: Any,
    valid: Any,
    image: xr.DataArray,
    modes: Any,
    partition_labels: Any,
    partition_sizes: Any,
    affinity: Any,
    embedding: Any,
    eigenvalues: Any,
    density: Any,
    seeds: Any,
    seed_partition: Any,
    spectrum: Any = None,
    attrs: Mapping[str, Any] | None = None,
) -> xr.Dataset:
    """The ``/mssc`` group: label and partition maps with the image's CRS, and the fit.

    Parameters
    ----------
    labels, partition : array-like or dask.array.Array (y, x)
        Cluster and stage-one partition of every pixel on ``image``'s grid,
        ``LABEL_NODATA`` (-1) where the pixel has no data.
    valid : array-like or dask.array.Array of bool (y, x)
        The pixels that were clustered.
    image : DataArray
        The source image ``(band, y, x)``: its coordinates, CRS and transform go onto the maps.
    modes : ndarray (n_partitions, n_features)
    partition_labels, partition_sizes : ndarray (n_partitions,)
    affinity : ndarray (n_partitions, n_partitions)
        Cauchy–Schwarz affinity between the partitions.
    embedding : ndarray (n_partitions, n_components)
    eigenvalues : ndarray (n_components,)
    density : ndarray (n_density, n_features)
        The feature vectors the mean-shift density is built from.
    seeds : ndarray (n_seeds, n_features)
    seed_partition : ndarray (n_seeds,)
    spectrum : ndarray (n_rank,), optional
        Leading eigenvalues (descending) the number of clusters was chosen from
        (``n_clusters='auto'``: the eigengap; attribute ``n_clusters_chosen``).
    attrs : mapping, optional
        The fit's parameters and diagnostics (bandwidths, ``n_partitions``, ``embedding``,
        ``band_norm``, ``feature_names``, …).

    Returns
    -------
    Dataset
        ====================  =====================================  ==========================
        variable              dims                                   meaning
        ====================  =====================================  ==========================
        ``labels``            ``y``, ``x``                           cluster of every pixel
        ``partition``         ``y``, ``x``                           partition of every pixel
        ``valid``             ``y``, ``x``                           valid pixel mask
        ``modes``             ``partition_id``, ``feature``          mode of every partition
        ``partition_labels``  ``partition_id``                       cluster of every partition
        ``partition_sizes``   ``partition_id``                       pixels per partition
        ``affinity``          ``partition_id``, ``partition_id_``    partition affinity
        ``embedding``         ``partition_id``, ``component``        partition embedding
        ``eigenvalues``       ``component``                          its eigenvalues
        ``density``           ``density_point``, ``feature``         density sample
        ``seeds``             ``seed``, ``feature``                  mean-shift seeds
        ``seed_partition``    ``seed``                               partition of every seed
        ``spectrum``          ``rank``                               eigengap evidence
        ====================  =====================================  ==========================

        The maps are georeferenced as :func:`~dkernel.storage.geo.georeference` describes;
        attributes: the given ``attrs``, ``nodata`` and, for a georeferenced image, ``crs``
        and ``transform``.
    """
    variables = {} if spectrum is None else {"spectrum": (("rank",), spectrum)}
    ds = xr.Dataset(
        {
            "labels": label_map(labels, image),
            "partition": label_map(partition, image, name="partition"),
            "valid": valid_mask(valid, image),
            "modes": (("partition_id", "feature"), modes),
            "partition_labels": (("partition_id",), partition_labels),
            "partition_sizes": (("partition_id",), partition_sizes),
            "affinity": (("partition_id", "partition_id_"), affinity),
            "embedding": (("partition_id", "component"), embedding),
            "eigenvalues": (("component",), eigenvalues),
            "density": (("density_point", "feature"), density),
            "seeds": (("seed", "feature"), seeds),
            "seed_partition": (("seed",), seed_partition),
            **variables,
        },
        attrs={**(attrs or {}), "nodata": LABEL_NODATA},
    )
    return with_crs_attrs(ds, image)
