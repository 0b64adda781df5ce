"""dkernel._cache.LRUCache: the latest values by key, each computed once while kept."""

from __future__ import annotations

import threading

from dkernel._cache import LRUCache


def test_a_kept_value_is_not_computed_again_and_the_least_recent_goes_first():
    cache: LRUCache[int] = LRUCache(2)
    calls: list[str] = []

    def compute(key: str, value: int):
        def run() -> int:
            calls.append(key)
            return value

        return run

    assert cache.get("a", compute("a", 1)) == 1
    assert cache.get("b", compute("b", 2)) == 2
    assert cache.get("a", compute("a", 10)) == 1  # kept: not computed again, now the latest
    assert cache.get("c", compute("c", 3)) == 3  # evicts b, the least recently asked
    assert len(cache) == 2
    assert cache.get("a", compute("a", 10)) == 1
    assert cache.get("b", compute("b", 20)) == 20
    assert calls == ["a", "b", "c", "b"]


def test_threads_share_the_entries():
    cache: LRUCache[int] = LRUCache(4)
    results: list[int] = []

    def ask() -> None:
        results.append(cache.get("k", lambda: 7))

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [7] * 8 and len(cache) == 1
