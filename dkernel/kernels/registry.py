"""Kernel registry: every kernel by name (``rbf``, ``local_scaling``, ``knn``, ``knn_mean``,
``landmark``, ``cosine``, ``pck``, ``precomputed``, and scikit-learn's ``linear``, ``poly``,
``polynomial``, ``sigmoid``, ``laplacian``, ``chi2`` and ``additive_chi2`` with scikit-learn's
parameters, :mod:`dkernel.kernels.pairwise`), a user callable with an explicit ``(X, Y)``
signature, or a fitted feature map (an object with ``transform``), behind one interface. It is the package's only kernel resolver: the spectral estimators, the ranking
estimators (through ``dkernel.ranking.kernelmap``) and the kernel decomposition (whose kernel
names are these, and whose log-domain kernels are the entries' ``log_block``) all resolve here.

A :class:`Kernel` evaluates blocks ``K[i, j] = k(x_i, y_j)`` on in-memory arrays, which is all
the blocked Zarr writer (:func:`dkernel.graphs.blocked.blocked_kernel`) and the Nyström /
out-of-sample code need. ``precomputed`` kernels take rows of the kernel matrix as "data":
their landmarks are column indices rather than points. Default widths and neighbour ranks
come from ``dkernel.kernels.widths``.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from dkernel._feature_maps import make_feature_map
from dkernel._validation import as_numpy
from dkernel.errors import InvalidInputError
from dkernel.graphs.landmark import (
    DEFAULT_LANDMARK_NEIGHBORS,
    default_landmark_count,
    landmark_kernel_block,
)
from dkernel.kernels.adaptive import RadiusKernelBlock, reference_neighbors
from dkernel.kernels.aliases import warn_former_name
from dkernel.kernels.cosine import cosine_block, cosine_log_block
from dkernel.kernels.input_policy import (  # noqa: F401  (re-exported: the estimators import them here)
    _EXPECTED_DISTANCE_KERNELS,
    MISSING_VALUE_KERNELS,
    NAN_FIX,
    _refuse_new_nan,
    is_precomputed,
    kernel_allows_nan,
    kernel_input_tags,
    kernel_nan_args,
)
from dkernel.kernels.pairwise import (
    LOG_FORM,
    POSITIVE,
    SKLEARN_KERNELS,
    check_nonnegative_data,
    kernel_params,
    pairwise_block,
    pairwise_log_block,
    resolve_params,
)
from dkernel.kernels.rbf import rbf_block, rbf_log_block
from dkernel.kernels.widths import (
    DEFAULT_KNN_NEIGHBORS,
    DEFAULT_LOCAL_SCALING_NEIGHBORS,
    DEFAULT_SIGMA_FRACTION,
    RULE_OF_THUMB_SAMPLE,
    check_rbf_sigma,
    sigma_rule_of_thumb,
)
from dkernel.registry import Registry
from dkernel.rows import holds_nan, take_rows

if TYPE_CHECKING:
    from dkernel.kernels.missing_model import MissingValueModel


@dataclass(frozen=True)
class Kernel:
    """A kernel function bound to its parameters.

    Attributes
    ----------
    name : str
        Registry name (``"callable"`` for user functions).
    block : callable
        ``block(X, Y, dtype=...) -> ndarray (n_x, n_y)``.
    params : mapping
        Resolved parameters (``sigma`` for RBF), JSON-serialisable where possible.
    precomputed : bool
        The data passed in are rows of a precomputed kernel matrix.
    nonnegative : bool
        All values are >= 0, so degrees ``K 1`` are positive (normalized embeddings need it).
    feature_map : object, optional
        An explicit feature map ``γ`` (an object with ``transform``) with
        ``k(x, y) = γ(x)·γ(y)``, when the kernel has one of finite dimension (``landmark``,
        ``pck``, a fitted transformer).
    log_block : callable, optional
        ``log_block(X, Y) -> ndarray`` of ``log K`` in float64, for the kernels whose values
        underflow far from the data (``rbf``, ``local_scaling``, ``cosine``): a row
        normalisation ``K / sum(K)`` is then a softmax, exact at any width (the kernel
        decomposition's kernels).
    """

    name: str
    block: Callable[..., np.ndarray]
    params: Mapping[str, Any] = field(default_factory=dict)
    precomputed: bool = False
    nonnegative: bool = True
    feature_map: Any = None
    log_block: Callable[..., np.ndarray] | None = None

    def __call__(self, X: Any, Y: Any = None, *, dtype: Any = np.float64) -> np.ndarray:
        """Evaluate the block ``K(X, Y)`` (``Y`` defaults to ``X``)."""
        if self.precomputed:
            X = np.asarray(X, dtype=dtype)
            if Y is not None:
                raise InvalidInputError(
                    "A precomputed kernel has no (X, Y) form; pass the kernel rows as X."
                )
            return X
        if self.name in _EXPECTED_DISTANCE_KERNELS and not self.takes_nan:
            _refuse_new_nan(self.name, X, Y)
        return self.block(X, X if Y is None else Y, dtype=dtype)

    def log(self, X: Any, Y: Any = None) -> np.ndarray:
        """``log K(X, Y)`` in float64 (``Y`` defaults to ``X``), for kernels with a log form."""
        if self.log_block is None:
            raise InvalidInputError(
                f"the {self.name} kernel has no log form; the kernels with one are rbf, "
                "local_scaling and cosine."
            )
        return self.log_block(X, X if Y is None else Y)

    @property
    def takes_nan(self) -> bool:
        """Whether rows with NaN may be evaluated: PCK, and the rbf and radius kernels fitted
        on data with NaN (:mod:`dkernel.kernels.missing`: expected squared distances)."""
        return self.name == "pck" or self.params.get("missing_values") == "expected"

    def landmark_data(self, X: np.ndarray, indices: np.ndarray) -> np.ndarray:
        """What :meth:`cross` needs to know about landmarks ``indices`` of the training data."""
        if self.precomputed:
            return np.asarray(indices, dtype=np.int64)
        return np.asarray(X[indices], dtype=np.float64)

    def cross(self, X: np.ndarray, landmarks: np.ndarray, *, dtype: Any = np.float64) -> np.ndarray:
        """``K(X, landmarks)`` (n, m); for precomputed kernels the columns ``landmarks``."""
        if self.precomputed:
            X = np.asarray(X, dtype=dtype)
            if X.ndim != 2 or (landmarks.size and X.shape[1] <= int(landmarks.max())):
                raise InvalidInputError(
                    "A precomputed kernel needs rows of the kernel against all training points "
                    f"(shape (n, n_train)); got shape {X.shape}."
                )
            _check_data(self.name, X, landmarks)
            return X[:, landmarks]
        if self.name in KERNELS and self.name != "pck":
            # the rbf kernel of training data with NaN takes them in new rows too (the training
            # rows' missing-value model); one fitted on complete data has no model to
            # marginalise with
            _check_data(self.name, X, landmarks, allow_nan=self.takes_nan)
        out = self.block(X, landmarks, dtype=dtype)
        return out


@dataclass(frozen=True)
class KernelEntry:
    """A registry entry: ``factory(X=None, **params) -> Kernel``."""

    name: str
    factory: Callable[..., Kernel]
    description: str = ""


#: The named kernels (registered below).
KERNELS: Registry[KernelEntry] = Registry(
    "kernel", error=InvalidInputError, suffix=", or a callable f(X, Y)"
)


def register_kernel(entry: KernelEntry) -> KernelEntry:
    """Add a named kernel to the registry."""
    return KERNELS.register(entry.name, entry)


def available_kernels() -> list[str]:
    """Names accepted by :func:`make_kernel`."""
    return KERNELS.names()


def check_kernel_supported(
    kernel: Any, owner: str, accepted: tuple[str, ...] | frozenset[str], needs: str
) -> None:
    """Refuse a kernel of the registry (or a callable) that ``owner`` cannot use, naming what
    the method needs of its kernel and the kernels that have it.

    Names the registry does not know are left to the parameter check (it lists the valid ones).

    Raises
    ------
    InvalidInputError
        ``kernel`` is a registered name not in ``accepted``, or a callable.

    Examples
    --------
    >>> check_kernel_supported("rbf", "M", ("rbf",), "a kernel with a width")
    >>> check_kernel_supported("linear", "M", ("rbf",), "a kernel with a width")
    Traceback (most recent call last):
    ...
    dkernel.errors.InvalidInputError: M needs a kernel with a width; kernel='linear' is not one. Use kernel='rbf'.
    """
    if isinstance(kernel, str) and (kernel in accepted or kernel not in KERNELS):
        return
    what = f"kernel={kernel!r}" if isinstance(kernel, str) else "a kernel callable"
    choices = " or ".join(repr(name) for name in sorted(accepted))
    raise InvalidInputError(f"{owner} needs {needs}; {what} is not one. Use kernel={choices}.")


def _sample_rows(X: Any, size: int, seed: int | None) -> np.ndarray:
    n = int(X.shape[0])
    if n <= size:
        return as_numpy(X, np.float64)
    idx = np.sort(np.random.default_rng(seed).choice(n, size=size, replace=False))
    return take_rows(X, idx, np.float64)


def _rbf_factory(
    X: Any = None,
    *,
    sigma: float | None = None,
    gamma: float | None = None,
    sigma_fraction: float = DEFAULT_SIGMA_FRACTION,
    seed: int | None = 0,
) -> Kernel:
    if gamma is not None:
        # scikit-learn's spelling of the same width: exp(-gamma ||x-y||^2), gamma = 1/(2 sigma^2)
        if sigma is not None:
            raise InvalidInputError(
                f"The rbf kernel got both sigma={sigma!r} and gamma={gamma!r}, two spellings of "
                "its width (gamma = 1 / (2 sigma^2)); give one."
            )
        ok = isinstance(gamma, int | float) and not isinstance(gamma, bool)
        if not (ok and np.isfinite(gamma) and gamma > 0):
            raise InvalidInputError(
                f"The 'gamma' parameter of the rbf kernel must be a float > 0. Got {gamma!r} "
                "instead."
            )
        sigma = float(np.sqrt(0.5 / gamma))
    if sigma is None:
        if X is None:
            raise InvalidInputError(
                "The 'sigma' parameter of the rbf kernel is None, so it is chosen by the rule of "
                "thumb from the data; pass X (or an explicit sigma > 0)."
            )
        # the sample first, so that Dask input is not read whole for its median distance
        sample = _sample_rows(X, RULE_OF_THUMB_SAMPLE, seed)
        if holds_nan(X, sample):
            return _missing_value_rbf(X, sample, None, sigma_fraction)
        sigma = sigma_rule_of_thumb(sample, fraction=sigma_fraction, seed=seed)
    elif X is not None and holds_nan(X):
        return _missing_value_rbf(X, None, sigma, sigma_fraction)
    sigma = check_rbf_sigma(sigma)
    # partials of module-level functions, so fitted models pickle (joblib, Dask workers)
    return Kernel(
        "rbf",
        functools.partial(rbf_block, sigma=sigma),
        {"sigma": sigma},
        log_block=functools.partial(rbf_log_block, sigma=sigma),
    )


def _missing_value_rbf(
    X: Any, sample: np.ndarray | None, sigma: float | None, fraction: float
) -> Kernel:
    """The rbf kernel of training data with NaN: expected squared distances with the training
    rows' missing-value model (``dkernel.kernels.missing.MissingValueRBF``); the rule-of-thumb
    width is ``fraction`` × the median expected distance of the sample."""
    from dkernel.kernels.missing import MissingValueRBF, expected_median_distance

    model = _missing_model_of(X)
    if sigma is None:
        med = expected_median_distance(sample, model=model)
        if not med > 0:
            raise InvalidInputError(
                "The rbf kernel's rule of thumb found a median distance of 0; pass sigma."
            )
        sigma = fraction * med
    sigma = check_rbf_sigma(sigma)
    block = MissingValueRBF(sigma, model)
    return Kernel("rbf", block, {"sigma": sigma, "missing_values": "expected"}, log_block=block.log)


#: Reference points for the neighbour radii: all points up to this size, a uniform sample above.
DEFAULT_N_REFERENCE = 2000
#: Kernels whose widths adapt to each point's neighbourhood.
ADAPTIVE_KERNELS = ("local_scaling", "knn", "knn_mean")


def _radius_kernel(
    kind: str,
    X: Any,
    n_neighbors: int,
    n_reference: int | None,
    seed: int | None,
    *,
    parameter: str = "n_neighbors",
) -> Kernel:
    """An adaptive kernel; ``n_neighbors`` is the k-NN graphs' size or, for local_scaling, the
    widths' rank, given as ``parameter`` (``'n_neighbors'`` or ``'scale_neighbors'``)."""
    label = kind
    if (
        not isinstance(n_neighbors, int | np.integer)
        or isinstance(n_neighbors, bool)
        or (n_neighbors < 1)
    ):
        raise InvalidInputError(
            f"The {parameter!r} parameter of the {label} kernel must be an int >= 1. "
            f"Got {n_neighbors!r} instead."
        )
    if n_reference is not None and (
        not isinstance(n_reference, int | np.integer)
        or isinstance(n_reference, bool)
        or n_reference < 2
    ):
        raise InvalidInputError(
            f"The 'n_reference' parameter of the {label} kernel must be an int >= 2 or None "
            f"(every training point). Got {n_reference!r} instead."
        )
    if X is None:
        raise InvalidInputError(
            f"The {label} kernel measures each point's neighbour distance among the training "
            "points; pass the training data X."
        )
    n = int(X.shape[0])
    if n_neighbors >= n:
        raise InvalidInputError(
            f"The {parameter!r} parameter of the {label} kernel must be < the number of training "
            f"points ({n}). Got {n_neighbors} instead; use a smaller {parameter}."
        )
    size = n if n_reference is None else min(n, int(n_reference))
    reference = _sample_rows(X, size, seed)
    if np.isinf(reference).any():
        raise InvalidInputError(
            f"The {label} kernel got infinite values in X (NaN is a missing value); remove or "
            "impute them."
        )
    k_ref = reference_neighbors(int(n_neighbors), size, n)
    missing = holds_nan(X, reference)
    if missing:
        # rows with NaN: expected squared distances with the training rows' missing-value model
        from dkernel.kernels.missing import MissingValueRadiusBlock

        block_nan = MissingValueRadiusBlock(kind, reference, k_ref, _missing_model_of(X))
        radii = block_nan.radius(reference)
    else:
        block = RadiusKernelBlock(kind, reference, k_ref)
        radii = block.radius(reference)
    if not np.all(radii > 0):
        raise InvalidInputError(
            f"The {label} kernel found {int(np.sum(radii <= 0))} points whose every reference "
            "neighbour coincides with them (all points identical?), so their neighbour "
            "distance is 0; remove duplicates or use kernel='rbf' with an explicit sigma."
        )
    params = {parameter: int(n_neighbors), "n_reference": size, "reference_neighbors": k_ref}
    if missing:
        params["missing_values"] = "expected"
        log_block = block_nan.log_block if kind == "local_scaling" else None
        return Kernel(label, block_nan, params, log_block=log_block)
    return _radius_kernel_of(label, block, params)


def neighbor_parameter(name: str) -> str:
    """The name of an adaptive kernel's neighbour count: ``'scale_neighbors'``, the widths'
    rank, for local_scaling; ``'n_neighbors'``, the graph's size, for knn and knn_mean."""
    return "scale_neighbors" if name == "local_scaling" else "n_neighbors"


def neighbor_count(kernel: Kernel) -> int:
    """An adaptive kernel's neighbour count: local_scaling's ``scale_neighbors`` (the widths'
    rank), the k-NN kernels' ``n_neighbors`` (the graph's size)."""
    return int(kernel.params.get("scale_neighbors", kernel.params.get("n_neighbors")))


def _missing_model_of(X: Any) -> MissingValueModel:
    """What the training rows' missing entries are expected to be
    (:class:`~dkernel.kernels.missing_model.MissingValueModel`), fitted on at most
    ``MISSING_MODEL_SAMPLE`` of them (evenly spaced rows; of Dask input only those are read)."""
    from dkernel.kernels.missing_model import MissingValueModel, model_rows, warn_of_empty_rows

    if isinstance(X, np.ndarray):
        warn_of_empty_rows(X)
        return MissingValueModel.fit(X)
    return MissingValueModel.fit(take_rows(X, model_rows(int(X.shape[0])), np.float64))


def _radius_kernel_of(name: str, block: RadiusKernelBlock, params: dict) -> Kernel:
    log_block = block.log_block if block.kind == "local_scaling" else None
    return Kernel(name, block, params, log_block=log_block)


def with_landmark_reference(kernel: Kernel, landmarks: np.ndarray, n_train: int) -> Kernel:
    """The adaptive ``kernel`` with its neighbour radii measured among ``landmarks``.

    Nyström evaluates every point against the landmarks anyway, so taking the landmarks as the
    reference set makes the radii free (one distance block gives both). The neighbour rank is
    *not* rescaled to the landmarks' share of the data: a Nyström kernel must be smooth at the
    landmark spacing to be represented by the landmarks, so σ is the distance to the k-th
    nearest landmark — self-tuning at the landmarks' resolution. Other kernels are returned
    unchanged.
    """
    if kernel.name not in ADAPTIVE_KERNELS or not isinstance(kernel.block, RadiusKernelBlock):
        return kernel
    m = int(landmarks.shape[0])
    k_ref = min(neighbor_count(kernel), m - 1)
    reference = np.asarray(landmarks, dtype=np.float64)
    block = RadiusKernelBlock(kernel.block.kind, reference, k_ref)
    params = {**kernel.params, "n_reference": m, "reference_neighbors": k_ref}
    params["reference"] = "landmarks"
    return _radius_kernel_of(kernel.name, block, params)


def _local_scaling_factory(
    X: Any = None,
    *,
    scale_neighbors: int = DEFAULT_LOCAL_SCALING_NEIGHBORS,
    n_reference: int | None = DEFAULT_N_REFERENCE,
    seed: int | None = 0,
    n_neighbors: int | None = None,
) -> Kernel:
    # n_neighbors: the former name of the widths' rank (a k-NN graph's size elsewhere), kept
    # for one release; it wins when given, as a kernel_params entry overrode the default
    if n_neighbors is not None:
        scale_neighbors = n_neighbors
        warn_former_name("the local_scaling kernel", "n_neighbors", "scale_neighbors", n_neighbors)
    return _radius_kernel(
        "local_scaling", X, scale_neighbors, n_reference, seed, parameter="scale_neighbors"
    )


def _knn_mean_factory(
    X: Any = None,
    *,
    n_neighbors: int = DEFAULT_KNN_NEIGHBORS,
    n_reference: int | None = DEFAULT_N_REFERENCE,
    seed: int | None = 0,
) -> Kernel:
    return _radius_kernel("knn_mean", X, n_neighbors, n_reference, seed)


def _knn_factory(
    X: Any = None,
    *,
    n_neighbors: int = DEFAULT_KNN_NEIGHBORS,
    n_reference: int | None = DEFAULT_N_REFERENCE,
    seed: int | None = 0,
) -> Kernel:
    return _radius_kernel("knn", X, n_neighbors, n_reference, seed)


def _landmark_factory(
    X: Any = None,
    *,
    n_landmarks: int | None = None,
    n_neighbors: int = DEFAULT_LANDMARK_NEIGHBORS,
    seed: int | None = 0,
) -> Kernel:
    if X is None:
        raise InvalidInputError(
            "The landmark kernel places its landmarks by k-means of the training points and "
            "weighs them by how many points they gather; pass the training data X."
        )
    for name, value in (("n_landmarks", n_landmarks), ("n_neighbors", n_neighbors)):
        if value is None and name == "n_landmarks":
            continue
        if not isinstance(value, int | np.integer) or isinstance(value, bool) or value < 1:
            raise InvalidInputError(
                f"The {name!r} parameter of the landmark kernel must be an int >= 1. Got "
                f"{value!r} instead."
            )
    # the Dask glue of the landmark graph: imported here so the registry stays light to import
    from dkernel.graphs.bipartite import fit_landmark_features

    p = int(n_landmarks) if n_landmarks is not None else default_landmark_count(X.shape[0])
    features = fit_landmark_features(X, p, int(n_neighbors), seed)
    block = functools.partial(landmark_kernel_block, features=features)
    params = {"n_landmarks": p, "n_neighbors": int(n_neighbors)}
    return Kernel("landmark", block, params, feature_map=features)


def _cosine_factory(X: Any = None) -> Kernel:
    return Kernel("cosine", cosine_block, {}, nonnegative=False, log_block=cosine_log_block)


def _sklearn_kernel(name: str, X: Any, params: dict) -> Kernel:
    """scikit-learn's kernel ``name`` with its parameters (defaults filled from ``X``)."""
    given = {key: value for key, value in params.items() if value is not None}
    resolved = resolve_params(name, None if X is None else int(X.shape[1]), **given)
    if isinstance(X, np.ndarray):
        check_nonnegative_data(name, X)
    # partials of module-level functions, so fitted models pickle (joblib, Dask workers)
    block = functools.partial(pairwise_block, name=name, params=resolved)
    log_block = None
    if name in LOG_FORM:
        log_block = functools.partial(pairwise_log_block, name=name, gamma=resolved["gamma"])
    return Kernel(name, block, resolved, nonnegative=name in POSITIVE, log_block=log_block)


def _sklearn_factory(name: str) -> Callable[..., Kernel]:
    """The registry factory of scikit-learn's kernel ``name``: ``factory(X=None, **params)``
    whose signature lists scikit-learn's parameters (what :func:`make_kernel` accepts)."""

    def factory(X: Any = None, **params: Any) -> Kernel:
        return _sklearn_kernel(name, X, params)

    parameters = [inspect.Parameter("X", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None)]
    parameters += [
        inspect.Parameter(key, inspect.Parameter.KEYWORD_ONLY, default=None)
        for key in sorted(kernel_params(name))
    ]
    factory.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    return factory


def _precomputed_factory(X: Any = None) -> Kernel:
    if X is not None and X.ndim == 2 and X.shape[0] != X.shape[1]:
        raise InvalidInputError(
            "A precomputed kernel passed to fit must be square (n_train, n_train); got shape "
            f"{X.shape}."
        )
    return Kernel("precomputed", _precomputed_block, {}, precomputed=True, nonnegative=False)


def _precomputed_block(A: Any, B: Any, *, dtype: Any = np.float64) -> Any:
    """The rows themselves: a precomputed kernel's "data" are its values."""
    return A


def _feature_map_block(A: Any, B: Any, *, model: Any, dtype: Any = np.float64) -> np.ndarray:
    """``γ(A) γ(B)ᵀ`` from a fitted feature map (``Γ_A Γ_Bᵀ / Z`` for a PCK)."""
    GA = np.asarray(model.transform(A), dtype=dtype)
    GB = GA if B is A else np.asarray(model.transform(B), dtype=dtype)
    return GA @ GB.T


def _is_fitted(estimator: Any) -> bool:
    return any(k.endswith("_") and not k.startswith("_") for k in vars(estimator))


def _pck_factory(X: Any = None, *, model: Any = None, seed: int | None = 0) -> Kernel:
    if model is None:
        if X is None:
            raise InvalidInputError(
                "The 'pck' kernel needs a fitted dkernel.gmm.ProbabilisticClusterKernel passed "
                "as model=..., or the training data X to fit a default one on."
            )
        # gmm's estimator, registered by name in dkernel/__init__.py (dkernel._feature_maps)
        model = make_feature_map("pck", random_state=seed).fit(X)
    if not hasattr(model, "transform"):
        raise InvalidInputError(
            f"The 'model' parameter of the pck kernel must be a fitted ProbabilisticClusterKernel "
            f"(an object with transform). Got {type(model).__name__} instead."
        )

    # partials of module-level functions, not closures, so fitted models pickle
    block = functools.partial(_feature_map_block, model=model)
    return Kernel("pck", block, {"model": type(model).__name__}, feature_map=model)


def _feature_map_kernel(model: Any, X: Any, nonnegative: bool) -> Kernel:
    """``κ(x, y) = γ(x)·γ(y)`` of a transformer (fitted on ``X`` first when it is not)."""
    if not _is_fitted(model):
        if X is None:
            raise InvalidInputError(
                f"the feature map {type(model).__name__} is not fitted; pass the training data "
                "X to fit it on, or fit it first."
            )
        model = model.fit(X)
    block = functools.partial(_feature_map_block, model=model)
    return Kernel(type(model).__name__, block, {}, nonnegative=nonnegative, feature_map=model)


def _check_callable_signature(func: Callable) -> None:
    try:
        sig = inspect.signature(func)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(
            f"cannot read the signature of kernel callable {func!r}: {exc}. Use a Python "
            "function def kernel(X, Y) -> ndarray."
        ) from exc
    positional = [
        p
        for p in sig.parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
    ]
    has_var = any(p.kind == p.VAR_POSITIONAL for p in sig.parameters.values())
    if len(positional) != 2 and not (has_var and len(positional) < 2):
        raise InvalidInputError(
            f"A kernel callable must take exactly two required positional arguments (X, Y) and "
            f"return the (len(X), len(Y)) matrix; {getattr(func, '__name__', func)!r} has "
            f"signature {sig}."
        )


def _callable_kernel(func: Callable, nonnegative: bool) -> Kernel:
    _check_callable_signature(func)
    name = getattr(func, "__name__", type(func).__name__)
    # pickles whenever the user's function does
    block = functools.partial(_callable_block, func=func, name=name)
    return Kernel("callable", block, {"function": name}, nonnegative=nonnegative)


def _callable_block(
    A: Any, B: Any, *, func: Callable, name: str, dtype: Any = np.float64
) -> np.ndarray:
    """``func(A, B)`` as an array of ``dtype``, its shape checked."""
    out = np.asarray(func(A, B), dtype=dtype)
    if out.shape != (len(A), len(B)):
        raise InvalidInputError(
            f"kernel callable {name!r} returned shape {out.shape} for inputs of "
            f"{len(A)} and {len(B)} rows; it must return ({len(A)}, {len(B)})."
        )
    return out


def make_kernel(
    kernel: str | Callable | Kernel,
    X: Any = None,
    *,
    nonnegative: bool = True,
    **params: Any,
) -> Kernel:
    """Resolve a kernel given by name, user callable, feature map or :class:`Kernel`.

    Parameters
    ----------
    kernel : str, callable, transformer or Kernel
        A registered name (see :func:`available_kernels`), a function ``f(X, Y) -> ndarray``
        with exactly two positional parameters, an object with ``transform`` (an explicit
        feature map ``γ``, ``κ(x, y) = γ(x)·γ(y)``; fitted on ``X`` when it is not fitted
        yet), or an already resolved :class:`Kernel`.
    X : array-like, optional
        Training data, for parameters chosen from the data (RBF ``sigma`` rule of thumb, the
        adaptive kernels' neighbour radii, the landmarks, a default PCK).
    nonnegative : bool
        For callables and feature maps: whether the values are known to be >= 0.
    **params
        Kernel parameters (``sigma`` or scikit-learn's ``gamma = 1 / (2 sigma^2)``,
        ``sigma_fraction`` and ``seed`` for rbf; ``scale_neighbors`` (the widths' rank;
        formerly ``n_neighbors``), ``n_reference`` and ``seed`` for local_scaling;
        ``n_neighbors`` (the graph's size), ``n_reference`` and ``seed`` for knn and knn_mean;
        ``n_landmarks``, ``n_neighbors`` and ``seed`` for
        landmark; ``model`` (or ``seed``, to fit a default one on X) for pck; scikit-learn's
        ``gamma``, ``degree`` and ``coef0`` for its kernels, with its defaults). Defaults:
        ``dkernel.kernels.widths``; rbf's width is the rule of thumb when neither ``sigma``
        nor ``gamma`` is given (scikit-learn's default is ``gamma = 1 / n_features``).

    Returns
    -------
    Kernel

    Raises
    ------
    InvalidInputError
        Unknown names (listing the valid ones), bad parameters or callables without an
        explicit (X, Y) signature.

    Examples
    --------
    >>> import numpy as np
    >>> k = make_kernel("rbf", sigma=1.0)
    >>> k(np.zeros((1, 2)), np.ones((1, 2))).round(4)
    array([[0.3679]])
    """
    if isinstance(kernel, Kernel):
        return kernel
    if not isinstance(kernel, str) and hasattr(kernel, "transform"):
        if params:
            raise InvalidInputError(
                f"kernel parameters {sorted(params)} cannot be passed with a feature map; set "
                "them on the transformer."
            )
        return _feature_map_kernel(kernel, X, nonnegative)
    if callable(kernel):
        if params:
            raise InvalidInputError(
                f"kernel parameters {sorted(params)} cannot be passed with a kernel callable; "
                "bind them in the function (functools.partial)."
            )
        return _callable_kernel(kernel, nonnegative)
    entry = KERNELS.lookup(kernel)
    factory = entry.factory
    allowed = set(inspect.signature(factory).parameters) - {"X"}
    unknown = sorted(set(params) - allowed)
    if unknown:
        raise InvalidInputError(
            f"unknown parameters {unknown} for the {kernel!r} kernel. Valid parameters: "
            f"{', '.join(sorted(allowed)) or '(none)'}."
        )
    if X is not None:
        _check_data(entry.name, X, allow_nan=entry.name in MISSING_VALUE_KERNELS)
    return factory(X, **params)


def _check_data(name: str, X: Any, landmarks: Any = None, *, allow_nan: bool = False) -> None:
    """Refuse data a kernel cannot evaluate: not 2-D, no rows, a feature count other than the
    landmarks', or (in memory) NaN (unless ``allow_nan``) or inf. Dask input is checked by
    shape only."""
    shape = getattr(X, "shape", None)
    if shape is None or len(shape) != 2:
        raise InvalidInputError(
            f"The {name} kernel needs data of shape (n_samples, n_features); got "
            f"{'shape ' + str(tuple(shape)) if shape is not None else type(X).__name__}."
        )
    if landmarks is None and shape[0] == 0:
        raise InvalidInputError(f"The {name} kernel got data with no rows (shape {tuple(shape)}).")
    width = getattr(landmarks, "shape", (0, shape[1]))
    if len(width) == 2 and width[1] != shape[1]:
        raise InvalidInputError(
            f"X has {shape[1]} features, but the {name} kernel's points have {width[1]}."
        )
    if isinstance(X, np.ndarray) and X.dtype.kind in "fc" and allow_nan:
        if np.isinf(X).any():
            raise InvalidInputError(
                f"The {name} kernel got infinite values in X (NaN is a missing value); remove "
                "or impute them."
            )
    elif isinstance(X, np.ndarray) and X.dtype.kind in "fc" and not np.isfinite(X).all():
        raise InvalidInputError(
            f"The {name} kernel got non-finite values (NaN or inf) in X; remove or impute them."
        )


register_kernel(
    KernelEntry(
        "rbf",
        _rbf_factory,
        "exp(-||x-y||^2 / 2 sigma^2) = exp(-gamma ||x-y||^2), rule-of-thumb sigma",
    )
)
register_kernel(
    KernelEntry(
        "local_scaling",
        _local_scaling_factory,
        "exp(-||x-y||^2 / (s_x s_y)), s = distance to the k-th neighbour (self-tuning)",
    )
)
register_kernel(
    KernelEntry("knn", _knn_factory, "symmetric k-nearest-neighbour graph (0/1), self-loops")
)
register_kernel(
    KernelEntry(
        "knn_mean",
        _knn_mean_factory,
        "half-weighted k-NN graph: 1 mutual, 1/2 one way (scikit-learn's k-NN affinity)",
    )
)
register_kernel(
    KernelEntry(
        "landmark",
        _landmark_factory,
        "landmark bipartite graph B D^-1 B^T: points joined through their K nearest of p "
        "k-means landmarks, self-tuning weights (U-SPEC); explicit p-dim features",
    )
)
register_kernel(KernelEntry("cosine", _cosine_factory, "<x, y> / (||x|| ||y||)"))
register_kernel(KernelEntry("precomputed", _precomputed_factory, "X holds kernel rows"))
register_kernel(
    KernelEntry(
        "pck",
        _pck_factory,
        "probabilistic cluster kernel of a fitted model (or of a default one fitted on X)",
    )
)
#: scikit-learn's kernels (:mod:`dkernel.kernels.pairwise`), with scikit-learn's formulas.
_SKLEARN_DESCRIPTIONS = {
    "linear": "<x, y> (scikit-learn's)",
    "poly": "(gamma <x, y> + coef0)^degree (scikit-learn's)",
    "polynomial": "the poly kernel under scikit-learn's other name",
    "sigmoid": "tanh(gamma <x, y> + coef0) (scikit-learn's)",
    "laplacian": "exp(-gamma ||x-y||_1) (scikit-learn's)",
    "chi2": "exp(-gamma sum (x-y)^2 / (x+y)), non-negative data (scikit-learn's)",
    "additive_chi2": "-sum (x-y)^2 / (x+y), non-negative data (scikit-learn's)",
}
for _name in SKLEARN_KERNELS:
    register_kernel(KernelEntry(_name, _sklearn_factory(_name), _SKLEARN_DESCRIPTIONS[_name]))
