"""Where PCK spectral clustering keeps Γ, by size alone: pure rules, no Dask.

:class:`~dkernel.spectral.pck.PCKSpectralClustering` applies them to a fitted kernel, the
``pck-spectral`` job step to its parameters (for its cost estimate and ``dkernel validate``,
which import no Dask): one rule for both.
"""

from __future__ import annotations

#: Bytes of Γ held in memory during ``fit`` (half the default job memory limit); a larger Γ
#: is held sparse, or stays lazy.
GAMMA_MEMORY_LIMIT = 2 * 2**30
#: A lazy Γ is embedded (``solver='auto'``) from the subspace of the Γ of a uniform subsample
#: of at most this many rows, held dense within ``GAMMA_MEMORY_LIMIT``.
SUBSAMPLE_ROWS = 20_000


def gamma_placement(
    n_samples: int,
    n_features_out: int,
    n_models: int,
    itemsize: int,
    *,
    solver: str = "auto",
    allow_sparse: bool = True,
) -> str:
    """Where Γ is kept while it is embedded: ``'dense'``, ``'sparse'`` (held) or ``'lazy'``.

    Parameters
    ----------
    n_samples, n_features_out : int
        N and F, the shape of Γ.
    n_models : int
        ``Q (G - 1)``, the mixtures of the ensemble.
    itemsize : int
        Bytes per value of Γ (4 for float32).
    solver : {'auto', 'exact', 'randomized'}
        ``'exact'`` needs Γ dense.
    allow_sparse : bool
        False when the caller needs the dense Γ afterwards (the job's stored features).

    Returns
    -------
    str
        Dense when asked for the exact solver or when ``N F`` values fit
        ``GAMMA_MEMORY_LIMIT``; sparse when its estimated size (2 Q (G - 1) entries per row,
        value and column index) fits and ``allow_sparse``; lazy otherwise.
    """
    if solver == "exact" or itemsize * n_samples * n_features_out <= GAMMA_MEMORY_LIMIT:
        return "dense"
    per_row = 2 * n_models * (itemsize + 4)
    return "sparse" if allow_sparse and n_samples * per_row <= GAMMA_MEMORY_LIMIT else "lazy"


def subsample_size(n_samples: int, n_features_out: int, itemsize: int) -> int:
    """Rows of the subsample whose Γ the lazy route holds: ``SUBSAMPLE_ROWS``, fewer when its
    dense Γ would not fit ``GAMMA_MEMORY_LIMIT``."""
    rows = GAMMA_MEMORY_LIMIT // (itemsize * n_features_out)
    return int(min(n_samples, SUBSAMPLE_ROWS, rows))
