"""The loss of deep divergence-based clustering ([Kampffmeyer2019], eq. 4), on PyTorch tensors.

Three terms, each computed on one mini-batch of ``n`` rows with soft assignments
``A`` (n × k, the softmax output) and hidden representation ``H`` (n × h, the last hidden layer):

* ``d_hid,α`` — the Cauchy–Schwarz divergence argument of eq. 3: the cosine, in the RKHS of a
  Gaussian kernel on ``H``, between the kernel means of every pair of clusters,
  ``α_iᵀ K α_j / sqrt(α_iᵀ K α_i · α_jᵀ K α_j)``. Small when clusters are far apart
  (numerator) and compact (denominator).
* ``triu(A Aᵀ)`` — the inner products of the assignment vectors of distinct rows: zero only
  when rows in different clusters have orthogonal assignments (counters collapse into one
  cluster; favours balanced clusters).
* ``d_hid,m`` — eq. 3 again with ``m_{q,i} = exp(-||α_q - e_i||²)`` in place of ``α``: pulls
  the assignments to the corners ``e_i`` of the simplex.

Normalization. Eq. 4 writes the divergence terms as ``1/k Σ_{i<j}`` and ``triu`` as a plain
sum. The terms here are means instead — over the ``k(k-1)/2`` cluster pairs and over the
``n(n-1)/2`` row pairs — as in the authors' group's PyTorch code, so the three terms lie in
[0, 1] for any ``k`` and batch size and "equally weighted" means the same thing for all
of them; the tests check each term against a literal NumPy transcription of the equation
times that constant factor (``2 / (k - 1)`` and ``2 / (n (n - 1))``).

The kernel width: σ = ``sigma_fraction`` × the median pairwise Euclidean distance of ``H`` in
the batch, recomputed every batch and held constant for the gradient. Section 4.6's text says
15 %; the default is √0.15, the authors' group's code (``dkernel.kernels.widths``).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from dkernel.kernels.widths import DDC_SIGMA_FRACTION

#: Floor on the kernel sums before the division and square root (all-zero columns of ``A`` in a
#: batch would give 0/0): far below any value a batch of ≥ 2 rows reaches otherwise.
EPSILON = 1e-9


class DDCLoss(NamedTuple):
    """The loss of one batch and its three terms (0-d tensors)."""

    total: Any
    divergence: Any
    orthogonality: Any
    simplex: Any


def pairwise_sq_distances(H: Any) -> Any:
    """Squared Euclidean distances between the rows of ``H`` (n × n, clipped at 0)."""
    sq = (H * H).sum(dim=1)
    D2 = sq[:, None] + sq[None, :] - 2.0 * (H @ H.T)
    return D2.clamp_min(0.0)


def bandwidth(D2: Any, sigma_fraction: float = DDC_SIGMA_FRACTION) -> Any:
    """σ = ``sigma_fraction`` × the median of the off-diagonal pairwise distances, detached
    (the mean of the two middle values for an even count, as NumPy's median).

    The median of the upper triangle (each pair once, no zero self-distances). Detached: the
    width is a rule of thumb re-estimated per batch, not a quantity the network optimizes.
    """
    import torch

    n = D2.shape[0]
    rows, cols = torch.triu_indices(n, n, offset=1, device=D2.device)
    distances = D2.detach()[rows, cols].sqrt()
    return (sigma_fraction * distances.quantile(0.5)).clamp_min(EPSILON)


def gaussian_kernel(H: Any, sigma_fraction: float = DDC_SIGMA_FRACTION, sigma: Any = None) -> Any:
    """``K_hid``: ``exp(-||h_q - h_l||² / (2σ²))``, σ from :func:`bandwidth` unless given."""
    D2 = pairwise_sq_distances(H)
    if sigma is None:
        sigma = bandwidth(D2, sigma_fraction)
    return (-D2 / (2.0 * sigma * sigma)).exp()


def cs_divergence_term(A: Any, K: Any) -> Any:
    """Mean over cluster pairs ``i < j`` of ``α_iᵀ K α_j / sqrt(α_iᵀ K α_i · α_jᵀ K α_j)``.

    Eq. 3's ``d_α`` times ``2 / (k - 1)``: 0 for clusters with no kernel mass between them,
    1 when every cluster has the same kernel mean.
    """
    import torch

    k = A.shape[1]
    if k < 2:
        return A.new_zeros(())
    M = A.T @ K @ A  # k × k: α_iᵀ K α_j
    diag = M.diagonal().clamp_min(EPSILON)
    cos = M.clamp_min(EPSILON) / torch.sqrt(diag[:, None] * diag[None, :])
    rows, cols = torch.triu_indices(k, k, offset=1, device=A.device)
    return cos[rows, cols].mean()


def orthogonality_term(A: Any) -> Any:
    """Mean over row pairs ``q < l`` of ``α_qᵀ α_l``: ``triu(A Aᵀ)`` times ``2 / (n (n-1))``."""
    n = A.shape[0]
    G = A @ A.T
    off_diagonal = G.sum() - G.diagonal().sum()
    return off_diagonal / (n * (n - 1))


def simplex_corner_similarity(A: Any) -> Any:
    """``m_{q,i} = exp(-||α_q - e_i||²)`` (n × k): 1 only when row q sits on corner ``e_i``."""
    # ||α_q - e_i||² = ||α_q||² - 2 α_{q,i} + 1
    sq = (A * A).sum(dim=1, keepdim=True)
    return (-(sq - 2.0 * A + 1.0)).exp()


def ddc_loss(
    H: Any, A: Any, sigma_fraction: float = DDC_SIGMA_FRACTION, sigma: float | None = None
) -> DDCLoss:
    """Eq. 4 on one batch: ``d_hid,α + triu(A Aᵀ) + d_hid,m`` (each term a mean, see above).

    Parameters
    ----------
    H : tensor of shape (n, h)
        The hidden representation (the last hidden layer), n ≥ 2.
    A : tensor of shape (n, k)
        The soft assignments (rows on the simplex).
    sigma_fraction : float
        σ of the Gaussian kernel on ``H`` as a fraction of the batch's median distance.
    sigma : float, optional
        A fixed σ instead (the gradient tests use it: the rule's σ is held constant).
    """
    K = gaussian_kernel(H, sigma_fraction, sigma)
    divergence = cs_divergence_term(A, K)
    orthogonality = orthogonality_term(A)
    simplex = cs_divergence_term(simplex_corner_similarity(A), K)
    return DDCLoss(divergence + orthogonality + simplex, divergence, orthogonality, simplex)
