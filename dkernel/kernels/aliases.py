"""Former names of parameter values, kept as deprecated aliases: one word per idea.

The estimators once spelled some ideas two ways (``'njw'`` and ``'normalized'`` for the
Ng–Jordan–Weiss embedding, ``'gaussian'`` and ``'rbf'`` for the Gaussian kernel). Each idea now
has one name; the old one still works, in Python and in job specs, and warns once per process
with a ``FutureWarning`` (dkernel.errors.DKernelDeprecationWarning) naming the replacement.
An estimator resolves such a parameter with :func:`resolve_alias` when it fits (never in
``__init__``: ``get_params`` returns what the user passed). CHANGELOG.md lists every rename.

NumPy-free and Dask-free: estimators and job steps alike may import it.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping

from dkernel.errors import DKernelDeprecationWarning

__all__ = ["RENAMED_VALUES", "resolve_alias"]

#: Parameter name -> {former value: current value}.
RENAMED_VALUES: Mapping[str, Mapping[str, str]] = {
    # KernelDecompositionClustering, select_kdc_model: the registry's name of the kernel
    "kernel": {"gaussian": "rbf"},
    # MSSC (and dkernel.meanshift.second_stage): SpectralClustering's and NystromEmbedding's
    # name; the rbf-spectral job's 'kpca-uncentered' is their 'uncentered'
    "embedding": {"njw": "normalized", "kpca-uncentered": "uncentered"},
}

#: (parameter, former value) pairs already warned about in this process.
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
