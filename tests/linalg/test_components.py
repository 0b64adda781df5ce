"""Joining a graph's components by single linkage, against brute-force references."""

from __future__ import annotations

import numpy as np
from scipy.cluster.hierarchy import fcluster, linkage
from scipy.spatial.distance import squareform

from dkernel.linalg.components import component_distances, single_linkage_links


def _data(seed: int = 0, m: int = 60, count: int = 7):
    rng = np.random.default_rng(seed)
    features = (
        rng.normal(size=(m, 3))
        + rng.normal(scale=4, size=(count, 3))[labels := rng.permutation(np.arange(m) % count)]
    )
    return features, labels, rng.uniform(0, 0.5, m)


def _pair_distances(features, extra):
    diff = features[:, None, :] - features[None, :, :]
    D = (diff**2).sum(axis=2) + extra[:, None] + extra[None, :]
    np.fill_diagonal(D, 0.0)
    return D


def test_component_distances_are_the_least_over_pairs_of_points(monkeypatch):
    features, labels, extra = _data()
    D = _pair_distances(features, extra)
    count = labels.max() + 1
    expected = np.array(
        [[D[np.ix_(labels == a, labels == b)].min() for b in range(count)] for a in range(count)]
    )
    np.fill_diagonal(expected, 0.0)
    # blocks of 7 rows: the minimum is taken across blocks as within one
    monkeypatch.setattr("dkernel.linalg.components.SCRATCH_BLOCK_BYTES", 7 * 8 * len(labels))
    np.testing.assert_allclose(component_distances(features, labels, extra), expected, atol=1e-10)
    np.testing.assert_allclose(
        component_distances(features, labels),
        component_distances(features, labels, np.zeros(len(labels))),
    )


def _groups(labels, links):
    """Each component's group after joining the components the links join (union-find)."""
    parent = list(range(labels.max() + 1))

    def root(c):
        while parent[c] != c:
            c = parent[c]
        return c

    for i, j, _ in links:
        parent[root(labels[i])] = root(labels[j])
    return np.array([root(c) for c in range(labels.max() + 1)])


def _same_partition(a, b):
    pairs_a = a[:, None] == a[None, :]
    pairs_b = b[:, None] == b[None, :]
    return bool(np.all(pairs_a == pairs_b))


def test_links_give_the_single_linkage_partition_of_the_components():
    for seed in range(5):
        features, labels, extra = _data(seed)
        # single linkage of the points, the points of a component at distance 0 from each other
        D = _pair_distances(features, extra)
        D[labels[:, None] == labels[None, :]] = 0.0
        tree = linkage(squareform(np.sqrt(D), checks=False), method="single")
        for n_groups in (1, 2, 4, 6):
            by_points = fcluster(tree, n_groups, criterion="maxclust")
            reference = np.array([by_points[labels == c][0] for c in range(labels.max() + 1)])
            links = list(zip(*single_linkage_links(features, labels, n_groups, extra), strict=True))
            assert len(links) == labels.max() + 1 - n_groups
            assert _same_partition(_groups(labels, links), reference)
            for i, j, d2 in links:  # each link is its two components' closest pair
                assert labels[i] != labels[j]
                between = _pair_distances(features, extra)[
                    np.ix_(labels == labels[i], labels == labels[j])
                ]
                np.testing.assert_allclose(d2, between.min(), atol=1e-10)


def test_no_links_when_there_are_no_more_components_than_groups():
    features, labels, extra = _data(count=4)
    for n_groups in (4, 9):
        assert all(a.size == 0 for a in single_linkage_links(features, labels, n_groups, extra))
