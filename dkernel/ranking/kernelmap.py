"""How a ranking estimator evaluates its kernel: a block function or an explicit feature map.

KPPR and JRC need two things from a kernel κ: the in-sample Gram matrix (for the
eigenpairs) and rows ``κ(x, X_fit)`` for new points (out-of-sample scores). A kernel is one of

* a **block function** ``f(X, Y) -> (len(X), len(Y))`` array (the RBF via
  :func:`dkernel.kernels.rbf_block`, the registry's adaptive ``local_scaling`` and ``knn``
  kernels, the half-weighted ``knn_mean`` graph of :mod:`dkernel.ranking.affinity`, or any user
  callable): a new point's score costs O(N p). The adaptive kernels are fixed functions of
  (x, y) (each point's width is its own neighbour distance among the training points), so a
  training point scored as a new point gets exactly its in-sample kernel row;
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

from dkernel._feature_maps import make_feature_map
from dkernel.errors import InvalidInputError
from dkernel.kernels import rbf_block, sigma_rule_of_thumb
from dkernel.kernels.registry import make_kernel
from dkernel.ranking.affinity import make_knn_mean_kernel

#: Kernels given by name whose widths adapt to each point's neighbourhood.
ADAPTIVE = ("knn_mean", "knn", "local_scaling")
#: Kernel given by name whose explicit features come from the registry (``kernel_params``
#: ``n_landmarks`` and ``n_neighbors``, the landmarks per point).
LANDMARK = "landmark"
#: Every kernel name the ranking estimators accept.
KERNEL_NAMES = ("rbf", *ADAPTIVE, LANDMARK, "precomputed", "pck")


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
class RegistryBlock:
    """Picklable block function of a resolved registry kernel, in a fixed dtype."""

    kernel: Any
    dtype: str = "float64"

    def __call__(self, X: np.ndarray, Y: np.ndarray) -> np.ndarray:
        return self.kernel(X, Y, dtype=np.dtype(self.dtype))


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
    n_neighbors: int | None = None,
    kernel_params: dict[str, Any] | None = None,
) -> tuple[Any, dict[str, Any]]:
    """Resolve an estimator's ``kernel`` parameter against the training data.

    ``n_neighbors`` and ``kernel_params`` (``n_reference``) go to the adaptive kernels
    (``knn_mean``, ``knn``, ``local_scaling``). Returns the kernel object and a JSON-able
    description (kind, sigma, n_neighbors, ...).
    """
    if sigma is not None and kernel != "rbf":
        raise InvalidInputError(
            f"{owner}: sigma={sigma!r} is the width of kernel='rbf', but kernel={kernel!r}. "
            "Set kernel='rbf' to use it, or leave sigma=None."
        )
    if isinstance(kernel, str) and kernel in ADAPTIVE:
        Xa = np.asarray(X, dtype=np.float64)
        params = dict(kernel_params or {})
        unknown = sorted(set(params) - {"n_reference"})
        if unknown:
            raise InvalidInputError(
                f"{owner}: unknown kernel_params {unknown} for kernel={kernel!r}; the adaptive "
                "kernels take n_reference (set n_neighbors on the estimator)."
            )
        if n_neighbors is not None:
            params["n_neighbors"] = n_neighbors
        if kernel == "knn_mean":
            resolved = make_knn_mean_kernel(Xa, seed=seed, **params)
        else:
            resolved = make_kernel(kernel, Xa, seed=seed, **params)
        return BlockKernel(RegistryBlock(resolved, dtype), Xa, name=kernel), {
            "kernel": kernel,
            **{k: v for k, v in resolved.params.items()},
        }
    if isinstance(kernel, str) and kernel == LANDMARK:
        params = dict(kernel_params or {})
        unknown = sorted(set(params) - {"n_landmarks", "n_neighbors"})
        if unknown:
            raise InvalidInputError(
                f"{owner}: unknown kernel_params {unknown} for kernel='landmark'; it takes "
                "n_landmarks and n_neighbors (landmarks per point)."
            )
        resolved = make_kernel(LANDMARK, X, seed=seed, **params)
        G = np.asarray(resolved.feature_map.transform(np.asarray(X)), dtype=np.float64)
        return FeatureMapKernel(resolved.feature_map, G, name=LANDMARK), {
            "kernel": LANDMARK,
            **resolved.params,
        }
    if kernel_params:
        raise InvalidInputError(
            f"{owner}: kernel_params apply to the adaptive kernels {ADAPTIVE} and to "
            f"'landmark'; got "
            f"kernel={kernel!r} with kernel_params={kernel_params!r}."
        )
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
            # gmm's estimator, registered by name in dkernel/__init__.py (dkernel._feature_maps)
            pck = make_feature_map("pck", random_state=seed).fit(X)
            G = np.asarray(pck.transform(X), dtype=np.float64)
            return FeatureMapKernel(pck, G, name="pck"), {"kernel": "pck", "n_features": G.shape[1]}
        raise InvalidInputError(
            f"The 'kernel' parameter of {owner} must be one of {', '.join(KERNEL_NAMES)}, a "
            f"callable block function or a transformer with transform(); got {kernel!r}."
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
        f"The 'kernel' parameter of {owner} must be one of {', '.join(KERNEL_NAMES)}, a callable "
        f"or a transformer; got {kernel!r}."
    )


def _is_fitted(est: Any) -> bool:
    return any(k.endswith("_") and not k.startswith("_") for k in vars(est))
