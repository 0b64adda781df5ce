"""The deep kernelized autoencoder's losses, in PyTorch ([Kampffmeyer2018], §3, Eqs. 2, 5-7).

Every function takes and returns ``torch`` tensors (the caller imports PyTorch); nothing here
touches NumPy, so autograd sees the whole loss.
"""

from __future__ import annotations

from typing import Any


def code_kernel(codes: Any) -> Any:
    """``C = Z Zᵀ``: the inner products of the codes ``Z`` (k, N_c), a linear kernel (k, k)."""
    return codes @ codes.T


def alignment_loss(C: Any, P: Any) -> Any:
    """The code loss ``L_c(C, P) = || C / ||C||_F - P / ||P||_F ||_F`` ([Kampffmeyer2018], Eq. 5).

    Equal to ``sqrt(2 - 2 A(C, P))`` with ``A`` the kernel alignment (Eq. 6); in [0, 2], 0 when
    ``C`` is a positive multiple of ``P``.

    Parameters
    ----------
    C, P : torch.Tensor (k, k)
        The codes' inner products and the prior kernel of the same k points.

    Returns
    -------
    torch.Tensor
        A scalar.
    """
    difference = C / C.norm() - P / P.norm()
    return difference.norm()


def reconstruction_loss(X: Any, X_rec: Any, observed: Any = None) -> Any:
    """``1 / (k d) Σ_i ||x_i - x̃_i||²``: the mean squared error over a batch (Eqs. 2 and 7);
    with ``observed`` (1 where an entry was observed, 0 where it was missing), the mean over
    the observed entries only."""
    if observed is None:
        return ((X - X_rec) ** 2).mean()
    return (((X - X_rec) ** 2) * observed).sum() / observed.sum().clamp(min=1.0)


def dkae_loss(
    X: Any, X_rec: Any, codes: Any, P: Any, weight: float, observed: Any = None
) -> tuple[Any, Any, Any]:
    """The mini-batch loss of Eq. 7: ``(1 - λ) L_r + λ L_c(Z Zᵀ, P_k)``.

    Parameters
    ----------
    X, X_rec : torch.Tensor (k, d)
        A mini-batch and its reconstruction.
    codes : torch.Tensor (k, N_c)
        Its codes.
    P : torch.Tensor (k, k) or None
        The prior kernel of the batch's points (rows and columns of the batch); None when
        ``weight`` is 0 (a plain autoencoder).
    weight : float
        λ in [0, 1].
    observed : torch.Tensor (k, d), optional
        1 where an entry of ``X`` was observed, 0 where it was missing (filled): the
        reconstruction is scored on the observed entries. None: all of them.

    Returns
    -------
    total, reconstruction, alignment : torch.Tensor
        Scalars; ``alignment`` is 0 without a prior.
    """
    reconstruction = reconstruction_loss(X, X_rec, observed)
    if P is None:
        alignment = reconstruction.new_zeros(())
    else:
        alignment = alignment_loss(code_kernel(codes), P)
    total = (1.0 - weight) * reconstruction + weight * alignment
    return total, reconstruction, alignment
