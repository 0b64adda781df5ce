"""Training plumbing of the deep models: mini-batches read chunk by chunk, checkpoints that
let a killed training resume, and the progress of the epochs.

Mini-batches come from a NumPy array or a Dask array (a Zarr store opened as one). An
epoch's order depends only on the seed and the epoch's number, so a run resumed from the
checkpoint of epoch ``e`` sees the same batches as one that never stopped.
"""

from __future__ import annotations

import io
import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from sklearn.utils._param_validation import HasMethods

from dkernel._random import derive_rng
from dkernel._validation import as_numpy, is_dask_array
from dkernel.errors import InvalidInputError
from dkernel.runtime.progress import LINE_INTERVAL, PartsProgress

logger = logging.getLogger(__name__)

#: Format version of the checkpoint files (a file of another version is refused).
CHECKPOINT_VERSION = 1


def epoch_rng(seed: int | None, what: str, epoch: int) -> np.random.Generator:
    """The generator of epoch ``epoch``'s order: a function of ``(seed, what, epoch)`` only."""
    return derive_rng(seed, what, "epoch", epoch)


def row_blocks(X: Any) -> list[tuple[int, int]]:
    """``(start, stop)`` of the row blocks read one at a time: Dask's chunks, or the whole
    NumPy array (in memory already)."""
    if is_dask_array(X):
        bounds = np.cumsum((0, *X.chunks[0]))
        return [(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:], strict=True) if b > a]
    return [(0, int(X.shape[0]))]


def read_rows(X: Any, start: int, stop: int, dtype: Any = np.float32) -> np.ndarray:
    """Rows ``start:stop`` of ``X`` in memory (one chunk of a Dask array computed)."""
    return np.ascontiguousarray(as_numpy(X[start:stop]), dtype=dtype)


def mini_batches(
    X: Any,
    batch_size: int,
    rng: np.random.Generator,
    dtype: Any = np.float32,
    *,
    merge_tail: bool = False,
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """One epoch of shuffled mini-batches ``(row indices, rows)``.

    The blocks of :func:`row_blocks` are visited in a random order, each read once and its
    rows shuffled; rows left over at the end of a block open the next batch. Only one block
    (and one batch's carry) is in memory at a time. For a NumPy array this is a shuffle of
    all rows (the paper's independently drawn batches, without replacement). The last batch
    of the epoch may be smaller; with ``merge_tail`` it joins the batch before it instead (no
    batch of one row for batch normalization or a batch's median distance).
    """
    batches = _shuffled_batches(X, batch_size, rng, dtype)
    if not merge_tail:
        yield from batches
        return
    previous = None
    for batch in batches:
        if previous is not None:
            if batch[0].size < batch_size:  # only the last batch can be short
                batch = (
                    np.concatenate([previous[0], batch[0]]),
                    np.concatenate([previous[1], batch[1]]),
                )
            else:
                yield previous
        previous = batch
    if previous is not None:
        yield previous


def _shuffled_batches(
    X: Any, batch_size: int, rng: np.random.Generator, dtype: Any
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    blocks = row_blocks(X)
    carry_idx = np.empty(0, dtype=np.int64)
    carry = None
    for b in rng.permutation(len(blocks)):
        start, stop = blocks[int(b)]
        rows = read_rows(X, start, stop, dtype)
        order = rng.permutation(stop - start)
        idx = order.astype(np.int64) + start
        rows = rows[order]
        if carry is not None and carry_idx.size:
            idx = np.concatenate([carry_idx, idx])
            rows = np.concatenate([carry, rows])
        full = (idx.size // batch_size) * batch_size
        for s in range(0, full, batch_size):
            yield idx[s : s + batch_size], rows[s : s + batch_size]
        carry_idx, carry = idx[full:], rows[full:]
    if carry_idx.size:
        yield carry_idx, carry


# -- checkpoints ------------------------------------------------------------------------------
class CheckpointTarget(Protocol):
    """Where a checkpoint lives when it is not a file: anything that can say whether it holds
    one, read it and replace it in one step (a job keeps its deep model's checkpoint in its
    results store, :class:`dkernel.storage.checkpoint.StoreCheckpoint`). ``pathlib.Path``
    has the same three methods, but a path is written through a temporary file instead."""

    def exists(self) -> bool: ...

    def read_bytes(self) -> bytes: ...

    def write_bytes(self, data: bytes) -> Any: ...


#: What a deep model's ``checkpoint`` parameter takes: a file, or a :class:`CheckpointTarget`.
Checkpoint = str | os.PathLike | CheckpointTarget

#: The ``checkpoint`` entry of the deep models' ``_parameter_constraints``.
CHECKPOINT_CONSTRAINT = [
    str,
    os.PathLike,
    HasMethods(["exists", "read_bytes", "write_bytes"]),
    None,
]


def _is_path(target: Any) -> bool:
    return isinstance(target, str | os.PathLike)


def save_checkpoint(torch: Any, target: Checkpoint, state: dict[str, Any]) -> None:
    """Write ``state`` to ``target``, replacing what it held in one step: a file through a
    temporary file renamed over it, so a kill during the write leaves the previous checkpoint
    intact; a :class:`CheckpointTarget` through its ``write_bytes``."""
    buffer = io.BytesIO()
    torch.save({"version": CHECKPOINT_VERSION, **state}, buffer)
    if not _is_path(target):
        target.write_bytes(buffer.getvalue())  # type: ignore[union-attr]
        return
    path = Path(target)  # type: ignore[arg-type]
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".partial")
    tmp.write_bytes(buffer.getvalue())
    os.replace(tmp, path)


def load_checkpoint(torch: Any, target: Checkpoint, owner: str) -> dict[str, Any] | None:
    """The state saved in ``target`` (a file or a :class:`CheckpointTarget`), or None when it
    holds none."""
    where: Any = Path(target) if _is_path(target) else target  # type: ignore[arg-type]
    if not where.exists():
        return None
    try:
        state = torch.load(io.BytesIO(where.read_bytes()), map_location="cpu", weights_only=True)
    except Exception as exc:  # a truncated or foreign file: say which, and how to start over
        raise InvalidInputError(
            f"{owner} cannot read the checkpoint {where} ({type(exc).__name__}: {exc}); delete "
            "it to train from the start, or pass another checkpoint path."
        ) from None
    if not isinstance(state, dict) or state.get("version") != CHECKPOINT_VERSION:
        raise InvalidInputError(
            f"{owner}: {where} is not a checkpoint of this dkernel version; delete it to train "
            "from the start, or pass another checkpoint path."
        )
    return state


def check_fingerprint(
    saved: dict[str, Any], current: dict[str, Any], path: Any, owner: str
) -> None:
    """Refuse to resume from a checkpoint of another model or other data."""
    differ = sorted(k for k in set(saved) | set(current) if saved.get(k) != current.get(k))
    if differ:
        listed = ", ".join(f"{k}: {saved.get(k)!r} there, {current.get(k)!r} now" for k in differ)
        raise InvalidInputError(
            f"{owner}: the checkpoint {path} belongs to another training ({listed}). Fit with "
            "the same parameters and data to resume, or delete it (or pass another "
            "checkpoint path) to train from the start."
        )


# -- progress ---------------------------------------------------------------------------------
class EpochProgress(PartsProgress):
    """Epochs done, for people: a bar with the last loss on a terminal or in Jupyter, a plain
    line per epoch (at most every ``LINE_INTERVAL`` seconds, and the last) in a log; nothing
    unless ``show``. Every epoch is also logged at DEBUG level."""

    def epoch_done(self, loss: float) -> None:
        self.done += 1
        logger.debug("%s: epoch %d/%d, loss %.6g", self.what, self.done, self.total, loss)
        if self.bar is not None:
            self.bar.what = f"{self.what} (loss {loss:.4g})"
            self.bar.update(self.done)
        elif self.show:
            now = time.monotonic()
            if now - self.last >= LINE_INTERVAL or self.done == self.total:
                self.last = now
                print(
                    f"[dkernel] {self.what}: epoch {self.done}/{self.total}, loss {loss:.4g}, "
                    f"{now - self.start:.0f} s elapsed",
                    file=self.stream,
                    flush=True,
                )

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def network_of_results(tree: Any, job: str) -> Any:
    """The ``/network`` group of a ``job`` job's results tree (what :func:`dkernel.open_results`
    returns) as an xarray Dataset: the weights its ``from_results`` rebuilds a model from.

    Raises
    ------
    InvalidInputError
        Not a results tree, or one without ``/network`` (not that job's, or an older one).
    """
    if not hasattr(tree, "children"):
        raise InvalidInputError(
            f"from_results takes the results tree of a {job} job, as "
            f"dkernel.open_results(store) returns it; got {type(tree).__name__}."
        )
    if "network" not in tree.children:
        raise InvalidInputError(
            f"the results store has no /network group: it was not written by a {job} job "
            "(or by one older than the weights in the store); rerun the job."
        )
    return tree["network"].to_dataset()
