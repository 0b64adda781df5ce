"""How a ranking estimator evaluates its kernel: a block function or an explicit feature map.

KPPR and JRC need two things from a kernel κ: the in-sample Gram matrix (for the
eigenpairs) and rows ``κ(x, X_fit)`` for new points (out-of-sample scores). A kernel is one of

* a **block function** ``f(X, Y) -> (len(X), len(Y))`` array (the RBF via
  :func:`dkernel.kernels.rbf_block`, or any user callable): a new point's score costs O(N p);
* a **precomputed** kernel: the user passes ``K`` to ``fit`` and ``κ(X_new, X_fit)`` rows to
  scoring;
* an explicit **feature map** ``γ`` with ``κ(x, y) = γ(x)·γ(y)`` (any fitted transformer whose
  ``transform`` returns it, e.g. :class:`dkernel.gmm.pck.ProbabilisticClusterKernel`, which
  returns ``Γ/√Z``): the Gram matrix is ``Γ Γ^T`` and a score ``Σ_i α_i κ(x, x_i)`` collapses
  to ``γ(x)·(Γ^T α)``, O(F) per point (Paper II Prop. 8).

The resolved objects are small and picklable so Dask can ship them to workers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from dkernel.errors import InvalidInputError
from dkernel.kernels import rbf_block, sigma_rule_of_thumb


@dataclass
class BlockKernel:
    """κ given by a block function of the fitted points ``X_fit``."""

    fn: Callable[[np.ndarray, np.ndarray], np.ndarray]
    X_fit: np.ndarray
    name: str = "callable"

    is_feature_map = False

    def gram(self) -> np.ndarray:
        return np.asarray(self.fn(self.X_fit, self.X_fit), dtype=np.float64)

    def cross(self, Y: np.ndarray) -> np.ndarray:
        return np.asarray(self.fn(np.asarray(Y), self.X_fit))

    def weights(self, coef: np.ndarray) -> np.ndarray:
        """Coefficients applied to ``cross(Y)``: the Prop. 8 α themselves."""
        return coef

    def apply(self, Y: np.ndarray, w: np.ndarray, *, rows: int = 4096) -> np.ndarray:
        """``κ(Y, X_fit) @ w`` in row sub-blocks (bounded memory: rows × N)."""
        Y = np.asarray(Y)
        out = np.empty((Y.shape[0],) + w.shape[1:], dtype=np.result_type(w.dtype, np.float32))
        for start in range(0, Y.shape[0], rows):
            stop = min(start + rows, Y.shape[0])
            out[start:stop] = self.cross(Y[start:stop]) @ w.astype(out.dtype, copy=False)
        return out


@dataclass
class RBFBlock:
    """Picklable RBF block function with a fixed width and dtype."""

    sigma: float
    dtype: str = "float64"

    def __call__(self, X: np.ndarray, Y: np.ndarray) -> np.ndarray:
        return rbf_block(X, Y, self.sigma, dtype=np.dtype(self.dtype))


@dataclass
class PrecomputedKernel:
    """κ given as matrices: the Gram matrix to ``fit`` and ``(n_new, N)`` rows to scoring."""

    K_fit: np.ndarray
    name: str = "precomputed"
    is_feature_map = False

    def gram(self) -> np.ndarray:
        return self.K_fit

    def cross(self, Y: np.ndarray) -> np.ndarray:
        Y = np.asarray(Y, dtype=np.float64)
        n = self.K_fit.shape[0]
        if Y.ndim != 2 or Y.shape[1] != n:
            raise InvalidInputError(
                f"with kernel='precomputed', new points are given as kernel rows κ(x, X_fit) of "
                f"shape (n_new, {n}); got shape {Y.shape}."
            )
        if (Y < 0).any():
            raise InvalidInputError("precomputed kernel rows must be non-negative.")
        return Y

    def weights(self, coef: np.ndarray) -> np.ndarray:
        return coef

    def apply(self, Y: np.ndarray, w: np.ndarray, *, rows: int = 4096) -> np.ndarray:
        return self.cross(Y) @ w


@dataclass
class FeatureMapKernel:
    """κ(x, y) = γ(x)·γ(y) with γ from a fitted transformer's ``transform``."""

    transformer: Any
    features_fit: np.ndarray
    name: str = "feature-map"
    is_feature_map = True

    def gram(self) -> np.ndarray:
        G = self.features_fit
        return G @ G.T

    def features(self, Y: np.ndarray) -> np.ndarray:
        return np.asarray(self.transformer.transform(Y))

    def cross(self, Y: np.ndarray) -> np.ndarray:
        return self.features(Y) @ self.features_fit.T

    def weights(self, coef: np.ndarray) -> np.ndarray:
        """``Γ_fit^T α`` (F,) or (F, m): a new point's score is then ``γ(x) · w``, O(F)."""
        return self.features_fit.T @ coef

    def apply(self, Y: np.ndarray, w: np.ndarray, *, rows: int | None = None) -> np.ndarray:
        """``γ(Y) @ w`` in row sub-blocks of ~64 MiB of features."""
        Y = np.asarray(Y)
        step = rows or max(64, (64 * 2**20) // (4 * max(w.shape[0], 1)))
        parts = []
        for start in range(0, Y.shape[0], step):
            F = self.features(Y[start : start + step])
            parts.append(F @ w.astype(F.dtype, copy=False))
        return np.concatenate(parts, axis=0) if parts else np.zeros((0,) + w.shape[1:])


def resolve_kernel(
    kernel: Any,
    X: Any,
    *,
    sigma: float | None,
    sigma_fraction: float,
    dtype: str,
    seed: int | None,
    owner: str,
) -> tuple[Any, dict[str, Any]]:
    """Resolve an estimator's ``kernel`` parameter against the training data.

    Returns the kernel object and a JSON-able description (kind, sigma, ...).
    """
    if isinstance(kernel, str):
        if kernel == "rbf":
            Xa = np.asarray(X, dtype=np.float64)
            s = (
                sigma
                if sigma is not None
                else sigma_rule_of_thumb(Xa, fraction=sigma_fraction, seed=seed)
            )
            return BlockKernel(RBFBlock(float(s), dtype), Xa, name="rbf"), {
                "kernel": "rbf",
                "sigma": float(s),
            }
        if kernel == "precomputed":
            K = np.asarray(X, dtype=np.float64)
            if K.ndim != 2 or K.shape[0] != K.shape[1]:
                raise InvalidInputError(
                    f"{owner} with kernel='precomputed' needs a square kernel matrix in fit; got "
                    f"shape {K.shape}."
                )
            if not np.allclose(K, K.T, rtol=1e-10, atol=1e-12 * np.abs(K).max()):
                raise InvalidInputError(f"{owner} needs a symmetric kernel matrix; K != K^T.")
            if (K < 0).any():
                raise InvalidInputError(
                    f"{owner} needs a non-negative affinity matrix (it defines a random walk); "
                    f"min entry {K.min()!r}."
                )
            return PrecomputedKernel(K), {"kernel": "precomputed"}
        if kernel == "pck":
            from dkernel.gmm.pck import ProbabilisticClusterKernel  # optional family

            pck = ProbabilisticClusterKernel(random_state=seed).fit(X)
            G = np.asarray(pck.transform(X), dtype=np.float64)
            return FeatureMapKernel(pck, G, name="pck"), {"kernel": "pck", "n_features": G.shape[1]}
        raise InvalidInputError(
            f"The 'kernel' parameter of {owner} must be 'rbf', 'precomputed', 'pck', a callable "
            f"block function or a fitted transformer with transform(); got {kernel!r}."
        )
    if hasattr(kernel, "transform"):
        if not _is_fitted(kernel):
            kernel = kernel.fit(X)
        G = np.asarray(kernel.transform(X), dtype=np.float64)
        if G.ndim != 2 or G.shape[0] != np.shape(X)[0]:
            raise InvalidInputError(
                f"{owner}: the feature map returned shape {G.shape} for {np.shape(X)[0]} points."
            )
        if (G < 0).any():
            raise InvalidInputError(
                f"{owner}: the feature map must be non-negative so that κ = γ·γ is a valid "
                "affinity (PCK posteriors are)."
            )
        return (
            FeatureMapKernel(kernel, G, name=type(kernel).__name__),
            {"kernel": type(kernel).__name__, "n_features": int(G.shape[1])},
        )
    if callable(kernel):
        Xa = np.asarray(X)
        return BlockKernel(kernel, Xa, name=getattr(kernel, "__name__", "callable")), {
            "kernel": getattr(kernel, "__name__", "callable")
        }
    raise InvalidInputError(
        f"The 'kernel' parameter of {owner} must be 'rbf', 'precomputed', 'pck', a callable or a "
        f"transformer; got {kernel!r}."
    )


def _is_fitted(est: Any) -> bool:
    return any(k.endswith("_") and not k.startswith("_") for k in vars(est))
