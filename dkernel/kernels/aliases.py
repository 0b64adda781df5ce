"""Former names of parameter values, kept as deprecated aliases: one word per idea.

The estimators once spelled some ideas two ways (``'njw'`` and ``'normalized'`` for the
Ng–Jordan–Weiss embedding, ``'gaussian'`` and ``'rbf'`` for the Gaussian kernel). Each idea now
has one name; the old one still works, in Python and in job specs, and warns once per process
with a ``FutureWarning`` (dkernel.errors.DKernelDeprecationWarning) naming the replacement.
An estimator resolves such a parameter with :func:`resolve_alias` when it fits (never in
``__init__``: ``get_params`` returns what the user passed). CHANGELOG.md lists every rename.

Parameter *names* are renamed the same way (:data:`RENAMED_PARAMETERS`): the estimator keeps
the former name in its signature for one release, with the default ``None`` (not given), and
reads the current one through :func:`resolve_renamed` when it fits, which takes the former
name's value (warning once per process) when it was given. A job spec may still write the
former name: the job's schema is derived from the signature.

NumPy-free and Dask-free: estimators and job steps alike may import it.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping

from dkernel.errors import DKernelDeprecationWarning, warn_caller

__all__ = [
    "FORMER_MEANINGS",
    "RENAMED_PARAMETERS",
    "RENAMED_VALUES",
    "resolve_alias",
    "resolve_former_meaning",
    "resolve_renamed",
    "warn_former_name",
]

#: Parameter name -> {former value: current value}.
RENAMED_VALUES: Mapping[str, Mapping[str, str]] = {
    # KernelDecompositionClustering, select_kdc_model: the registry's name of the kernel
    "kernel": {"gaussian": "rbf"},
    # MSSC (and dkernel.meanshift.second_stage): SpectralClustering's and NystromEmbedding's
    # name; the rbf-spectral job's 'kpca-uncentered' is their 'uncentered'
    "embedding": {"njw": "normalized", "kpca-uncentered": "uncentered"},
}

#: Estimator -> {former parameter name: current name}: one name per meaning (issue 53).
#: ``n_neighbors`` is the size of a k-NN graph (scikit-learn's meaning, and
#: KernelDecompositionClustering's, KernelPersonalizedPageRank's, JointRankingClustering's);
#: these estimators called the rank of the self-tuning width (the neighbour whose distance is
#: each point's σ) ``n_neighbors``, which KernelDecompositionClustering calls ``scale_neighbors``.
RENAMED_PARAMETERS: Mapping[str, Mapping[str, str]] = {
    "SpectralClustering": {
        "n_neighbors": "scale_neighbors",
        "kmeans_sample": "kmeans_max_samples",
    },
    "KernelPCAEmbedding": {"n_neighbors": "scale_neighbors"},
    "KECA": {"n_neighbors": "scale_neighbors"},
    # regularization is kernel CCA's ridge term (KernelCCA, ChangeDetection); MSSC's is the
    # degree regularisation of its partition graph
    "MSSC": {
        "regularization": "degree_regularization",
        "n_density": "density_max_samples",
    },
    # a sample size is max_samples (scikit-learn's: rows a fit draws), prefixed by the stage
    # it bounds where the rest of the fit sees every row
    "KernelKMeans": {"kmeans_sample": "kmeans_max_samples"},
    "MeanShift": {"n_density": "density_max_samples"},
    "ChangeDetection": {"sample_size": "max_samples"},
    # the PCK's Q is the size of an ensemble whose members are all kept (scikit-learn's
    # n_estimators), not a count of restarts of which the best is kept (n_init)
    "ProbabilisticClusterKernel": {"n_inits": "n_estimators", "subsample": "max_samples"},
    # showing training progress is ``progress`` (a bar on a terminal or in Jupyter, lines in
    # a log), as for DeepKernelizedAutoencoder, PCK and MSSC
    "DeepDivergenceClustering": {"verbose": "progress"},
}

#: Estimator -> {parameter: (the parameter that took over one of its meanings, when)}:
#: KernelPersonalizedPageRank and JointRankingClustering passed ``n_neighbors`` to every
#: adaptive kernel, so with ``kernel='local_scaling'`` it was the widths' rank; that is
#: ``scale_neighbors`` now, and ``n_neighbors`` only the k-NN graph's size. For one release a
#: non-default ``n_neighbors`` still sets the rank there, with a warning
#: (:func:`resolve_former_meaning`).
FORMER_MEANINGS: Mapping[str, Mapping[str, tuple[str, str]]] = {
    "KernelPersonalizedPageRank": {"n_neighbors": ("scale_neighbors", "kernel='local_scaling'")},
    "JointRankingClustering": {"n_neighbors": ("scale_neighbors", "kernel='local_scaling'")},
}

#: (parameter, former value) pairs already warned about in this process; former parameter
#: names as (owner, former name).
_WARNED: set[tuple[str, str]] = set()


def resolve_alias(value: object, parameter: str, owner: str) -> object:
    """``value`` with a former name replaced by the current one (warning once per process).

    Parameters
    ----------
    value : object
        The parameter's value as the user gave it.
    parameter : str
        The parameter's name (a key of :data:`RENAMED_VALUES`).
    owner : str
        The estimator or function, for the message.

    Returns
    -------
    object
        The current name when ``value`` is a former one, otherwise ``value`` itself.

    Warns
    -----
    DKernelDeprecationWarning
        The first time in the process that a given former value is used.

    Examples
    --------
    >>> resolve_alias("rbf", "kernel", "KernelDecompositionClustering")
    'rbf'
    """
    if not isinstance(value, str):
        return value
    new = RENAMED_VALUES.get(parameter, {}).get(value)
    if new is None:
        return value
    if (parameter, value) not in _WARNED:
        _WARNED.add((parameter, value))
        warnings.warn(
            f"{owner}: {parameter}={value!r} is a deprecated name and will be removed in a "
            f"future release; use {parameter}={new!r} (the same {parameter}).",
            DKernelDeprecationWarning,
            stacklevel=3,
        )
    return new


def renamed_parameters(owner: type | object) -> Mapping[str, str]:
    """``{former name: current name}`` of an estimator class or instance (empty if none)."""
    cls = owner if isinstance(owner, type) else type(owner)
    return RENAMED_PARAMETERS.get(cls.__name__, {})


def resolve_renamed(estimator: object, current: str) -> object:
    """The value of parameter ``current`` of ``estimator``, or of its former name when that
    was given (not None), warning once per process.

    Parameters
    ----------
    estimator : object
        The estimator (its class name keys :data:`RENAMED_PARAMETERS`).
    current : str
        The parameter's current name.

    Returns
    -------
    object
        ``getattr(estimator, former)`` when the former name was given, else
        ``getattr(estimator, current)``.

    Raises
    ------
    ValueError
        Both names were given, with different values.

    Warns
    -----
    DKernelDeprecationWarning
        The first time in the process that the former name of this estimator is used.
    """
    owner = type(estimator).__name__
    value = getattr(estimator, current)
    for former, new in renamed_parameters(estimator).items():
        old = getattr(estimator, former, None)
        if new != current or old is None:
            continue
        default = _init_default(type(estimator), current)
        if value != default and value != old:
            raise ValueError(
                f"{owner}: {former}={old!r} is the former name of {current}, which is "
                f"{value!r}; give {current} only."
            )
        warn_former_name(owner, former, current, old)
        return old
    return value


def warn_former_name(owner: str, former: str, current: str, value: object) -> None:
    """Warn, once per process and ``owner``, that ``former`` is the deprecated name of
    ``current`` (attributed to the user's line, past scikit-learn's fit wrappers)."""
    if (owner, former) in _WARNED:
        return
    _WARNED.add((owner, former))
    warn_caller(
        f"{owner}: the parameter {former} is deprecated here and will be removed in a "
        f"future release; use {current}={value!r} (the same parameter; CHANGELOG.md says "
        "why it was renamed).",
        DKernelDeprecationWarning,
    )


def _init_default(cls: type, name: str) -> object:
    import inspect

    return inspect.signature(cls).parameters[name].default


def resolve_former_meaning(estimator: object, former: str) -> object:
    """The value of the parameter that took over a meaning of ``former``
    (:data:`FORMER_MEANINGS`): ``former``'s own value when it was given (differs from its
    default), warning once per process; otherwise the current parameter's.

    Raises
    ------
    ValueError
        Both were given, with different values.
    """
    owner = type(estimator).__name__
    current, where = FORMER_MEANINGS[owner][former]
    value, old = getattr(estimator, current), getattr(estimator, former)
    if old == _init_default(type(estimator), former):
        return value
    if value != _init_default(type(estimator), current) and value != old:
        raise ValueError(
            f"{owner}: with {where}, {former}={old!r} is the former spelling of "
            f"{current}, which is {value!r}; give {current} only."
        )
    if (owner, f"{former}@{where}") not in _WARNED:
        _WARNED.add((owner, f"{former}@{where}"))
        warn_caller(
            f"{owner}: {former}={old!r} with {where} set what {current} sets now ({former} is "
            f"the size of a k-NN graph); this is deprecated and will stop in a future release: "
            f"use {current}={old!r}.",
            DKernelDeprecationWarning,
        )
    return old
