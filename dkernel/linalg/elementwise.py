"""Element-wise passes over kernel blocks (NumPy only)."""

from __future__ import annotations

import numpy as np

__all__ = ["EXP_FLOOR_MARGIN", "exp_floored"]

#: How far above the log of the dtype's smallest normal number :func:`exp_floored` keeps its
#: arguments: its smallest result is e⁸ ≈ 3000 times that number, so products of it with
#: values down to e⁻⁸ ≈ 3 · 10⁻⁴ (a GEMM on the block) stay normal too.
EXP_FLOOR_MARGIN = 8.0


def exp_floored(G: np.ndarray) -> np.ndarray:
    """``exp`` of a float array in place, its arguments first raised to
    ``log(tiny) + EXP_FLOOR_MARGIN`` (about -79.3 in float32, -700.4 in float64).

    Kernel blocks exponentiate arguments down to thousands below zero (points many widths
    apart), and ``exp`` of anything between about -104 and -87.3 in float32 (-745 and -708 in
    float64) is a subnormal number. x86 cores take a slow path for every subnormal they
    produce or read: a float32 mean-shift block took ten times longer to exponentiate and to
    multiply on. Raising the arguments costs one pass; the results it changes move from
    below the floor's ``exp`` (3.3 · 10⁻³⁵ in float32, 10⁻³⁰⁴ in float64) to it, far below
    the resolution of any sum of kernel values that holds a value near 1. (Setting those
    results to exactly zero takes a masked write, slower than the subnormals it avoids.)

    Parameters
    ----------
    G : ndarray of float32 or float64
        The arguments; overwritten with the results.

    Returns
    -------
    ndarray
        ``G``.

    Examples
    --------
    >>> import numpy as np
    >>> exp_floored(np.array([0.0, -1.0, -720.0])) > 0
    array([ True,  True,  True])
    """
    floor = np.log(np.finfo(G.dtype).tiny) + EXP_FLOOR_MARGIN
    np.maximum(G, G.dtype.type(floor), out=G)
    return np.exp(G, out=G)
