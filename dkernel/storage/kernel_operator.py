"""A kernel matrix stored in Zarr, used as a linear operator block by block.

:class:`ZarrKernelOperator` computes ``K @ V`` by streaming row blocks of the stored kernel
(the ``/kernel`` group of a results store, or any 2-D Zarr array), never loading it whole.
The next row block is read on a background thread while the current one is multiplied, so a
pass costs about max(read, GEMM). Feed :meth:`ZarrKernelOperator.matmat` to
:func:`dkernel.linalg.matfree.matrix_free_eigh`.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import zarr

from dkernel.errors import InvalidInputError, StoreError


class ZarrKernelOperator:
    """``V -> K V`` for a square kernel ``K`` held in a Zarr array.

    Parameters
    ----------
    array : zarr.Array
        Square 2-D array (float32 or float64).
    row_block : int, optional
        Rows read per step; default the array's chunk height.
    col_block : int, optional
        Columns multiplied at a time (the block is converted to float64 in pieces of this
        width, bounding the temporary); default the chunk width.

    Attributes
    ----------
    n_passes : int
        Number of full passes made (one per ``matmat``).
    bytes_read : int
        Bytes of (uncompressed) kernel read so far.

    Notes
    -----
    Memory: two row blocks of the stored dtype (current + prefetched) plus a
    ``row_block × col_block`` float64 temporary and the (n, b) in/out vectors. Accumulation
    is in float64 whatever the stored dtype. Time per pass: reading n² values plus 2 n² b
    flops.
    """

    def __init__(
        self, array: Any, *, row_block: int | None = None, col_block: int | None = None
    ) -> None:
        if array.ndim != 2 or array.shape[0] != array.shape[1]:
            raise InvalidInputError(
                f"ZarrKernelOperator needs a square 2-D kernel array; got shape {array.shape}."
            )
        self.array = array
        chunks = getattr(array, "chunks", array.shape)
        self.row_block = int(row_block or chunks[0])
        self.col_block = int(col_block or chunks[1])
        self.n_passes = 0
        self.bytes_read = 0

    @classmethod
    def from_store(
        cls,
        path: str | Path,
        *,
        group: str = "kernel",
        name: str | None = None,
        **kwargs: Any,
    ) -> ZarrKernelOperator:
        """Open the kernel of a results store (``/kernel``) read-only.

        Parameters
        ----------
        path : str or Path
            Results store (or any Zarr store).
        group : str
            Group holding the kernel ('' for the root).
        name : str, optional
            Array name in the group; by default the only 2-D square array there.
        """
        try:
            root = zarr.open_group(str(path), mode="r")
            grp = root[group] if group else root
        except Exception as exc:
            raise StoreError(f"cannot open group {group!r} of the store {path}: {exc}") from exc
        if name is None:
            candidates = [
                k
                for k, a in grp.arrays()
                if a.ndim == 2 and a.shape[0] == a.shape[1] and a.shape[0] > 1
            ]
            if len(candidates) != 1:
                raise StoreError(
                    f"group {group!r} of {path} holds {len(candidates)} square 2-D arrays "
                    f"({candidates}); pass name=... to choose one."
                )
            name = candidates[0]
        if name not in grp:
            raise StoreError(f"no array {name!r} in group {group!r} of {path}.")
        return cls(grp[name], **kwargs)

    @property
    def shape(self) -> tuple[int, int]:
        return tuple(int(s) for s in self.array.shape)  # type: ignore[return-value]

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(np.float64)

    def _read(self, r0: int, r1: int) -> np.ndarray:
        block = np.asarray(self.array[r0:r1, :])
        self.bytes_read += block.nbytes
        return block

    def matmat(self, V: np.ndarray) -> np.ndarray:
        """``K @ V`` for V of shape (n, b) (or (n,)), streaming the kernel once."""
        V = np.asarray(V, dtype=np.float64)
        one = V.ndim == 1
        V2 = V[:, None] if one else V
        n = self.shape[0]
        if V2.shape[0] != n:
            raise InvalidInputError(f"V must have {n} rows; got shape {V.shape}.")
        out = np.zeros((n, V2.shape[1]), dtype=np.float64)
        starts = list(range(0, n, self.row_block))
        with ThreadPoolExecutor(max_workers=1) as pool:
            nxt = pool.submit(self._read, starts[0], min(n, starts[0] + self.row_block))
            for i, r0 in enumerate(starts):
                block = nxt.result()
                if i + 1 < len(starts):
                    r1n = min(n, starts[i + 1] + self.row_block)
                    nxt = pool.submit(self._read, starts[i + 1], r1n)
                r1 = r0 + block.shape[0]
                for c0 in range(0, n, self.col_block):
                    c1 = min(n, c0 + self.col_block)
                    out[r0:r1] += block[:, c0:c1].astype(np.float64) @ V2[c0:c1]
                del block
        self.n_passes += 1
        return out[:, 0] if one else out

    __matmul__ = matmat

    def diagonal(self) -> np.ndarray:
        """The diagonal, read chunk by chunk."""
        n = self.shape[0]
        out = np.empty(n)
        for r0 in range(0, n, self.row_block):
            r1 = min(n, r0 + self.row_block)
            out[r0:r1] = np.diagonal(np.asarray(self.array[r0:r1, r0:r1]))
        return out
