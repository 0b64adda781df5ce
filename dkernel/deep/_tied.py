"""A stacked autoencoder with tied weights, in PyTorch ([Kampffmeyer2018], §4.1).

Encoder ``d → h_1 → … → h_L → N_c``: ``z = W_{L+1}(σ(… σ(W_1 x + b_1) …)) + b_{L+1}`` (the
code layer is linear); the decoder runs the same weights transposed, ``W_Dᵀ = W_E``, with
its own biases, hidden layers through σ and a linear output. Parameters are plain tensors in
a dict (no ``torch.nn.Module``), so a fitted estimator holds NumPy arrays and pickles without
PyTorch.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

ACTIVATIONS = ("relu", "sigmoid", "tanh")


def layer_sizes(n_features: int, hidden: Sequence[int], n_components: int) -> list[int]:
    """``[d, h_1, …, h_L, N_c]``."""
    return [int(n_features), *(int(h) for h in hidden), int(n_components)]


def init_weights(torch: Any, sizes: Sequence[int], generator: Any) -> dict[str, list[Any]]:
    """Glorot-uniform weights ([Kampffmeyer2018] §4.1, [Glorot2010]), zero biases.

    Returns
    -------
    dict
        ``weights[i]`` (sizes[i+1], sizes[i]); ``encoder_biases[i]`` (sizes[i+1],);
        ``decoder_biases[i]`` (sizes[i],): the bias of the decoder layer that outputs
        ``sizes[i]`` units.
    """
    weights, enc, dec = [], [], []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:], strict=True):
        bound = math.sqrt(6.0 / (fan_in + fan_out))
        W = (torch.rand(fan_out, fan_in, generator=generator) * 2 - 1) * bound
        weights.append(W)
        enc.append(torch.zeros(fan_out))
        dec.append(torch.zeros(fan_in))
    return {"weights": weights, "encoder_biases": enc, "decoder_biases": dec}


def _activation(torch: Any, name: str) -> Any:
    return {"relu": torch.relu, "sigmoid": torch.sigmoid, "tanh": torch.tanh}[name]


def encode(torch: Any, params: dict[str, list[Any]], X: Any, activation: str) -> Any:
    """The codes of the rows ``X`` (n, d) → (n, N_c)."""
    act = _activation(torch, activation)
    h = X
    last = len(params["weights"]) - 1
    for i, (W, b) in enumerate(zip(params["weights"], params["encoder_biases"], strict=True)):
        h = torch.nn.functional.linear(h, W, b)
        if i < last:
            h = act(h)
    return h


def decode(torch: Any, params: dict[str, list[Any]], Z: Any, activation: str) -> Any:
    """The reconstructions (n, d) of the codes ``Z`` (n, N_c), through the transposed weights."""
    act = _activation(torch, activation)
    h = Z
    for i in range(len(params["weights"]) - 1, -1, -1):
        h = h @ params["weights"][i] + params["decoder_biases"][i]
        if i > 0:
            h = act(h)
    return h


def to_numpy(params: dict[str, list[Any]]) -> dict[str, list[np.ndarray]]:
    """The parameters as float32 NumPy copies."""
    return {k: [t.detach().cpu().numpy().copy() for t in v] for k, v in params.items()}


def to_torch(torch: Any, params: dict[str, list[np.ndarray]], *, grad: bool) -> dict:
    """NumPy parameters as tensors (leaf tensors that need gradients when ``grad``)."""
    return {
        k: [torch.tensor(np.asarray(a), dtype=torch.float32).requires_grad_(grad) for a in v]
        for k, v in params.items()
    }


def flat(params: dict[str, list[Any]]) -> list[Any]:
    """Every tensor, in a fixed order (the optimizer's parameter list)."""
    return [*params["weights"], *params["encoder_biases"], *params["decoder_biases"]]
