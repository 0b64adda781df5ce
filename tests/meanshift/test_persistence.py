"""Merging mean-shift basins by their passes, against slow, obvious references."""

from __future__ import annotations

import numpy as np
import pytest

from dkernel import MeanShift
from dkernel.errors import DegenerateClusteringWarning
from dkernel.meanshift.kernels import log_density
from dkernel.meanshift.persistence import basin_passes, merge_by_persistence


def _slow_log_density(P, D, h, w=None):
    w = np.ones(len(D)) if w is None else w
    return np.array(
        [np.log(np.sum(w * np.exp(-np.sum((D - p) ** 2, axis=1) / (2 * h * h)))) for p in P]
    )


def _slow_passes(S, labels, dens, k):
    best = {}
    for a in range(len(S)):
        dist = np.sum((S - S[a]) ** 2, axis=1)
        dist[a] = np.inf
        for b in np.argsort(dist, kind="stable")[:k]:
            if labels[a] != labels[b]:
                key = (min(labels[a], labels[b]), max(labels[a], labels[b]))
                best[key] = max(best.get(key, -np.inf), min(dens[a], dens[b]))
    return best


def test_log_density_equals_the_sum_of_gaussians():
    rng = np.random.default_rng(0)
    D, P, w = rng.normal(size=(40, 3)), rng.normal(size=(7, 3)), rng.uniform(0.5, 2, 40)
    np.testing.assert_allclose(log_density(P, D, 0.7, w), _slow_log_density(P, D, 0.7, w))
    # far from every density point: finite, where the plain sum underflows to log(0)
    far = log_density(np.full((1, 3), 1e3), D, 0.1)
    assert np.isfinite(far).all() and far[0] < -1e6


def test_passes_equal_the_highest_cross_edge_of_each_pair():
    rng = np.random.default_rng(1)
    S = rng.normal(size=(60, 2))
    labels = (S[:, 0] > 0).astype(int) + 2 * (S[:, 1] > 0.5)
    dens = rng.normal(size=60)
    first, second, height = basin_passes(S, labels, dens, 4)
    slow = _slow_passes(S, labels, dens, 4)
    assert dict(
        zip(zip(first.tolist(), second.tolist(), strict=True), height.tolist(), strict=True)
    ) == pytest.approx(slow)


def _strip_and_blob(rng):
    """A long Gaussian strip (at this bandwidth mean shift finds several shallow modes along
    it) and a separate blob."""
    strip = np.column_stack([rng.normal(0, 3.0, 600), rng.normal(0, 0.3, 600)])
    blob = rng.normal([0, 5], 0.3, size=(150, 2))
    return np.vstack([strip, blob]), np.r_[np.zeros(600, int), np.ones(150, int)]


def test_shallow_modes_of_an_even_strip_join_and_a_separate_blob_stays():
    rng = np.random.default_rng(0)
    X, y = _strip_and_blob(rng)
    kw = dict(bandwidth=0.4, projection=None, tol=0.02)
    split = MeanShift(saddle_ratio=None, **kw).fit(X)
    joined = MeanShift(saddle_ratio=0.8, **kw).fit(X)
    assert split.n_partitions_ > 2  # the strip's shallow modes
    assert joined.n_partitions_ == 2
    from sklearn.metrics import adjusted_rand_score

    assert adjusted_rand_score(y, joined.labels_) > 0.99
    assert (joined.predict(X) == joined.labels_).mean() > 0.99


def test_merging_matches_a_slow_union_of_passes():
    rng = np.random.default_rng(1)
    X, _ = _strip_and_blob(rng)
    ms = MeanShift(bandwidth=0.4, projection=None, tol=0.02, saddle_ratio=None).fit(X)
    labels, modes = ms.seed_labels_, ms.modes_
    S, D, h = ms.seeds_, ms.density_, ms.bandwidth_
    assert len(modes) > 3
    for ratio in (0.5, 0.8, 0.95):
        new, kept = merge_by_persistence(labels, modes, S, D, h, ratio, n_neighbors=10)
        if ratio == 0.5:
            assert len(kept) < len(modes)
        # slow: union every pair whose pass reaches ratio × the lower current peak, highest
        # pass first, until two groups are left
        peak = _slow_log_density(modes, D, h)
        passes = _slow_passes(S, labels, _slow_log_density(S, D, h), 10)
        group = list(range(len(modes)))
        top = list(range(len(modes)))  # the peak each group keeps
        for (i, j), height in sorted(passes.items(), key=lambda kv: -kv[1]):
            if len(set(group)) <= 2:
                break
            gi, gj = group[i], group[j]
            if gi == gj or height < np.log(ratio) + min(peak[top[gi]], peak[top[gj]]):
                continue
            keep, drop = (gi, gj) if peak[top[gi]] >= peak[top[gj]] else (gj, gi)
            group = [keep if g == drop else g for g in group]
        slow = np.array(group)[labels]
        assert len(np.unique(new)) == len(np.unique(slow)) == len(kept)
        # the same partition of the seeds
        pairs = {(a, b) for a, b in zip(new.tolist(), slow.tolist(), strict=True)}
        assert len(pairs) == len(kept)


def test_the_last_two_groups_never_merge():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(600, 2))
    with pytest.warns(DegenerateClusteringWarning):  # many modes: the point of the test
        ms = MeanShift(bandwidth=0.15, projection=None, min_cluster_size=0, saddle_ratio=None).fit(
            X
        )
    assert ms.n_partitions_ > 2
    labels, modes = merge_by_persistence(
        ms.seed_labels_, ms.modes_, ms.seeds_, ms.density_, ms.bandwidth_, 1e-9, n_neighbors=10
    )
    assert len(modes) == 2 and set(np.unique(labels)) == {0, 1}
