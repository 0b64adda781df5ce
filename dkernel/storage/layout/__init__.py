"""The store layout: one builder per group of a results store.

A job step fits, then hands its numbers to the group's builder here and writes the dataset
it returns with :meth:`dkernel.ResultsStore.write`, which adds the CF ``long_name`` /
``units`` / ``description`` of every variable (:mod:`dkernel.storage.attributes`) and the
group's completion marker. The builders' docstrings are the layout's single source: the
variables, their dims, coordinates and fixed attributes of every group.

==================  ==============================================  ===============================================
group               builder                                         written by
==================  ==============================================  ===============================================
``/input``          :func:`input_dataset`                           every job
``/kernel``         :func:`kernel_dataset`                          ``rbf-spectral``, ``pck-spectral`` (on request)
``/features``       :func:`features_dataset`                        ``pck-spectral`` (on request)
``/embedding``      :func:`embedding_dataset`                       spectral, PCK and ranking jobs
``/landmarks``      :func:`landmarks_dataset`                       ``spectral-clustering``, ``kernel-kmeans``
``/labels``         :func:`labels_dataset`                          clustering jobs
``/metrics``        :func:`metrics_dataset`                         jobs with ground truth, ``kppr``
``/gmm``            :func:`gmm_dataset`                             ``pck-spectral``
``/ranking``        :func:`ranking_dataset`                         ``kppr``, ``jrc``
``/mssc``           :func:`mssc_dataset`                            ``mssc``
``/decomposition``  :func:`decomposition_dataset`                   ``kernel-decomposition``
``/posteriors``     :func:`posteriors_dataset`                      ``kernel-decomposition``
``/selection``      :func:`selection_dataset`                       ``kernel-decomposition`` (a grid)
``/map``            :func:`~dkernel.storage.geo.map_dataset`        clustering jobs on image readers
``/map``            :func:`~dkernel.storage.geo.score_map_dataset`  ranking jobs on image readers
``/change``         :func:`change_dataset`                          ``change-detection``
``/model_order``    :func:`model_order_dataset`                     clustering jobs with ``n_clusters: auto``
==================  ==============================================  ===============================================

The root's attributes (job spec, versions, seed, timings, status) are written by
:class:`~dkernel.ResultsStore` itself.
"""

from __future__ import annotations

from collections.abc import Callable

import xarray as xr

from dkernel.storage.geo import map_dataset, score_map_dataset
from dkernel.storage.layout.change import change_dataset
from dkernel.storage.layout.core import input_dataset, labels_dataset, metrics_dataset
from dkernel.storage.layout.decomposition import (
    decomposition_dataset,
    posteriors_dataset,
    selection_dataset,
)
from dkernel.storage.layout.gmm import gmm_dataset
from dkernel.storage.layout.model_order import model_order_dataset, model_order_from_dataset
from dkernel.storage.layout.mssc import mssc_dataset
from dkernel.storage.layout.ranking import ranking_dataset
from dkernel.storage.layout.spectral import (
    embedding_dataset,
    features_dataset,
    kernel_dataset,
    landmarks_dataset,
)

#: Every group a job may write, with the builder(s) of its dataset.
GROUPS: dict[str, tuple[Callable[..., xr.Dataset], ...]] = {
    "input": (input_dataset,),
    "kernel": (kernel_dataset,),
    "features": (features_dataset,),
    "embedding": (embedding_dataset,),
    "landmarks": (landmarks_dataset,),
    "labels": (labels_dataset,),
    "metrics": (metrics_dataset,),
    "gmm": (gmm_dataset,),
    "ranking": (ranking_dataset,),
    "mssc": (mssc_dataset,),
    "decomposition": (decomposition_dataset,),
    "posteriors": (posteriors_dataset,),
    "selection": (selection_dataset,),
    "map": (map_dataset, score_map_dataset),
    "change": (change_dataset,),
    "model_order": (model_order_dataset,),
}

__all__ = [
    "GROUPS",
    "change_dataset",
    "decomposition_dataset",
    "embedding_dataset",
    "features_dataset",
    "gmm_dataset",
    "input_dataset",
    "kernel_dataset",
    "labels_dataset",
    "landmarks_dataset",
    "map_dataset",
    "metrics_dataset",
    "model_order_dataset",
    "model_order_from_dataset",
    "mssc_dataset",
    "posteriors_dataset",
    "ranking_dataset",
    "score_map_dataset",
    "selection_dataset",
]
