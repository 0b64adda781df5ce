"""What a results store records of the run that wrote it: package versions, the git
revision, JSON-safe attributes, and failures as one line with install paths shortened."""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import platform
import subprocess
from pathlib import Path
from typing import Any


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


def one_line(text: str, limit: int = 500) -> str:
    """``text`` on one line (runs of white space as one space), cut to ``limit`` characters."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def failure_cause(error: BaseException) -> str:
    """``Type: message`` of ``error``, on one line (a store's ``error`` attribute)."""
    message = one_line(str(error))
    return f"{type(error).__name__}: {message}" if message else type(error).__name__


def relative_paths(text: str) -> str:
    """``text`` (a traceback) with install and home paths shortened: the dkernel checkout,
    the Python installation and site-packages, the working directory and the home
    directory become relative (``dkernel/…``, ``<python>/…``, ``./…``, ``~/…``)."""
    import site
    import sys
    import sysconfig

    prefixes: list[tuple[str, str]] = []
    package_parent = str(Path(__file__).resolve().parents[2])
    prefixes.append((package_parent + os.sep, ""))
    for key in ("purelib", "platlib", "stdlib", "platstdlib"):
        with contextlib.suppress(KeyError):
            prefixes.append((sysconfig.get_paths()[key] + os.sep, "<python>/"))
    with contextlib.suppress(AttributeError):
        for sp in site.getsitepackages():
            prefixes.append((sp + os.sep, "<python>/"))
    for pre in {sys.prefix, sys.base_prefix, sys.exec_prefix}:
        prefixes.append((pre + os.sep, "<python>/"))
    with contextlib.suppress(OSError):
        prefixes.append((os.getcwd() + os.sep, "./"))
    prefixes.append((os.path.expanduser("~") + os.sep, "~/"))
    # longest first, so site-packages wins over the prefix that contains it
    for pre, repl in sorted(set(prefixes), key=lambda p: -len(p[0])):
        if len(pre) > 1:
            text = text.replace(pre, repl)
    return text
