"""Posterior feature map blocks (dkernel.gmm.graph) against the one-shot NumPy posteriors."""

from __future__ import annotations

import numpy as np

from dkernel.gmm.em import DiagMixtures, diag_posteriors
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
