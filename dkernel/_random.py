"""Deterministic seeding: every random choice derives from one job seed.

Task-level generators are derived from ``(seed, *key)`` so a retried task reproduces its
result bit for bit, whatever worker runs it.
"""

from __future__ import annotations

import hashlib
import numbers

import numpy as np


def _key_words(key: tuple) -> list[int]:
    words: list[int] = []
    for part in key:
        if isinstance(part, numbers.Integral):
            words.append(int(part) & 0xFFFFFFFF)
        else:
            digest = hashlib.sha256(str(part).encode()).digest()[:4]
            words.append(int.from_bytes(digest, "little"))
    return words


def derive_rng(seed: int | None, *key: object) -> np.random.Generator:
    """Return a generator that depends only on ``seed`` and ``key``.

    Parameters
    ----------
    seed : int or None
        The job seed. ``None`` gives fresh entropy (non-reproducible).
    *key : int or str
        Identifies the task, e.g. ``("gmm", q, g)``.
    """
    if seed is None:
        return np.random.default_rng()
    return np.random.default_rng(np.random.SeedSequence([int(seed) & 0xFFFFFFFF, *_key_words(key)]))


def derive_seed(seed: int | None, *key: object) -> int:
    """An integer seed for libraries that take ``random_state=int`` (scikit-learn)."""
    return int(derive_rng(seed, *key).integers(0, 2**31 - 1))


def seed_from_random_state(random_state: int | np.random.Generator | None) -> int | None:
    """Turn an estimator's ``random_state`` into the integer job seed used for derivation."""
    if random_state is None or isinstance(random_state, numbers.Integral):
        return None if random_state is None else int(random_state)
    if isinstance(random_state, np.random.Generator):
        return int(random_state.integers(0, 2**31 - 1))
    if isinstance(random_state, np.random.RandomState):
        return int(random_state.randint(0, 2**31 - 1))
    raise TypeError(f"random_state must be None, an int or a numpy Generator; got {random_state!r}")


def systematic_rows(n: int, m: int) -> np.ndarray:
    """``min(m, n)`` evenly spaced row indices of ``n`` rows, ascending (a systematic sample):
    a sample that is a function of the data alone, for steps that must not depend on a seed."""
    return np.unique(np.linspace(0, n - 1, min(int(m), int(n))).round().astype(np.int64))
