"""The stored derivations the job steps and readers read (``dkernel.schema.cache``): derive
them again from the estimators, compare, rewrite.

Run after changing an estimator's parameters (a default, a range, a docstring line) or a
constant a step reads::

    python -m dkernel.jobs.derived           # exit status 1 and what differs, if anything
    python -m dkernel.jobs.derived --write   # rewrite dkernel/schema/derived.json

``tests/test_cli_imports.py`` runs the comparison, so a stale file fails the suite.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from dkernel.io.registry import READERS
from dkernel.jobs.registry import METHODS
from dkernel.schema import cache
from dkernel.schema.estimator import derive_requested


def derive() -> dict[str, dict[str, Any]]:
    """What ``derived.json`` must hold: every value the job steps and readers ask of the
    cache, derived from its module (this imports the estimators, scikit-learn and Dask)."""
    READERS.load()
    for method in METHODS.values():
        for schema in method.estimators:  # also those only built, never shown (KECA's)
            schema.names()
    return derive_requested()


def differences(derived: dict[str, dict[str, Any]], stored: dict[str, dict[str, Any]]) -> list[str]:
    """One line per path that is missing from, stale in or superfluous in ``stored``."""
    lines = []
    for section in cache.SECTIONS:
        new, old = derived.get(section, {}), stored.get(section, {})
        for path in sorted(set(new) | set(old)):
            if path not in old:
                lines.append(f"{section}: {path} is not stored")
            elif path not in new:
                lines.append(f"{section}: {path} is stored but no step asks for it")
            elif new[path] != old[path]:
                lines.append(f"{section}: {path} changed")
    return lines


def main(argv: list[str] | None = None) -> int:
    """``python -m dkernel.jobs.derived [--write]``; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m dkernel.jobs.derived", description=__doc__)
    parser.add_argument("--write", action="store_true", help="rewrite the stored file")
    args = parser.parse_args(argv)
    derived = derive()
    if args.write:
        print(f"wrote {cache.write(derived)}")
        return 0
    lines = differences(derived, cache.stored())
    for line in lines:
        print(line)
    if lines:
        print(f"{cache.CACHE_FILE} is stale: run python -m dkernel.jobs.derived --write")
    return 1 if lines else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
