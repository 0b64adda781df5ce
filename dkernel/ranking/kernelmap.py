"""How a ranking estimator evaluates its kernel: a block function or an explicit feature map.

KPPR and JRC need two things from a kernel κ: the in-sample Gram matrix (for the
eigenpairs) and rows ``κ(x, X_fit)`` for new points (out-of-sample scores). Every kernel is
resolved by the kernel registry (:func:`dkernel.kernels.registry.make_kernel`, the package's
one resolver); this module only checks what a random walk needs of it (a non-negative,
symmetric affinity) and wraps the result as one of

* a **block function** ``f(X, Y) -> (len(X), len(Y))`` array (the RBF, the adaptive
  ``local_scaling``, ``knn`` and ``knn_mean`` kernels, or any user callable): a new point's
  score costs O(N p). The adaptive kernels are fixed functions of (x, y) (each point's width
  is its own neighbour distance among the training points), so a training point scored as a
  new point gets exactly its in-sample kernel row;
* a **precomputed** kernel: the user passes ``K`` to ``fit`` and ``κ(X_new, X_fit)`` rows to
  scoring;
* an explicit **feature map** ``γ`` with ``κ(x, y) = γ(x)·γ(y)`` (the registry's ``landmark``
  and ``pck`` kernels, or any fitted transformer whose ``transform`` returns it, e.g.
  :class:`dkernel.gmm.pck.ProbabilisticClusterKernel`, which returns ``Γ/√Z``): the Gram matrix
  is ``Γ Γ^T`` and a score ``Σ_i α_i κ(x, x_i)`` collapses to ``γ(x)·(Γ^T α)``, O(F) per point
  (Løkse 2020, Paper II, Prop. 8 [Lokse2020]).

The resolved objects are small and picklable so Dask can ship them to workers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from dkernel._budget import KERNEL_BLOCK_BYTES, rows_for_budget
from dkernel.errors import InvalidInputError
from dkernel.kernels.pairwise import SKLEARN_KERNELS, kernel_params
from dkernel.kernels.registry import Kernel, make_kernel, neighbor_parameter

#: Kernels given by name whose widths adapt to each point's neighbourhood.
ADAPTIVE = ("knn_mean", "knn", "local_scaling")
#: Kernel given by name whose explicit features come from the registry (``kernel_params``
#: ``n_landmarks`` and ``n_neighbors``, the landmarks per point).
LANDMARK = "landmark"
#: Every kernel name the ranking estimators accept: the registry's, scikit-learn's among them;
#: those that can take negative values (``linear``, ``poly``, ``sigmoid``, ``cosine``,
#: ``additive_chi2``) are refused on data where they do (a random walk needs an affinity >= 0),
#: and ``precomputed`` is checked here.
KERNEL_NAMES = ("rbf", *ADAPTIVE, LANDMARK, "precomputed", "pck", "cosine", *SKLEARN_KERNELS)
#: The ``kernel_params`` each named kernel takes (the others come from estimator parameters):
#: scikit-learn's for its kernels (``gamma`` for rbf, the spelling of ``sigma`` it knows).
_KERNEL_PARAMS = {
    **{name: ("n_reference",) for name in ADAPTIVE},
    LANDMARK: ("n_landmarks", "n_neighbors"),
    "rbf": ("gamma",),
    **{name: tuple(sorted(kernel_params(name))) for name in SKLEARN_KERNELS},
}


@dataclass
class BlockKernel:
    """κ given by a block function of the fitted points ``X_fit``."""

    fn: Callable[[np.ndarray, np.ndarray], np.ndarray]
    X_fit: np.ndarray
    name: str = "callable"
    #: False for the kernels that can take negative values: their blocks are checked.
    nonnegative: bool = True

    is_feature_map = False

    def gram(self) -> np.ndarray:
        return self._checked(np.asarray(self.fn(self.X_fit, self.X_fit), dtype=np.float64))

    def cross(self, Y: np.ndarray) -> np.ndarray:
        return self._checked(np.asarray(self.fn(np.asarray(Y), self.X_fit)))

    def _checked(self, K: np.ndarray) -> np.ndarray:
        if not self.nonnegative and K.size and np.nanmin(K) < 0:
            raise InvalidInputError(
                f"The {self.name} kernel takes negative values on these points (smallest "
                f"{float(np.nanmin(K)):.6g}), but the ranking random walk needs an affinity >= 0. "
                "Use a kernel whose values are positive (rbf, laplacian, chi2, the adaptive "
                "ones), or data on which this one is (non-negative features for linear or "
                "cosine)."
            )
        return K

    def weights(self, coef: np.ndarray) -> np.ndarray:
        """Coefficients applied to ``cross(Y)``: the Prop. 8 α themselves."""
        return coef

    def apply(self, Y: np.ndarray, w: np.ndarray, *, rows: int = 4096) -> np.ndarray:
        """``κ(Y, X_fit) @ w`` in row sub-blocks of at most ``rows`` rows and
        ``KERNEL_BLOCK_BYTES`` of kernel (bounded memory at any N)."""
        Y = np.asarray(Y)
        rows = min(rows, rows_for_budget(KERNEL_BLOCK_BYTES, self.X_fit.shape[0], 8))
        out = np.empty((Y.shape[0],) + w.shape[1:], dtype=np.result_type(w.dtype, np.float32))
        for start in range(0, Y.shape[0], rows):
            stop = min(start + rows, Y.shape[0])
            out[start:stop] = self.cross(Y[start:stop]) @ w.astype(out.dtype, copy=False)
        return out


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
        """``γ(Y) @ w`` in row sub-blocks of ~64 MiB of float32 features."""
        Y = np.asarray(Y)
        step = rows or rows_for_budget(KERNEL_BLOCK_BYTES, w.shape[0], 4, low=64)
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

    The kernel comes from :func:`~dkernel.kernels.registry.make_kernel`: ``sigma`` and
    ``sigma_fraction`` go to ``rbf``, ``n_neighbors`` (local_scaling's ``scale_neighbors``)
    and ``kernel_params`` (``n_reference``) to the adaptive kernels (``knn_mean``, ``knn``,
    ``local_scaling``), ``kernel_params``
    (``n_landmarks``, ``n_neighbors``) to ``landmark``, and ``seed`` to every kernel that
    samples. Returns the kernel object and a JSON-able description (kind, sigma,
    n_neighbors, ...).
    """
    if sigma is not None and kernel != "rbf":
        raise InvalidInputError(
            f"{owner}: sigma={sigma!r} is the width of kernel='rbf', but kernel={kernel!r}. "
            "Set kernel='rbf' to use it, or leave sigma=None."
        )
    named = isinstance(kernel, str)
    if named and kernel not in KERNEL_NAMES:
        raise InvalidInputError(
            f"The 'kernel' parameter of {owner} must be one of {', '.join(KERNEL_NAMES)}, a "
            f"callable block function or a transformer with transform(); got {kernel!r}."
        )
    params = dict(kernel_params or {})
    allowed = _KERNEL_PARAMS.get(kernel, ()) if named else ()
    if params and not allowed:
        raise InvalidInputError(
            f"{owner}: kernel_params apply to the adaptive kernels {ADAPTIVE}, 'landmark', "
            f"'rbf' (gamma) and scikit-learn's kernels; got kernel={kernel!r} with "
            f"kernel_params={kernel_params!r}."
        )
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        takes = (
            "the adaptive kernels take n_reference (set n_neighbors on the estimator)"
            if kernel in ADAPTIVE
            else f"it takes {', '.join(allowed)}"
        )
        raise InvalidInputError(
            f"{owner}: unknown kernel_params {unknown} for kernel={kernel!r}; {takes}."
        )
    if named and kernel == "precomputed":
        return _precomputed(X, owner), {"kernel": "precomputed"}
    if named and kernel in ADAPTIVE and n_neighbors is not None:
        # the k-NN graphs' size, or the widths' rank of local_scaling
        params[neighbor_parameter(kernel)] = n_neighbors
    if named and kernel == "rbf":
        params.update(sigma=sigma, sigma_fraction=sigma_fraction)
    if named and kernel in ("rbf", LANDMARK, "pck", *ADAPTIVE):
        params["seed"] = seed
    # the block kernels keep their training points: float64 for the named ones, as given for
    # a user callable; feature maps see X as given
    block_data = named and kernel not in (LANDMARK, "pck")
    Xa = np.asarray(X, dtype=np.float64) if block_data else X
    resolved = make_kernel(kernel, Xa, **params)
    if resolved.feature_map is not None:
        return _feature_map(resolved, X, owner)
    if named:
        description = {"kernel": resolved.name, **resolved.params}
    else:
        Xa = np.asarray(X)
        description = {"kernel": getattr(kernel, "__name__", "callable")}
    block = RegistryBlock(resolved, dtype)
    nonnegative = resolved.nonnegative or not named
    return BlockKernel(block, Xa, name=description["kernel"], nonnegative=nonnegative), description


def _precomputed(X: Any, owner: str) -> PrecomputedKernel:
    """A precomputed affinity: square (the registry's check), symmetric and non-negative."""
    K = np.asarray(X, dtype=np.float64)
    if K.ndim != 2 or K.shape[0] != K.shape[1]:
        raise InvalidInputError(
            f"{owner} with kernel='precomputed' needs a square kernel matrix in fit; got "
            f"shape {K.shape}."
        )
    make_kernel("precomputed", K)
    if not np.allclose(K, K.T, rtol=1e-10, atol=1e-12 * np.abs(K).max()):
        raise InvalidInputError(f"{owner} needs a symmetric kernel matrix; K != K^T.")
    if (K < 0).any():
        raise InvalidInputError(
            f"{owner} needs a non-negative affinity matrix (it defines a random walk); "
            f"min entry {K.min()!r}."
        )
    return PrecomputedKernel(K)


def _feature_map(resolved: Kernel, X: Any, owner: str) -> tuple[FeatureMapKernel, dict]:
    """The features of the training points, checked to make a non-negative affinity."""
    G = np.asarray(resolved.feature_map.transform(np.asarray(X)), dtype=np.float64)
    if resolved.name == LANDMARK:
        return FeatureMapKernel(resolved.feature_map, G, name=LANDMARK), {
            "kernel": LANDMARK,
            **resolved.params,
        }
    if G.ndim != 2 or G.shape[0] != np.shape(X)[0]:
        raise InvalidInputError(
            f"{owner}: the feature map returned shape {G.shape} for {np.shape(X)[0]} points."
        )
    if (G < 0).any():
        raise InvalidInputError(
            f"{owner}: the feature map must be non-negative so that κ = γ·γ is a valid "
            "affinity (PCK posteriors are)."
        )
    kernel = FeatureMapKernel(resolved.feature_map, G, name=resolved.name)
    return kernel, {"kernel": resolved.name, "n_features": int(G.shape[1])}
