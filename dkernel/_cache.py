"""A bounded, thread-safe cache of computed values: the latest ``size`` by key."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

Value = TypeVar("Value")


class LRUCache(Generic[Value]):
    """The ``size`` values most recently asked for, by key.

    Shared by the threads of a Dask worker: one lock guards the entries, and a value is
    computed outside it (two threads missing the same key both compute it; the results are
    equal and the later one is kept).
    """

    def __init__(self, size: int) -> None:
        self.size = int(size)
        self._entries: OrderedDict[Hashable, Value] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable, compute: Callable[[], Value]) -> Value:
        """The value of ``key``, from ``compute()`` when it is not kept."""
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                return self._entries[key]
        value = compute()
        with self._lock:
            self._entries[key] = value
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)
        return value

    def __len__(self) -> int:
        return len(self._entries)
