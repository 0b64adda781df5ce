"""The networks of deep divergence-based clustering and their training loop ([Kampffmeyer2019]).

Section 3.3: images go through a LeNet-like CNN (two 5 × 5 convolutions of 32 and 64 filters,
each followed by 2 × 2 max pooling and ReLU, a fully connected layer of 100 units with batch
normalization, the softmax output); vectors through fully connected layers 200-200-500-C with
batch normalization in the 500-unit layer. The last hidden layer is the representation the
kernel of the loss is computed on. Weights are initialized as in He et al. (Section 4.6).

Mini-batches come from a NumPy array or, chunk by chunk, from a Dask array (one chunk in
memory at a time): every epoch visits the chunks in a shuffled order and the rows of each
chunk in a shuffled order, the shuffles drawn from ``(seed, run, epoch)`` alone, so a resumed
run sees the batches an uninterrupted one would have seen.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from dkernel._random import derive_rng
from dkernel.deep._cs_divergence import ddc_loss
from dkernel.deep._torch import require_torch

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


def batch_plan(chunk_sizes: tuple[int, ...], batch_size: int, rng: np.random.Generator):
    """One epoch's batches as lists of ``(chunk, row indices in the chunk)``.

    Chunks in a random order, rows of each chunk in a random order, cut into batches of
    ``batch_size`` rows; a batch may span the end of one chunk and the start of the next, and
    the last, short remainder joins the last full batch (no batch of 1 for batch normalization
    and the kernel median).
    """
    pieces: list[tuple[int, np.ndarray]] = []
    for c in rng.permutation(len(chunk_sizes)):
        pieces.append((int(c), rng.permutation(chunk_sizes[c])))
    batches: list[list[tuple[int, np.ndarray]]] = []
    current: list[tuple[int, np.ndarray]] = []
    filled = 0
    for c, rows in pieces:
        start = 0
        while start < rows.size:
            take = min(batch_size - filled, rows.size - start)
            current.append((c, rows[start : start + take]))
            filled += take
            start += take
            if filled == batch_size:
                batches.append(current)
                current, filled = [], 0
    if current:
        if batches:
            batches[-1].extend(current)
        else:
            batches.append(current)
    return batches


class ChunkSource:
    """Rows of a NumPy or Dask array, one chunk along the first axis in memory at a time."""

    def __init__(self, X: Any, shape: tuple[int, ...]) -> None:
        self.X = X
        self.shape = shape  # the network's per-sample shape
        if hasattr(X, "chunks"):
            self.chunk_sizes = tuple(int(c) for c in X.chunks[0])
        else:
            self.chunk_sizes = (int(X.shape[0]),)
        self.offsets = np.concatenate([[0], np.cumsum(self.chunk_sizes)]).astype(int)
        self._cached: tuple[int, np.ndarray] | None = None

    def chunk(self, c: int) -> np.ndarray:
        if self._cached is not None and self._cached[0] == c:
            return self._cached[1]
        block = self.X[self.offsets[c] : self.offsets[c + 1]]
        if hasattr(block, "compute"):
            block = block.compute()
        block = np.asarray(block, dtype=np.float32).reshape((-1, *self.shape))
        self._cached = (c, block)
        return block

    def batches(self, batch_size: int, rng: np.random.Generator) -> Iterator[np.ndarray]:
        for plan in batch_plan(self.chunk_sizes, batch_size, rng):
            yield np.concatenate([self.chunk(c)[rows] for c, rows in plan])

    def ordered(self, rows: int) -> Iterator[np.ndarray]:
        """Every row in order, ``rows`` at a time (within chunks)."""
        for c in range(len(self.chunk_sizes)):
            block = self.chunk(c)
            for start in range(0, block.shape[0], rows):
                yield block[start : start + rows]


def epoch_rng(seed: int | None, run: int, epoch: int) -> np.random.Generator:
    return derive_rng(seed, "ddc-shuffle", run, epoch)


def train_epoch(
    net: Any,
    optimizer: Any,
    source: ChunkSource,
    batch_size: int,
    rng: np.random.Generator,
    sigma_fraction: float,
) -> float:
    """One pass over the data; returns the mean batch loss."""
    torch = require_torch("DeepDivergenceClustering")
    net.train()
    total, count = 0.0, 0
    for batch in source.batches(batch_size, rng):
        hidden, assignments = net(torch.from_numpy(batch))
        loss = ddc_loss(hidden, assignments, sigma_fraction).total
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += float(loss.detach())
        count += 1
    return total / max(count, 1)


def evaluate_loss(
    net: Any, source: ChunkSource, batch_size: int, seed: int | None, sigma_fraction: float
) -> float:
    """The unsupervised loss of the trained network (eval mode) over the whole data, in the
    batches of one fixed shuffle: what the restarts are ranked by (Section 4.6)."""
    torch = require_torch("DeepDivergenceClustering")
    net.eval()
    total, count = 0.0, 0
    with torch.no_grad():
        for batch in source.batches(batch_size, derive_rng(seed, "ddc-evaluate")):
            hidden, assignments = net(torch.from_numpy(batch))
            total += float(ddc_loss(hidden, assignments, sigma_fraction).total)
            count += 1
    return total / max(count, 1)


def predict_proba_array(net: Any, X: np.ndarray) -> np.ndarray:
    """Soft assignments of the rows of ``X`` (already shaped for the network), eval mode."""
    torch = require_torch("DeepDivergenceClustering")
    net.eval()
    out = []
    with torch.no_grad():
        for start in range(0, X.shape[0], PREDICT_ROWS):
            batch = torch.from_numpy(np.ascontiguousarray(X[start : start + PREDICT_ROWS]))
            out.append(net(batch)[1].numpy().astype(np.float64))
    if not out:
        return np.zeros((0, net.output[0].out_features))
    return np.concatenate(out)
