"""The spectral initialization of deep divergence-based clustering (``init='spectral'``).

Started from random weights, DDC's network settles within a few epochs on whichever partition
its first batches favour, and on the MNIST subset that was a different one for every seed
(ACC 0.53 to 0.74 after ten epochs over nine seeds, ``benchmarks/results/ddc.md``). Here the
network starts instead from a kernel clustering of the data: it is trained (cross-entropy) to
reproduce :class:`~dkernel.SpectralClustering`'s partition of a sample of the rows, that sample
is clustered spectrally again in the network's hidden layer and the network trained on the new
partition, ``INIT_ROUNDS`` times in all (a partition in learned features, as in DeepCluster,
Caron et al. 2018); then the DDC loss takes over.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dkernel._random import derive_rng, derive_seed
from dkernel.deep._ddc_training import hidden_array
from dkernel.deep._torch import require_torch
from dkernel.kernels.widths import DEFAULT_LOCAL_SCALING_NEIGHBORS
from dkernel.linalg.kmeans import euclidean_kmeans, normalize_rows
from dkernel.model_order import ModelOrder, candidate_range, spectrum_model_order
from dkernel.rows import take_rows
from dkernel.spectral.sparse import GRAPH_NEIGHBORS, ONE_SIDED_WEIGHT, fit_sparse_embedding

#: The rows the initialization clusters and trains on: all of them, or a uniform sample.
INIT_MAX_SAMPLES = 10_000
#: Fewer rows than this: no spectral step (a k-NN graph of a few dozen points says little).
INIT_MIN_SAMPLES = 50
#: Partitions the network is trained on (the first of the input, the others of its hidden
#: layer), and the epochs of cross-entropy on each.
INIT_ROUNDS = 3
INIT_EPOCHS = 3
#: Adam's learning rate of the cross-entropy epochs (the CNN's of Section 4.6).
INIT_LEARNING_RATE = 1e-3
#: The start's spectral partitions embed the rows in this many times ``n_clusters``
#: eigenvectors before k-means. Where classes overlap, a within-class variation can take one of
#: the leading k directions (the slant of MNIST's ones, split into two clusters, while fours and
#: nines shared one): a few more leave k-means the between-class ones. The MNIST subset of
#: ``benchmarks/bench_ddc.py``, seeds 0-4: DDC ACC 0.844-0.879 (mean 0.862) against
#: 0.801-0.809 with k; the first partition on its pixels 0.810 against 0.765. On
#: scikit-learn's digits (grey levels / 16, the fully connected network), seeds 0-2: DDC ACC
#: 0.921 / 0.953 / 0.941 against 0.892 / 0.867 / 0.888; the first partition 0.951 against
#: 0.869 (1.2 k: 0.889; 2 k: 0.886).
#: :class:`~dkernel.SpectralClustering`'s own default stays k: as a clusterer, 1.5 k lowered
#: its mean ARI on the real sets of ``benchmarks/bench_realdata.py`` (0.451 to 0.438, seed 0).
INIT_EMBEDDING_FACTOR = 1.5


def init_rows(X: Any, seed: int) -> np.ndarray:
    """The rows of ``X`` the initialization uses (sorted indices; all when few enough)."""
    n = int(X.shape[0])
    if n <= INIT_MAX_SAMPLES:
        return np.arange(n)
    rng = derive_rng(seed, "ddc-init-rows")
    return np.sort(rng.choice(n, INIT_MAX_SAMPLES, replace=False))


def spectral_init(
    net: Any, X: Any, shape: tuple[int, ...], n_clusters: int, batch_size: int, seed: int
) -> list[np.ndarray]:
    """Train ``net`` in place on spectral partitions of a sample of ``X``; returns the
    partitions it was trained on (of the rows :func:`init_rows` picks)."""
    torch = require_torch("DeepDivergenceClustering")
    sample = take_rows(X, init_rows(X, seed), np.float32).reshape((-1, *shape))
    optimizer = torch.optim.Adam(net.parameters(), lr=INIT_LEARNING_RATE)
    features = sample.reshape(len(sample), -1).astype(np.float64)
    partitions = []
    for round_ in range(INIT_ROUNDS):
        labels = spectral_partition(
            features, n_clusters, derive_seed(seed, "ddc-init-spectral", round_)
        )
        partitions.append(labels)
        target = torch.from_numpy(labels.astype(np.int64))
        for epoch in range(INIT_EPOCHS):
            rng = derive_rng(seed, "ddc-init-epoch", round_, epoch)
            _cross_entropy_epoch(torch, net, optimizer, sample, target, batch_size, rng)
        if round_ + 1 < INIT_ROUNDS:
            features = hidden_array(net, sample)
    return partitions


def _exact_path_embedding(
    features: np.ndarray, n_components: int, seed: int, max_pieces: int | None = None
) -> tuple:
    """``fit_sparse_embedding`` as :class:`~dkernel.SpectralClustering`'s exact path runs it at
    its defaults: the nearly mutual self-tuning k-NN graph (its size clamped to the distinct
    rows, its pieces joined down to ``max_pieces``, by default ``n_components``), NJW
    coordinates."""
    n_neighbors = DEFAULT_LOCAL_SCALING_NEIGHBORS
    distinct = np.unique(features, axis=0).shape[0]
    graph = min(max(GRAPH_NEIGHBORS, n_neighbors), distinct - 1)
    return fit_sparse_embedding(
        features,
        min(n_components, distinct - 1),
        n_neighbors=min(n_neighbors, graph),
        graph_neighbors=graph,
        seed=seed,
        coordinates="njw",
        one_sided_weight=ONE_SIDED_WEIGHT,
        max_pieces=n_components if max_pieces is None else max_pieces,
    )


def init_components(n_clusters: int) -> int:
    """The embedding dimension of the start's spectral partitions:
    ``round(INIT_EMBEDDING_FACTOR · n_clusters)``, at least ``n_clusters``."""
    return max(int(n_clusters), int(round(INIT_EMBEDDING_FACTOR * n_clusters)))


def spectral_partition(features: np.ndarray, n_clusters: int, seed: int) -> np.ndarray:
    """The partition of :class:`~dkernel.SpectralClustering`'s exact path at its defaults
    (the nearly mutual self-tuning k-NN graph, NJW, k-means) in :func:`init_components`
    dimensions, as ``SpectralClustering(n_clusters, n_components=init_components(n_clusters),
    random_state=seed).fit(features).labels_`` gives it on up to 5 000 rows; the estimator
    itself is another family's (``tests/test_layers.py``)."""
    # the graph's pieces joined down to n_clusters, as SpectralClustering joins them
    Z, _ = _exact_path_embedding(features, init_components(n_clusters), seed, n_clusters)
    labels, _, _ = euclidean_kmeans(
        normalize_rows(np.asarray(Z)), n_clusters, random_state=derive_seed(seed, "kmeans")
    )
    return labels


def spectral_model_order(features: np.ndarray, seed: int) -> ModelOrder:
    """The number of clusters :class:`~dkernel.SpectralClustering` ``(n_clusters='auto')``
    chooses on ``features`` on its exact path at its defaults: the timescale-gap rule of
    :mod:`dkernel.model_order` on the spectrum of the same graph as
    :func:`spectral_partition`, candidates 2 .. ``round(√n)`` clipped to [10, 50]."""
    n = int(features.shape[0])
    candidates = candidate_range(n, owner="DeepDivergenceClustering(n_clusters='auto')")
    _, model = _exact_path_embedding(features, int(candidates[-1]) + 1, seed)
    candidates = candidates[candidates < model.spectrum.size]
    return spectrum_model_order(model.spectrum, candidates)


def _cross_entropy_epoch(
    torch: Any,
    net: Any,
    optimizer: Any,
    sample: np.ndarray,
    target: Any,
    batch_size: int,
    rng: np.random.Generator,
) -> None:
    net.train()
    order = rng.permutation(len(sample))
    for start in range(0, len(sample), batch_size):
        batch = order[start : start + batch_size]
        if batch.size < 2:  # batch normalization needs two rows
            continue
        _, assignments = net(torch.from_numpy(sample[batch]))
        loss = torch.nn.functional.nll_loss(torch.log(assignments + 1e-9), target[batch])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
