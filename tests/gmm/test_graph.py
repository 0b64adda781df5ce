"""Posterior feature map blocks (dkernel.gmm.graph) against the one-shot NumPy posteriors."""

from __future__ import annotations

import numpy as np
import pytest

from dkernel.gmm.em import DiagMixtures, diag_posteriors, posterior_groups
from dkernel.gmm.graph import posterior_block


def test_posterior_block_sub_blocks_match_posteriors():
    """Several ~64 MiB sub-blocks (forced by a wide ensemble) give the same Γ/√Z as one call,
    in float32 and float64, with NaNs; the result is Fortran-ordered (component-major)."""
    rng = np.random.default_rng(3)
    sizes = np.full(700, 30)  # C = 21 000 components: 64 MiB holds ~800 float32 rows
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    C, p = int(offsets[-1]), 3
    mix = DiagMixtures(
        rng.normal(size=(C, p)),
        rng.uniform(0.5, 2.0, size=(C, p)),
        rng.dirichlet(np.ones(30), size=700).ravel(),
        offsets,
    )
    X = rng.normal(size=(1000, p))
    X[rng.random(X.shape) < 0.2] = np.nan
    X[5] = np.nan
    for dtype in (np.float64, np.float32):
        got = posterior_block(X, mix.astype(dtype), 0.5, dtype)
        ref = 0.5 * diag_posteriors(X.astype(dtype), mix.astype(dtype))
        assert got.dtype == dtype and got.flags.f_contiguous
        tol = 1e-12 if dtype == np.float64 else 1e-6
        np.testing.assert_allclose(got, ref, atol=tol)
        np.testing.assert_allclose(np.add.reduceat(got, offsets[:-1], axis=1), 0.5, atol=tol)


def _per_model_posteriors(X, mix):
    """The obvious reference: every model on its own, log-densities summed over coordinates."""
    from scipy.special import logsumexp

    out = np.empty((X.shape[0], int(mix.offsets[-1])))
    for m in range(mix.n_models):
        a, b = mix.offsets[m], mix.offsets[m + 1]
        mu, var = mix.means[a:b], mix.variances[a:b]
        diff = X[:, None, :] - mu[None]
        lp = -0.5 * np.sum(diff**2 / var + np.log(2 * np.pi * var), axis=2) + np.log(
            mix.weights[a:b]
        )
        out[:, a:b] = np.exp(lp - logsumexp(lp, axis=1, keepdims=True))
    return out


@pytest.mark.parametrize("layout", ["pck", "irregular"])
def test_grouped_posteriors_match_per_model_reference(layout, monkeypatch):
    """Models of equal size are normalised together (strided rows for a PCK layout, an index
    array otherwise); sub-blocks spread over threads give the per-model posteriors."""
    import dkernel.gmm.graph as graph

    monkeypatch.setattr(graph, "POSTERIOR_BLOCK_ROWS", 64)  # several sub-blocks and threads
    rng = np.random.default_rng(5)
    sizes = np.tile(np.arange(2, 7), 4) if layout == "pck" else np.array([3, 5, 3, 2, 5, 5, 4])
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    C, p = int(offsets[-1]), 4
    mix = DiagMixtures(
        rng.normal(size=(C, p)),
        rng.uniform(0.3, 2.0, size=(C, p)),
        np.concatenate([rng.dirichlet(np.ones(g)) for g in sizes]),
        offsets,
    )
    groups = posterior_groups(mix, False, np.dtype(np.float64))
    strided = [g.model_stride is not None for g in groups]
    # irregular: sizes 3 (evenly spaced) strided; 5 (uneven), 2 and 4 (single) indexed
    assert all(strided) if layout == "pck" else strided == [False, True, False, False]
    X = rng.normal(size=(300, p)) * 2
    ref = _per_model_posteriors(X, mix)
    got = posterior_block(X, mix, 0.25, np.float64)
    np.testing.assert_allclose(got, 0.25 * ref, atol=1e-12)
    got32 = posterior_block(X, mix.astype(np.float32), 0.25, np.float32)
    assert got32.dtype == np.float32
    np.testing.assert_allclose(got32, 0.25 * ref, atol=1e-5)
