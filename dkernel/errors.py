"""Exception and warning tree for dkernel.

Every exception also subclasses the closest built-in so callers that catch
``ValueError`` or ``FileNotFoundError`` keep working.
"""

from __future__ import annotations


class DKernelError(Exception):
    """Base class of every error raised by dkernel."""


class InvalidInputError(DKernelError, ValueError):
    """Data or parameters that cannot be used (wrong shape, NaN where not allowed, ...)."""


class SpecError(DKernelError, ValueError):
    """A job specification that does not validate.

    Parameters
    ----------
    message : str
        What is wrong, the value received and what is allowed.
    key : str, optional
        Dotted path of the offending key in the spec (``params.n_clusters``).
    """

    #: Longest message (characters): values in messages are cut (dkernel.schema.params.show_value)
    #: and this is the backstop.
    MAX_MESSAGE = 2000

    def __init__(self, message: str, key: str | None = None) -> None:
        self.key = key
        text = f"{key}: {message}" if key else message
        if len(text) > self.MAX_MESSAGE:
            half = self.MAX_MESSAGE // 2
            text = f"{text[:half]} … ({len(text) - 2 * half} characters cut) … {text[-half:]}"
        super().__init__(text)


class ResourceLimitError(DKernelError, MemoryError):
    """A computation whose estimated cost exceeds a configured limit."""


class StoreError(DKernelError, OSError):
    """A results store that is missing, corrupt, foreign or in the wrong state."""


class StoreNotFoundError(StoreError, FileNotFoundError):
    """The results store does not exist."""


class RuntimeConnectionError(DKernelError, ConnectionError):
    """A Dask scheduler that cannot be reached."""


class UnguardedMainError(DKernelError, RuntimeError):
    """A process-based cluster started from a script's top level, outside the
    ``if __name__ == "__main__":`` guard that its worker processes need."""


class NotFittedError(DKernelError, AttributeError):
    """An estimator used before ``fit``."""


class DKernelWarning(UserWarning):
    """Base class of warnings emitted by dkernel (errors in the test suite)."""


class NumericalWarning(DKernelWarning):
    """A numerical fix-up was applied (clipped eigenvalues, dropped columns, ...)."""


class VarianceFloorWarning(NumericalWarning):
    """A Gaussian mixture's variance floor (``reg_covar``) is not small against a column's
    variance: every component is wider than the data along it. A floor chosen large on
    purpose (the deep kernelized autoencoder's PCK prior) filters this category."""


class StoreStatusWarning(DKernelWarning):
    """A results store that is not marked complete was opened."""


class MeanShiftConvergenceWarning(DKernelWarning):
    """Mean shift stopped at ``max_iter`` with seeds still moving (``converged_`` is False)."""


class DegenerateClusteringWarning(DKernelWarning):
    """A clustering that is no clustering: nearly every point its own cluster (the message names
    the parameter to change)."""


class DegenerateClusterWarning(DegenerateClusteringWarning):
    """A clustering returned an empty cluster, or one of a single point or a tiny fragment: a
    :class:`DegenerateClusteringWarning`, so one filter on that catches both."""


class DKernelDeprecationWarning(DKernelWarning, FutureWarning):
    """A former parameter name or value, still accepted for one release: a ``FutureWarning`` (so
    it is shown by default and caught by ``FutureWarning`` filters) that is dkernel's own."""


#: Packages whose frames a warning skips to reach the line that called dkernel (scikit-learn's
#: ``_fit_context`` and ``set_output`` wrappers sit between the user's call and ours).
_LIBRARY_PACKAGES = frozenset({"dkernel", "sklearn"})


def warn_caller(message: str, category: type[Warning] = DKernelWarning) -> None:
    """``warnings.warn`` attributed to the first frame outside dkernel and scikit-learn: the
    user's line, whatever the depth of the call (a fixed ``stacklevel`` pointed at
    ``sklearn/base.py`` when scikit-learn's wrappers were in between)."""
    import sys
    import warnings

    frame = sys._getframe(1)
    level = 2  # the caller of warn_caller
    while frame.f_back is not None and (
        str(frame.f_globals.get("__name__", "")).split(".")[0] in _LIBRARY_PACKAGES
    ):
        frame = frame.f_back
        level += 1
    warnings.warn(message, category, stacklevel=level)


def warn_if_clusters_lost(found: int, n_clusters: int) -> None:
    """A ``ConvergenceWarning`` at the user's line when the labels use fewer than
    ``n_clusters`` clusters."""
    if found < n_clusters:
        from sklearn.exceptions import ConvergenceWarning  # errors.py imports nothing eagerly

        warn_caller(
            f"Number of distinct clusters ({found}) found smaller than n_clusters "
            f"({n_clusters}). Possibly due to duplicate points in X, or a kernel too wide to "
            "tell them apart.",
            ConvergenceWarning,
        )
