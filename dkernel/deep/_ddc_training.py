"""The networks of deep divergence-based clustering and their training loop ([Kampffmeyer2019]).

Section 3.3: images go through a LeNet-like CNN (two 5 × 5 convolutions of 32 and 64 filters,
each followed by 2 × 2 max pooling and ReLU, a fully connected layer of 100 units with batch
normalization, the softmax output); vectors through fully connected layers 200-200-500-C with
batch normalization in the 500-unit layer. The last hidden layer is the representation the
kernel of the loss is computed on. Weights are initialized as in He et al. (Section 4.6).

Mini-batches come from :func:`dkernel.deep._training.mini_batches` (a NumPy array, or a Dask
array chunk by chunk), their order drawn from ``(seed, restart, epoch)`` alone, so a resumed run
sees the batches an uninterrupted one would have seen.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from dkernel._random import derive_rng
from dkernel.deep._cs_divergence import ddc_loss
from dkernel.deep._torch import require_torch
from dkernel.deep._training import epoch_rng as shared_epoch_rng
from dkernel.deep._training import mini_batches, read_rows, row_blocks

#: Rows per forward pass when predicting (no gradient, eval mode: any size gives the same rows).
PREDICT_ROWS = 2048


@dataclass(frozen=True)
class Architecture:
    """What the network is built from: the per-sample input shape and the number of clusters."""

    input_shape: tuple[int, ...]
    n_clusters: int

    @property
    def is_image(self) -> bool:
        return len(self.input_shape) == 3


def build_network(arch: Architecture, generator: Any) -> Any:
    """The DDC network (:class:`~dkernel.deep._ddc_network.DDCNetwork`), He-initialized from
    ``generator``."""
    require_torch("DeepDivergenceClustering")
    from dkernel.deep._ddc_network import DDCNetwork

    return DDCNetwork(arch.input_shape, arch.n_clusters).he_init(generator)


def cnn_feature_size(height: int, width: int) -> int:
    """Spatial size after the CNN's two convolution + pooling stages (0: too small an image)."""
    for _ in range(2):  # 5 x 5 convolution (valid), then 2 x 2 max pooling
        height, width = (height - 4) // 2, (width - 4) // 2
        if height < 1 or width < 1:
            return 0
    return height * width


def epoch_rng(seed: int | None, run: int, epoch: int) -> np.random.Generator:
    """The shuffle of epoch ``epoch`` of restart ``run``."""
    return shared_epoch_rng(seed, f"ddc-restart-{run}", epoch)


def batches(
    X: Any, shape: tuple[int, ...], batch_size: int, rng: np.random.Generator
) -> Iterator[np.ndarray]:
    """One epoch of shuffled batches shaped for the network (a short tail joins the last)."""
    for _, rows in mini_batches(X, batch_size, rng, merge_tail=True):
        yield rows.reshape((-1, *shape))


def all_rows(X: Any, shape: tuple[int, ...]) -> Iterator[np.ndarray]:
    """Every row in order, one block (a Dask chunk, or all of a NumPy array) at a time."""
    for start, stop in row_blocks(X):
        yield read_rows(X, start, stop).reshape((-1, *shape))


def train_epoch(
    net: Any,
    optimizer: Any,
    X: Any,
    shape: tuple[int, ...],
    batch_size: int,
    rng: np.random.Generator,
    sigma_fraction: float,
) -> float:
    """One pass over the data; returns the mean batch loss."""
    torch = require_torch("DeepDivergenceClustering")
    net.train()
    total, count = 0.0, 0
    for batch in batches(X, shape, batch_size, rng):
        hidden, assignments = net(torch.from_numpy(batch))
        loss = ddc_loss(hidden, assignments, sigma_fraction).total
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += float(loss.detach())
        count += 1
    return total / max(count, 1)


def evaluate_loss(
    net: Any,
    X: Any,
    shape: tuple[int, ...],
    batch_size: int,
    seed: int | None,
    sigma_fraction: float,
) -> float:
    """The unsupervised loss of the trained network (eval mode) over the whole data, in the
    batches of one fixed shuffle: what the restarts are ranked by (Section 4.6)."""
    torch = require_torch("DeepDivergenceClustering")
    net.eval()
    total, count = 0.0, 0
    with torch.no_grad():
        for batch in batches(X, shape, batch_size, derive_rng(seed, "ddc-evaluate")):
            hidden, assignments = net(torch.from_numpy(batch))
            total += float(ddc_loss(hidden, assignments, sigma_fraction).total)
            count += 1
    return total / max(count, 1)


def predict_proba_array(net: Any, X: np.ndarray) -> np.ndarray:
    """Soft assignments of the rows of ``X`` (already shaped for the network), eval mode."""
    return _forward_array(net, X, 1, net.output[0].out_features)


def hidden_array(net: Any, X: np.ndarray) -> np.ndarray:
    """The last hidden layer (the loss's representation) of the rows of ``X``, eval mode."""
    return _forward_array(net, X, 0, net.output[0].in_features)


def _forward_array(net: Any, X: np.ndarray, part: int, width: int) -> np.ndarray:
    """Output ``part`` of ``net(X)`` (0 the hidden layer, 1 the assignments) as float64, in
    blocks of ``PREDICT_ROWS`` rows."""
    torch = require_torch("DeepDivergenceClustering")
    net.eval()
    out = []
    with torch.no_grad():
        for start in range(0, X.shape[0], PREDICT_ROWS):
            batch = torch.from_numpy(np.ascontiguousarray(X[start : start + PREDICT_ROWS]))
            out.append(net(batch)[part].numpy().astype(np.float64))
    if not out:
        return np.zeros((0, width))
    return np.concatenate(out)
