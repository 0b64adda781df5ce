"""Kernel Personalized PageRank: exactness, Prop. 4/6/8, Defs. 1–3, kernels and seeds."""

from __future__ import annotations

import numpy as np
import pytest

from dkernel.errors import InvalidInputError, NotFittedError
from dkernel.kernels import rbf_block
from dkernel.ranking import KernelPersonalizedPageRank, ppr_exact, seed_vector

SIGMA = 0.8


def full_kppr(X, **kw):
    return KernelPersonalizedPageRank(sigma=SIGMA, min_eigenvalue=None, **kw).fit(X)


@pytest.mark.parametrize("seed", [0, [5, 60, 120], None])
def test_all_components_equal_exact_ppr(iris, iris_kernel, seed):
    X, _ = iris
    kppr = full_kppr(X)
    assert kppr.n_components_ == X.shape[0] - 1
    s = seed_vector(seed, X.shape[0])
    exact = ppr_exact(iris_kernel, s, 0.1)
    assert np.max(np.abs(kppr.rank(seed) - exact)) < 1e-8


def test_base_plus_restart_is_score(iris):
    X, _ = iris
    kppr = KernelPersonalizedPageRank(sigma=SIGMA, n_components=6).fit(X)
    base, restart = kppr.base_score_, kppr.restart_component(17)
    np.testing.assert_allclose(base + restart, kppr.rank(17), atol=1e-15)
    np.testing.assert_allclose(base, kppr.degrees_ / kppr.degrees_.sum())
    # Prop. 4: the restart component of the exact PPR sums to zero (π and d/Vol both sum to 1)
    assert full_kppr(X).restart_component(17).sum() == pytest.approx(0.0, abs=1e-12)
    Y = X[:10] + 0.05
    parts = [kppr.score_samples(Y, 17, component=c) for c in ("base", "restart", "score")]
    np.testing.assert_allclose(parts[0] + parts[1], parts[2], atol=1e-15)
    np.testing.assert_allclose(parts[0], rbf_block(Y, X, SIGMA).sum(axis=1) / kppr.volume_)


def test_prop6_expected_error_and_ordering(wine):
    """E||D^{-1/2} ε / β||^2 over single-point seeds equals (1/N) Σ_discarded c_i^2 (Prop. 6),
    and the Prop. 6 ordering never has a larger expected error than eigenvalue ordering."""
    X, _ = wine
    n = X.shape[0]
    K = rbf_block(X, X, 2.0)
    exact = ppr_exact(K, np.eye(n), 0.1)
    full = KernelPersonalizedPageRank(kernel="precomputed", min_eigenvalue=None).fit(K)
    beta, d = full.beta_, full.degrees_
    errors = {}
    for ordering in ("prop6", "eigenvalue"):
        errs = []
        for k in (1, 3, 8, 20, 60):
            m = KernelPersonalizedPageRank(
                kernel="precomputed", n_components=k, ordering=ordering, min_eigenvalue=None
            ).fit(K)
            approx = np.stack([m.rank(j) for j in range(n)], axis=1)
            err = np.mean(np.sum(((exact - approx) / (beta * np.sqrt(d)[:, None])) ** 2, axis=0))
            crit_all = full.criterion_  # every non-trivial c_i^2
            kept = set(m.selected_indices_.tolist())
            dropped = [
                c for c, i in zip(crit_all, full.selected_indices_, strict=True) if i not in kept
            ]
            assert err == pytest.approx(np.sum(dropped) / n, rel=1e-6)
            errs.append(err)
        errors[ordering] = np.array(errs)
    assert np.all(errors["prop6"] <= errors["eigenvalue"] * (1 + 1e-9))
    assert np.any(errors["prop6"] < errors["eigenvalue"] * 0.99)
    crit = KernelPersonalizedPageRank(kernel="precomputed", min_eigenvalue=None).fit(K).criterion_
    assert np.all(np.diff(crit) <= 0)


def reference_out_of_sample(X_in, Y, sigma, alpha, s, lam, E, d):
    """Defs. 1–3 written out literally (including the trivial eigenpair λ* = 1)."""
    beta = alpha / (1 - alpha)
    e1 = np.sqrt(d) / np.sqrt(d.sum())
    lam = np.concatenate([[1.0], lam])
    E = np.concatenate([e1[:, None], E], axis=1)
    Z_in = E / np.sqrt(1 + beta - lam)[None, :]
    m_s = sum(s[k] / np.sqrt(d[k]) * Z_in[k] for k in range(len(d)) if s[k] > 0)
    out = []
    for y in Y:
        kap = np.array([np.exp(-np.sum((y - x) ** 2) / (2 * sigma**2)) for x in X_in])
        dh = kap.sum()
        Kh = kap / np.sqrt(dh * d)
        z = np.array(
            [Kh @ E[:, j] / (lam[j] * np.sqrt(1 + beta - lam[j])) for j in range(lam.size)]
        )
        out.append(beta * np.sqrt(dh) * z @ m_s)
    return np.array(out)


def test_out_of_sample_defs_and_prop8(iris):
    X, _ = iris
    rng = np.random.default_rng(1)
    perm = rng.permutation(X.shape[0])
    X_in, Y = X[perm[:90]], X[perm[90:]]
    kppr = KernelPersonalizedPageRank(sigma=SIGMA).fit(X_in)
    assert kppr.n_components_ < 89 and np.all(kppr.eigenvalues_ > 0.01)
    s = kppr.seed_vector([3, 4])
    ref = reference_out_of_sample(
        X_in, Y, SIGMA, 0.1, s, kppr.eigenvalues_, kppr.eigenvectors_, kppr.degrees_
    )
    np.testing.assert_allclose(kppr.score_samples(Y, [3, 4]), ref, rtol=1e-10, atol=1e-14)
    # Prop. 8: score = Σ_i α_i κ(x, x_i)
    alpha = kppr.coefficients([3, 4])
    np.testing.assert_allclose(rbf_block(Y, X_in, SIGMA) @ alpha, ref, rtol=1e-10, atol=1e-14)
    # Thm. 1: the out-of-sample formula reproduces in-sample scores and embeddings
    np.testing.assert_allclose(kppr.score_samples(X_in, [3, 4]), kppr.rank([3, 4]), atol=1e-12)
    np.testing.assert_allclose(
        kppr.embed_samples(X_in),
        kppr.embedding_ / np.sqrt(kppr.degrees_)[:, None] * np.sqrt(kppr.degrees_)[:, None],
        atol=1e-10,
    )


def test_out_of_sample_seed(iris):
    """A seed given as new points: m_s from their Def. 2 embeddings; an in-sample point given
    as seed_X reproduces the in-sample seed."""
    X, _ = iris
    kppr = KernelPersonalizedPageRank(sigma=SIGMA).fit(X[::2])
    np.testing.assert_allclose(
        kppr.mean_vector(seed_X=X[::2][[7]]), kppr.mean_vector(7), rtol=1e-9, atol=1e-14
    )
    scores = kppr.rank(seed_X=X[1:2])
    assert scores.shape == (75,)
    # the nearest in-sample points to the out-of-sample seed rank near the top
    nearest = np.argsort(((X[::2] - X[1]) ** 2).sum(1))[:3]
    assert set(nearest) & set(np.argsort(-scores)[:10])


def test_seed_forms_agree(iris):
    X, y = iris
    kppr = KernelPersonalizedPageRank(sigma=SIGMA, n_components=10).fit(X)
    mask = y == 0
    by_mask = kppr.rank(mask)
    np.testing.assert_allclose(kppr.rank(np.flatnonzero(mask)), by_mask, atol=1e-15)
    np.testing.assert_allclose(kppr.rank(cluster=0, labels=y), by_mask, atol=1e-15)
    np.testing.assert_allclose(kppr.rank(mask.astype(float) * 3.0), by_mask, atol=1e-15)
    # seeding class 0 ranks class 0 highest
    assert np.mean(y[np.argsort(-by_mask)[:30]] == 0) > 0.9


def test_precomputed_callable_and_feature_map_kernels(iris, soft_assign):
    SoftAssign = soft_assign
    X, _ = iris
    X_in, Y = X[:100], X[100:]
    K = rbf_block(X_in, X_in, SIGMA)
    by_rbf = KernelPersonalizedPageRank(sigma=SIGMA).fit(X_in)
    by_pre = KernelPersonalizedPageRank(kernel="precomputed").fit(K)
    by_fn = KernelPersonalizedPageRank(kernel=lambda A, B: rbf_block(A, B, SIGMA)).fit(X_in)
    ref = by_rbf.score_samples(Y, 5)
    np.testing.assert_allclose(by_pre.score_samples(rbf_block(Y, X_in, SIGMA), 5), ref, rtol=1e-9)
    np.testing.assert_allclose(by_fn.score_samples(Y, 5), ref, rtol=1e-9)
    # explicit feature map: dense path (N <= F would be used for F >= N) and SVD path (F < N)
    fmap = SoftAssign(n_centers=12, width=1.0).fit(X_in)
    G = fmap.transform(X_in)
    by_map = KernelPersonalizedPageRank(kernel=fmap).fit(X_in)
    by_gram = KernelPersonalizedPageRank(kernel="precomputed").fit(G @ G.T)
    assert by_map.n_components_ == by_gram.n_components_
    np.testing.assert_allclose(by_map.rank(5), by_gram.rank(5), atol=1e-10)
    Ky = fmap.transform(Y) @ G.T
    np.testing.assert_allclose(by_map.score_samples(Y, 5), by_gram.score_samples(Ky, 5), rtol=1e-6)
    # Γ^T α: F weights, a new point costs O(F)
    w = by_map.kernel_.weights(by_map.coefficients(5))
    assert w.shape == (12,)
    np.testing.assert_allclose(fmap.transform(Y) @ w, by_map.score_samples(Y, 5), rtol=1e-6)


def test_feature_map_exact_when_n_le_f(rng, soft_assign):
    SoftAssign = soft_assign
    Xs = rng.standard_normal((30, 2))
    fmap = SoftAssign(n_centers=30, width=0.7).fit(Xs)
    G = fmap.transform(Xs)
    kppr = KernelPersonalizedPageRank(kernel=fmap, min_eigenvalue=None).fit(Xs)
    exact = ppr_exact(G @ G.T, seed_vector(2, 30), 0.1)
    assert np.max(np.abs(kppr.rank(2) - exact)) < 1e-8


def test_pck_kernel(wine):
    from dkernel.gmm.pck import ProbabilisticClusterKernel

    X, y = wine
    pck = ProbabilisticClusterKernel(n_estimators=4, max_components=6, random_state=0)
    kppr = KernelPersonalizedPageRank(kernel=pck, random_state=0).fit(X[::2])
    scores = kppr.score_samples(X[1::2], cluster=0, labels=y[::2])
    Gy = pck.transform(X[1::2]).astype(np.float64)
    Gx = pck.transform(X[::2]).astype(np.float64)
    np.testing.assert_allclose(
        scores, (Gy @ Gx.T) @ kppr.coefficients(cluster=0, labels=y[::2]), rtol=1e-4
    )
    top = np.argsort(-scores)[:20]
    assert np.mean(y[1::2][top] == 0) > 0.8


def test_validation_and_not_fitted(iris):
    X, _ = iris
    with pytest.raises(NotFittedError):
        KernelPersonalizedPageRank().rank(0)
    with pytest.raises(InvalidInputError, match="alpha"):
        KernelPersonalizedPageRank(alpha=0.0).fit(X)
    with pytest.raises(InvalidInputError, match="ordering"):
        KernelPersonalizedPageRank(ordering="size").fit(X)
    with pytest.raises(InvalidInputError, match="symmetric"):
        KernelPersonalizedPageRank(kernel="precomputed").fit(np.triu(np.ones((4, 4))))
    with pytest.raises(InvalidInputError, match="kernel rows"):
        KernelPersonalizedPageRank(kernel="precomputed").fit(np.ones((4, 4))).score_samples(
            np.ones((2, 3)), 0
        )
    m = full_kppr(X)
    with pytest.raises(InvalidInputError, match="min_eigenvalue"):
        m.score_samples(X[:2], 0)
    assert KernelPersonalizedPageRank(alpha=0.2).get_params()["alpha"] == 0.2


def test_coefficients_for_mean_mixes_seeds(iris):
    """Seeds are linear in m'_s: mixing an in-sample and an out-of-sample seed point."""
    X, _ = iris
    kppr = KernelPersonalizedPageRank(sigma=SIGMA).fit(X[::2])
    np.testing.assert_allclose(
        kppr.coefficients_for_mean(kppr.mean_vector(3)), kppr.coefficients(3), rtol=1e-12
    )
    mixed = 0.5 * kppr.mean_vector(3) + 0.5 * kppr.mean_vector(seed_X=X[1:2])
    both = kppr.mean_vector(seed_X=np.vstack([X[::2][3], X[1]]))
    np.testing.assert_allclose(mixed, both, rtol=1e-9, atol=1e-14)
    with pytest.raises(InvalidInputError, match="rows"):
        kppr.coefficients_for_mean(np.ones(kppr.n_components_ + 1))


def _projected_kernels(X_in, soft_assign):
    from dkernel.gmm.pck import ProbabilisticClusterKernel

    pck = ProbabilisticClusterKernel(
        n_estimators=3, max_components=5, random_state=0, dtype="float64"
    )
    return {
        "rbf": KernelPersonalizedPageRank(sigma=SIGMA).fit(X_in),
        "precomputed": KernelPersonalizedPageRank(kernel="precomputed").fit(
            rbf_block(X_in, X_in, SIGMA)
        ),
        "feature-map": KernelPersonalizedPageRank(kernel=soft_assign(12, 1.0).fit(X_in)).fit(X_in),
        "pck": KernelPersonalizedPageRank(kernel=pck, random_state=0).fit(X_in),
    }


def test_projected_scores_equal_prop8_scores(iris, soft_assign):
    """project(X) @ seed_weights(s) is the Prop. 8 score Σ α_i κ(x, x_i) for every seed form and
    every component (base, restart, score), for block, precomputed and feature-map kernels:
    α(s) = [1/Vol, A] [1; m'_s] with a seed-independent basis (Defs. 2–3, Prop. 4, Prop. 8)."""
    X, y = iris
    X_in, Y = X[::2], X[1::2]
    y_in = y[::2]
    for name, kppr in _projected_kernels(X_in, soft_assign).items():
        Xn = rbf_block(Y, X_in, SIGMA) if name == "precomputed" else Y
        Z = kppr.project(Xn)
        assert Z.shape == (Y.shape[0], kppr.n_components_ + 1)
        seeds = [
            ((3,), {}),
            (([3, 10, 40],), {}),
            ((None,), {}),
            ((), {"cluster": 1, "labels": y_in}),
        ]
        if name != "precomputed":
            seeds.append(((), {"seed_X": Y[:2]}))
        for args, kw in seeds:
            for comp in ("score", "base", "restart"):
                ref = kppr.score_samples(Xn, *args, component=comp, **kw)
                got = Z @ kppr.seed_weights(*args, component=comp, **kw)
                scale = np.abs(kppr.score_samples(Xn, *args, **kw)).max()
                assert np.abs(got - ref).max() <= 1e-10 * scale, (name, args, kw, comp)
        # column 0 is the base score d̂(x)/Vol; the rest is β√d̂ ẑ' (Def. 3)
        np.testing.assert_allclose(Z[:, 0], kppr.score_samples(Xn, 3, component="base"), rtol=1e-10)
        if name != "precomputed":
            dh = Z[:, 0] * kppr.volume_
            ref = kppr.beta_ * np.sqrt(dh)[:, None] * kppr.embed_samples(Xn)
            assert np.abs(Z[:, 1:] - ref).max() <= 1e-10 * np.abs(ref).max()
        # the basis carries every seed's Prop. 8 coefficients
        means = np.stack([kppr.mean_vector(3), kppr.mean_vector(None)], axis=1)
        for got, ref in (
            (kppr.score_basis() @ kppr.seed_weights(3), kppr.coefficients(3)),
            (
                kppr.score_basis() @ kppr.seed_weights_for_mean(means),
                kppr.coefficients_for_mean(means),
            ),
        ):
            assert np.abs(got - ref).max() <= 1e-12 * np.abs(ref).max()


def test_projection_of_in_sample_points_gives_in_sample_scores(iris):
    """Nyström property (Thm. 1): projecting the in-sample points reproduces π̂ = d/Vol + π'."""
    X, _ = iris
    kppr = KernelPersonalizedPageRank(sigma=SIGMA).fit(X[::2])
    Z = kppr.project(X[::2])
    np.testing.assert_allclose(Z[:, 0], kppr.base_score_, rtol=1e-12)
    for seed in (5, None, [1, 2, 3]):
        np.testing.assert_allclose(Z @ kppr.seed_weights(seed), kppr.rank(seed), atol=1e-12)


def test_seed_weights_validation(iris):
    X, _ = iris
    kppr = KernelPersonalizedPageRank(sigma=SIGMA, n_components=5).fit(X)
    assert kppr.seed_weights(0).shape == (6,)
    np.testing.assert_array_equal(kppr.seed_weights(0, component="base"), np.eye(6)[0])
    with pytest.raises(InvalidInputError, match="component"):
        kppr.seed_weights(0, component="all")
    with pytest.raises(InvalidInputError, match="rows"):
        kppr.seed_weights_for_mean(np.ones(6))
    with pytest.raises(NotFittedError):
        KernelPersonalizedPageRank().project(X)


def _normalized(K: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    d = K.sum(axis=1)
    return K / np.sqrt(np.outer(d, d)), d


@pytest.mark.parametrize("gap", [1.0, 50.0])  # one connected graph; two components (λ* = 1 twice)
def test_normalized_eigenpairs_against_numpy(gap):
    """Against the obvious reference (numpy's eigh of D^-1/2 K D^-1/2): the same spectrum, an
    eigenbasis, and first the exact trivial pair, whether or not λ* = 1 is repeated."""
    from dkernel.ranking.kppr import normalized_eigenpairs, trivial_eigenvector

    rng = np.random.default_rng(0)
    X = np.r_[rng.normal(size=(40, 2)), rng.normal(size=(30, 2)) + gap]
    K = rbf_block(X, X, 1.0)
    K[K < 1e-300] = 0.0
    Kn, d = _normalized(K)
    values, vectors, d_out = normalized_eigenpairs(K)
    np.testing.assert_allclose(d_out, d, rtol=1e-12)
    ref = np.sort(np.linalg.eigvalsh(Kn))[::-1]
    np.testing.assert_allclose(values, ref, atol=1e-10)
    assert values[0] == 1.0
    np.testing.assert_array_equal(vectors[:, 0], trivial_eigenvector(d))
    np.testing.assert_allclose(Kn @ vectors, vectors * values, atol=1e-10)
    np.testing.assert_allclose(vectors.T @ vectors, np.eye(X.shape[0]), atol=1e-10)
    assert (gap > 10) == (values[1] > 1 - 1e-9)
