"""The results store: one Zarr v3 store per job, one group per stage, written via xarray.

Layout (DESIGN.md §5): root attributes hold the provenance (``job`` spec, ``versions``,
``git_revision``, ``seed``, ``timings``, ``status``); groups such as ``/input``, ``/kernel``,
``/embedding``, ``/labels``, ``/metrics``, ``/gmm``, ``/features``, ``/ranking``, ``/mssc``
hold the arrays. ``status`` goes ``running`` → ``complete`` (written last, only after every
array is written) or ``failed`` (with the error). This is the only module that touches Zarr.
"""

from __future__ import annotations

import datetime as _dt
import json
import platform
import shutil
import subprocess
import traceback
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import xarray as xr
import zarr

from dkernel.errors import StoreError, StoreNotFoundError, StoreStatusWarning

STORE_FORMAT = "dkernel-results/1"
STATUSES = ("running", "complete", "failed")


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def package_versions() -> dict[str, str]:
    """Versions of the packages that determine results."""
    import importlib.metadata as md

    names = ["dkernel", "numpy", "scipy", "scikit-learn", "dask", "distributed", "zarr", "xarray"]
    out = {"python": platform.python_version()}
    for name in names:
        try:
            out[name] = md.version(name)
        except md.PackageNotFoundError:
            continue
    return out


def git_revision() -> str | None:
    """The git revision of the dkernel checkout, when it is one."""
    root = Path(__file__).resolve().parents[2]
    if not (root / ".git").exists():
        return None
    try:
        out = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def _jsonable(value: Any) -> Any:
    """Round-trip through JSON so attributes never hold NumPy scalars or paths."""
    return json.loads(json.dumps(value, default=_json_default))


def _json_default(obj: Any) -> Any:
    if hasattr(obj, "item"):
        return obj.item()
    if hasattr(obj, "tolist"):
        return obj.tolist()
    return str(obj)


class ResultsStore:
    """Writer for one job's results store.

    Use :meth:`create` to start a job's store, then :meth:`write` per stage, and finally
    :meth:`mark_complete` or :meth:`mark_failed`.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    # -- lifecycle -----------------------------------------------------------------------
    @classmethod
    def create(
        cls,
        path: str | Path,
        *,
        job: Mapping[str, Any],
        seed: int | None,
        overwrite: bool = False,
    ) -> ResultsStore:
        """Create a fresh store with ``status: running``.

        Raises
        ------
        StoreError
            When ``path`` holds a complete store and ``overwrite`` is False, or holds something
            that is not a dkernel store.
        """
        path = Path(path)
        if path.exists():
            status = _existing_status(path)
            if status == "complete" and not overwrite:
                raise StoreError(
                    f"{path} already holds a complete results store; pass --overwrite to replace "
                    "it or choose another --output."
                )
            if status is None and any(path.iterdir()) and not overwrite:
                raise StoreError(
                    f"{path} exists and is not a dkernel results store; refusing to replace it. "
                    "Choose another output path or remove it."
                )
            shutil.rmtree(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        group = zarr.open_group(str(path), mode="w", zarr_format=3)
        group.attrs.update(
            _jsonable(
                {
                    "format": STORE_FORMAT,
                    "status": "running",
                    "created": _now(),
                    "job": dict(job),
                    "seed": seed,
                    "versions": package_versions(),
                    "git_revision": git_revision(),
                    "timings": {},
                    "groups": [],
                }
            )
        )
        return cls(path)

    def _root(self, mode: str = "r+") -> zarr.Group:
        return zarr.open_group(str(self.path), mode=mode, zarr_format=3)

    @property
    def attrs(self) -> dict[str, Any]:
        return dict(self._root("r").attrs)

    def update_attrs(self, **attrs: Any) -> None:
        """Merge JSON-serialisable attributes into the root."""
        self._root().attrs.update(_jsonable(attrs))

    def record_timing(self, phase: str, seconds: float) -> None:
        """Add one phase's wall time (seconds) to ``timings``."""
        root = self._root()
        timings = dict(root.attrs.get("timings", {}))
        timings[phase] = round(float(seconds), 4)
        root.attrs["timings"] = timings

    def mark_complete(self) -> None:
        """Set ``status: complete``; call only after every array has been written."""
        root = self._root()
        missing = [g for g in root.attrs.get("groups", []) if g not in root]
        if missing:
            raise StoreError(f"cannot mark {self.path} complete: groups {missing} are missing.")
        root.attrs.update({"status": "complete", "finished": _now()})

    def mark_failed(self, error: BaseException) -> None:
        """Set ``status: failed`` with the error and its traceback."""
        tb = "".join(traceback.format_exception(type(error), error, error.__traceback__))
        self._root().attrs.update(
            {
                "status": "failed",
                "finished": _now(),
                "error": f"{type(error).__name__}: {error}",
                "traceback": tb[-8000:],
            }
        )

    # -- writing -------------------------------------------------------------------------
    def write(self, group: str, dataset: xr.Dataset, *, compute: bool = True) -> Any:
        """Write one stage's dataset to ``/group`` (replacing it).

        Dask-backed variables are written chunk by chunk by whatever scheduler is active
        (the job's distributed client). With ``compute=False`` the delayed write is returned
        so the caller can show progress while it runs.
        """
        if not group or "/" in group.strip("/") or group.startswith("."):
            raise StoreError(f"invalid group name {group!r}: use a single word such as 'kernel'.")
        self._register_group(group)
        dataset = dataset.copy()
        dataset.attrs = _jsonable(dict(dataset.attrs))
        return dataset.to_zarr(
            str(self.path),
            group=group,
            mode="w",
            zarr_format=3,
            consolidated=False,
            compute=compute,
        )

    def read_array(self, group: str, name: str) -> Any:
        """A stored array as a lazy Dask array (computed by whatever scheduler is active)."""
        ds = xr.open_zarr(str(self.path), group=group, consolidated=False, zarr_format=3)
        if name not in ds:
            raise StoreError(f"{self.path}: group {group!r} has no array {name!r}.")
        return ds[name].data

    def _register_group(self, group: str) -> None:
        root = self._root()
        groups = list(root.attrs.get("groups", []))
        if group not in groups:
            groups.append(group)
            root.attrs["groups"] = groups


def _existing_status(path: Path) -> str | None:
    try:
        group = zarr.open_group(str(path), mode="r")
    except Exception:
        return None
    if group.attrs.get("format") != STORE_FORMAT:
        return None
    return group.attrs.get("status")


def open_results(path: str | Path, *, warn: bool = True) -> xr.DataTree:
    """Open a results store lazily (no cluster needed) as an :class:`xarray.DataTree`.

    Arrays are Dask-backed and read only when used.

    Parameters
    ----------
    path : str or Path
        The store written by ``dkernel run``.
    warn : bool
        Emit :class:`~dkernel.errors.StoreStatusWarning` when the store is not complete.

    Raises
    ------
    StoreNotFoundError
        When nothing exists at ``path``.
    StoreError
        When ``path`` is not a dkernel results store (corrupt or foreign).

    Examples
    --------
    >>> tree = open_results("results/wine-rbf-kpca.zarr")  # doctest: +SKIP
    >>> tree["embedding"]["embedding"]  # doctest: +SKIP
    """
    path = Path(path)
    if not path.exists():
        raise StoreNotFoundError(f"no results store at {path}.")
    try:
        group = zarr.open_group(str(path), mode="r")
        fmt = group.attrs.get("format")
    except Exception as exc:
        raise StoreError(f"{path} is not a readable Zarr store: {exc}") from exc
    if fmt != STORE_FORMAT:
        raise StoreError(
            f"{path} is a Zarr store but not a dkernel results store (format {fmt!r}, "
            f"expected {STORE_FORMAT!r})."
        )
    status = group.attrs.get("status")
    if warn and status != "complete":
        msg = f"results store {path} has status {status!r}"
        if status == "failed":
            msg += f": {group.attrs.get('error')}"
        warnings.warn(msg + "; its arrays may be incomplete.", StoreStatusWarning, stacklevel=2)
    try:
        return xr.open_datatree(str(path), engine="zarr", chunks={}, consolidated=False)
    except Exception as exc:
        raise StoreError(f"{path} could not be opened as a results store: {exc}") from exc


def describe_store(path: str | Path) -> dict[str, Any]:
    """Summary used by ``dkernel show``: status, provenance, timings and each array's shape."""
    tree = open_results(path, warn=False)
    attrs = dict(tree.attrs)
    arrays = []
    for node in tree.subtree:
        for name, var in node.data_vars.items():
            chunks = var.chunks
            arrays.append(
                {
                    "group": node.path,
                    "name": name,
                    "dims": list(var.dims),
                    "shape": list(var.shape),
                    "dtype": str(var.dtype),
                    "chunks": [max(c) for c in chunks] if chunks else None,
                }
            )
    return {"path": str(path), "attrs": attrs, "arrays": arrays}
