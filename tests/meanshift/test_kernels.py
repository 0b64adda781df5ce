"""Mean-shift / MSSC numeric kernels against slow, obvious reference code."""

from __future__ import annotations

import numpy as np
from sklearn.metrics import adjusted_rand_score

from dkernel.meanshift import kernels as K


def _ref_step(x, D, h, w=None):
    w = np.ones(len(D)) if w is None else w
    k = np.array(
        [wi * np.exp(-np.sum((x - d) ** 2) / (2 * h * h)) for d, wi in zip(D, w, strict=True)]
    )
    return (k[:, None] * D).sum(0) / k.sum()


def _blobs(rng, n=60):
    a = rng.normal(0, 0.3, (n, 2))
    b = rng.normal(3, 0.3, (n, 2))
    return np.vstack([a, b])


def test_gaussian_shift_matches_reference(rng):
    D = rng.normal(size=(40, 3))
    P = rng.normal(size=(7, 3))
    w = rng.uniform(0.5, 3, 40)
    got = K.gaussian_shift(P, D, 0.8, w)
    ref = np.array([_ref_step(p, D, 0.8, w) for p in P])
    np.testing.assert_allclose(got, ref, rtol=1e-10, atol=1e-12)
    got32 = K.gaussian_shift(P, D, 0.8, w, dtype=np.float32)
    np.testing.assert_allclose(got32, ref, atol=1e-4)


def test_gaussian_shift_far_point_is_finite():
    D = np.array([[0.0, 0.0], [1.0, 0.0]])
    out = K.gaussian_shift(np.array([[100.0, 0.0]]), D, 0.01)
    np.testing.assert_allclose(out, [[1.0, 0.0]])


def test_nonblurring_matches_reference(rng):
    X = _blobs(rng, 20)
    res = K.mean_shift(X, X, 0.5, max_iter=30, tol=0.0, return_paths=True)
    ref = X.copy()
    for _ in range(30):
        ref = np.array([_ref_step(p, X, 0.5) for p in ref])
    np.testing.assert_allclose(res.ends, ref, atol=1e-9)
    assert res.paths.shape == (31, 40, 2)
    np.testing.assert_allclose(res.density_end, X)


def test_blurring_matches_reference(rng):
    X = _blobs(rng, 15)
    res = K.mean_shift(X, X, 0.5, blurring=True, max_iter=10, tol=0.0)
    ref = X.copy()
    for _ in range(10):
        ref = np.array([_ref_step(p, ref, 0.5) for p in ref])
    np.testing.assert_allclose(res.ends, ref, atol=1e-9)
    np.testing.assert_allclose(res.density_end, ref, atol=1e-9)


def test_blurring_converges_faster(rng):
    X = _blobs(rng, 50)
    nb = K.mean_shift(X, X, 0.6, max_iter=500, tol=1e-4)
    bl = K.mean_shift(X, X, 0.6, blurring=True, max_iter=500, tol=1e-4)
    assert bl.converged and nb.converged
    assert bl.n_iter < nb.n_iter


def test_group_modes_two_blobs(rng):
    X = _blobs(rng, 40)
    res = K.mean_shift(X, X, 0.5)
    tau = K.group_threshold(res.moves, 0.5)
    assert 0.5e-3 <= tau <= 0.25
    labels, modes = K.group_modes(res.ends, tau)
    assert labels.max() == 1
    assert set(labels[:40]) != set(labels[40:])
    np.testing.assert_allclose(sorted(modes[:, 0]), [0, 3], atol=0.2)


def test_group_modes_single_linkage_and_order():
    ends = np.array([[0.0], [0.05], [0.1], [5.0], [5.01]])
    labels, modes = K.group_modes(ends, 0.06, weights=np.array([1, 1, 1, 5, 5.0]))
    assert labels.tolist() == [1, 1, 1, 0, 0]  # heaviest group first
    np.testing.assert_allclose(modes[:, 0], [5.005, 0.05])


def _merge_reference(labels, modes, weights, min_mass):
    """Each small basin's seeds to the nearest kept mode, by a double loop."""
    mass = {m: weights[labels == m].sum() for m in range(len(modes))}
    heaviest = max(mass, key=lambda m: (mass[m], -m))
    kept = [m for m in range(len(modes)) if mass[m] >= min_mass or m == heaviest]
    target = {}
    for m in range(len(modes)):
        if m in kept:
            target[m] = m
        else:
            dists = [np.sum((modes[m] - modes[j]) ** 2) for j in kept]
            target[m] = kept[int(np.argmin(dists))]
    merged = np.array([target[m] for m in labels])
    return merged


def test_merge_small_modes_matches_reference(rng):
    modes = rng.normal(size=(12, 3))
    labels = rng.choice(12, size=300, p=np.r_[[0.2, 0.2, 0.15, 0.15, 0.1, 0.1], [1 / 60] * 6])
    weights = rng.uniform(0.5, 1.5, 300)
    mass = np.bincount(labels, weights=weights, minlength=12)
    order = np.argsort(-mass, kind="stable")  # heaviest first, as group_modes numbers them
    rank = np.empty(12, dtype=int)
    rank[order] = np.arange(12)
    labels, modes = rank[labels], modes[order]
    min_mass = 0.05 * weights.sum()
    got, kept_modes = K.merge_small_modes(labels, modes, weights, min_mass)
    expected = _merge_reference(labels, modes, weights, min_mass)
    # the same partition, numbered heaviest first, each label's mode a kept input mode
    assert adjusted_rand_score(expected, got) == 1.0
    for label in np.unique(got):
        members = np.unique(expected[got == label])
        assert members.size == 1
        np.testing.assert_array_equal(kept_modes[label], modes[members[0]])
    sizes = np.bincount(got, weights=weights)
    assert np.all(np.diff(sizes) <= 0) and sizes.min() >= min_mass


def test_merge_small_modes_keeps_every_heavy_mode_and_the_heaviest():
    labels = np.array([0, 0, 0, 1, 1, 2])
    modes = np.array([[0.0], [5.0], [4.0]])
    same, same_modes = K.merge_small_modes(labels, modes, None, 1.0)
    np.testing.assert_array_equal(same, labels)
    got, kept = K.merge_small_modes(labels, modes, None, 2.0)
    assert got.tolist() == [0, 0, 0, 1, 1, 1]  # the mode at 4 joins the one at 5
    np.testing.assert_array_equal(kept[:, 0], [0.0, 5.0])
    alone, one = K.merge_small_modes(labels, modes, None, 10.0)
    assert alone.tolist() == [0] * 6 and one.shape == (1, 1)


def test_grid_seeds(rng):
    X = rng.uniform(0, 1, (300, 2))
    c, n = K.grid_seeds(X, 0.5)
    assert n.sum() == 300 and len(c) == 4
    keys = np.floor(X / 0.5).astype(int)
    for centre, count in zip(c, n, strict=True):
        k = np.floor(centre / 0.5).astype(int)
        members = X[(keys == k).all(1)]
        assert len(members) == count
        np.testing.assert_allclose(centre, members.mean(0))


def test_nearest_centre(rng):
    X = rng.normal(size=(200, 3))
    C = rng.normal(size=(9, 3))
    ref = np.argmin(((X[:, None] - C[None]) ** 2).sum(-1), axis=1)
    np.testing.assert_array_equal(K.nearest_centre(X, C, dtype=np.float64), ref)


def test_assign_to_modes_without_shortcut_equals_converged_nearest(rng):
    X = _blobs(rng, 30)
    res = K.mean_shift(X, X, 0.5, tol=1e-5, max_iter=1000)
    labels, modes = K.group_modes(res.ends, K.group_threshold(res.moves, 0.5))
    new = rng.normal(1.5, 1.5, (50, 2))
    got = K.assign_to_modes(
        new, X, 0.5, res.ends, labels, path_radius=0.0, tol=1e-5, max_iter=1000, dtype=np.float64
    )
    ends = K.mean_shift(new, X, 0.5, tol=1e-5, max_iter=1000).ends
    ref = labels[np.argmin(((ends[:, None] - res.ends[None]) ** 2).sum(-1), axis=1)]
    np.testing.assert_array_equal(got, ref)
    # the path shortcut gives the same answer here and training points keep their labels
    paths = K.mean_shift(X, X, 0.5, tol=1e-5, max_iter=1000, return_paths=True).paths
    pl = np.tile(labels, paths.shape[0])
    fast = K.assign_to_modes(new, X, 0.5, paths.reshape(-1, 2), pl, path_radius=0.2)
    assert (fast == ref).mean() >= 0.95
    own = K.assign_to_modes(X, X, 0.5, paths.reshape(-1, 2), pl, path_radius=0.2)
    np.testing.assert_array_equal(own, labels)


def _ref_pair_sums(X, labels, m, h):
    S = np.zeros((m, m))
    for k in range(len(X)):
        for l in range(len(X)):
            if labels[k] >= 0 and labels[l] >= 0:
                S[labels[k], labels[l]] += np.exp(-np.sum((X[k] - X[l]) ** 2) / (2 * h * h))
    return S


def test_cs_pair_sums_of_a_set_with_itself_match_reference(rng, monkeypatch):
    # far from the origin (the float32 blocks are taken on centred points), nodata rows (-1),
    # an empty partition (3), and blocks that cut partitions (several runs per block)
    X = rng.normal(size=(61, 3)) + 50.0
    labels = rng.integers(-1, 6, 61)
    labels[labels == 3] = 4
    ref = _ref_pair_sums(X, labels, 6, 0.9)
    monkeypatch.setattr(K, "REDUCED_BLOCK_BYTES", 4 * 20 * 20)  # 20-point square blocks
    got = K.cs_pair_sums(X, labels, 6, 0.9)
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-9)
    assert np.all(got[3] == 0) and np.all(got[:, 3] == 0)


def test_cs_pair_sums_of_repeated_rows_match_reference(rng, monkeypatch):
    # integer-valued bands repeat (8-bit pixels): equal rows of a partition are merged into
    # weighted points; equal rows of different partitions are not
    X = rng.integers(0, 3, size=(90, 2)).astype(np.float64) + 40.0
    labels = rng.integers(-1, 5, 90)
    sorted_rows = X[labels >= 0][np.argsort(labels[labels >= 0], kind="stable")]
    merged, merged_labels, weights = K._merge_duplicates(sorted_rows, np.sort(labels[labels >= 0]))
    assert weights is not None and weights.sum() == (labels >= 0).sum()
    assert merged.shape[0] <= 45 and np.all(np.diff(merged_labels) >= 0)
    ref = _ref_pair_sums(X, labels, 5, 0.7)
    monkeypatch.setattr(K, "REDUCED_BLOCK_BYTES", 4 * 8 * 8)  # 8-point blocks cut partitions
    np.testing.assert_allclose(K.cs_pair_sums(X, labels, 5, 0.7), ref, rtol=1e-5, atol=1e-9)


def test_distinct_rows_are_not_merged(rng):
    X = rng.normal(size=(50, 3))
    labels = np.sort(rng.integers(0, 4, 50))
    merged, merged_labels, weights = K._merge_duplicates(X, labels)
    assert weights is None and merged is X and merged_labels is labels


def test_cs_pair_sums_do_not_depend_on_the_threads(rng, monkeypatch):
    from dkernel.linalg.threads import map_on_cores

    X = rng.normal(size=(3000, 5))
    labels = rng.integers(0, 40, 3000)
    monkeypatch.setattr(K, "REDUCED_BLOCK_BYTES", 4 * 700 * 700)  # 15 block pairs
    runs = {}
    for n in (1, 3):
        monkeypatch.setattr(K, "map_on_cores", lambda fn, items, n=n: map_on_cores(fn, items, n))
        runs[n] = K.cs_pair_sums(X, labels, 40, 0.5)
    np.testing.assert_array_equal(runs[1], runs[3])


def test_cs_affinity_rff_approximates_exact(rng):
    X = rng.normal(size=(400, 3))
    labels = (X[:, 0] > 0).astype(int) + 2 * (X[:, 1] > 0)
    exact = K.cs_normalize(K.cs_pair_sums(X, labels, 4, 2.0))
    W, b = K.rff_params(3, 4000, 2.0, np.random.default_rng(1))
    S = K.partition_feature_sums(X[:150], labels[:150], 4, W, b)
    S += K.partition_feature_sums(X[150:], labels[150:], 4, W, b)
    approx = K.cs_affinity_from_sums(S)
    np.testing.assert_allclose(approx, exact, atol=0.03)
    # feature sums are exact sums of the feature map
    Phi = K.rff_transform(X, W, b, dtype=np.float64)
    np.testing.assert_allclose(S[2], Phi[labels == 2].sum(0), rtol=1e-3, atol=1e-3)
