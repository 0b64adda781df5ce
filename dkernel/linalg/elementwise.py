"""Element-wise passes over kernel blocks (NumPy only)."""

from __future__ import annotations

import numpy as np

__all__ = ["EXP_FLOOR_MARGIN", "exp_flushed", "flush_for"]

#: How far above the log of the dtype's smallest normal number :func:`exp_flushed` flushes
#: to zero: its smallest non-zero result is e⁸ ≈ 3000 times that number, so products of it
#: with values down to e⁻⁸ ≈ 3 · 10⁻⁴ (a GEMM on the block) stay normal too.
EXP_FLOOR_MARGIN = 8.0


def exp_flushed(G: np.ndarray, *, ceiling: float | None = None) -> np.ndarray:
    """``exp`` of a float array in place, with results below ``exp(floor)`` flushed to zero,
    ``floor = log(tiny) + EXP_FLOOR_MARGIN`` (about -79.3 in float32, -700.4 in float64).

    Kernel blocks exponentiate arguments down to thousands below zero (points many widths
    apart), and ``exp`` of anything between about -104 and -87.3 in float32 (-745 and -708 in
    float64) is a subnormal number. x86 cores take a slow path for every subnormal they
    produce or read: a float32 mean-shift block took ten times longer to exponentiate and to
    multiply on. A flush-to-zero mode would avoid them; NumPy has none, and a masked write of
    zeros is slower than the subnormals, so the arguments are raised to ``floor`` (in the pass
    that applies ``ceiling``), exponentiated, and ``exp(floor)`` is subtracted: what was below
    the floor is then exactly zero, as an underflow gives, and every result moves by at most
    ``exp(floor)`` (3.5 · 10⁻³⁵ in float32, 10⁻³⁰⁴ in float64) and the subtraction's
    rounding, which leaves those above ``4 exp(floor) / eps`` bit for bit as they were.

    Parameters
    ----------
    G : ndarray of float32 or float64
        The arguments; overwritten with the results.
    ceiling : float, optional
        Also lower the arguments to this, in the same pass: ``0.0`` for a kernel whose
        squared distances round-off can make negative.

    Returns
    -------
    ndarray
        ``G``.

    Examples
    --------
    >>> import numpy as np
    >>> exp_flushed(np.array([0.0, -1.0, -720.0]))
    array([1.        , 0.36787944, 0.        ])
    """
    kind = G.dtype.type
    floor = kind(np.log(np.finfo(G.dtype).tiny) + EXP_FLOOR_MARGIN)
    if ceiling is None:
        np.maximum(G, floor, out=G)
    else:
        np.clip(G, floor, kind(ceiling), out=G)
    np.exp(G, out=G)
    G -= np.exp(floor)
    return G


def flush_for(A: np.ndarray, dtype: np.dtype | type) -> np.ndarray:
    """Zero, in place, the entries of a non-negative float64 ``A`` that ``dtype`` would hold as
    subnormal numbers or as numbers a product can make subnormal: those below its smallest
    normal number × e^EXP_FLOOR_MARGIN (about 3.5 · 10⁻³⁵ for float32), as
    :func:`exp_flushed` leaves them. For results computed in float64 and stored in float32:
    a float32 posterior of 10⁻⁴⁰ is subnormal, and reading it costs x86 cores a slow path
    (a pass of PCK's posterior features over 2 · 10⁴ rows took 5.1 s instead of 0.37 s).

    Returns
    -------
    ndarray
        ``A``.
    """
    floor = float(np.finfo(dtype).tiny) * float(np.exp(EXP_FLOOR_MARGIN))
    if floor > np.finfo(A.dtype).tiny:
        np.copyto(A, 0.0, where=A < floor)
    return A
