"""The services' per-process caches: one bounded, thread-safe LRU (``cachetools.LRUCache``).

Request handlers read these from the threadpool (and some from the event loop), so every
operation takes the cache's lock. What a cache holds must be safe to share: immutable values
(read-only numpy arrays, frozen dataclasses, bytes) keyed by what makes them valid (a version
id, a results stamp).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from typing import Any, Generic, TypeVar

from cachetools import LRUCache, cached

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
F = TypeVar("F", bound=Callable[..., Any])


class BoundedCache(Generic[K, V]):
    """A least-recently-used map holding at most ``maxsize`` entries, safe across threads."""

    def __init__(self, maxsize: int) -> None:
        self.maxsize = int(maxsize)
        self._data: LRUCache[K, V] = LRUCache(maxsize=self.maxsize)
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        """The value under ``key`` (now the most recently used), or None."""
        with self._lock:
            return self._data.get(key)

    def put(self, key: K, value: V) -> None:
        """Store ``value`` under ``key``; the least recently used entry goes when full."""
        with self._lock:
            self._data[key] = value

    def pop(self, key: K) -> V | None:
        with self._lock:
            return self._data.pop(key, None)

    def discard_where(self, stale: Callable[[K], bool]) -> None:
        """Drop every entry whose key ``stale`` says is out of date."""
        with self._lock:
            for key in [k for k in self._data if stale(k)]:
                del self._data[key]

    def clear(self) -> None:
        with self._lock:
            self._data.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._data)


def memoized(maxsize: int) -> Callable[[F], F]:
    """Decorator: memoise a pure function of hashable arguments in a bounded LRU (thread-safe;
    ``f.cache_clear()`` empties it)."""
    return cached(LRUCache(maxsize=maxsize), lock=threading.Lock())  # type: ignore[return-value]


class SingleFlight:
    """One computation per key at a time.

    On a cold cache under load, concurrent misses for the same key wait for the first instead of
    each request thread computing the same thing (which starved both CPUs for tens of seconds at
    200 req/s; bench/load.py). Use as ``with flights(key): ...``, then look in the cache again.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._inflight: dict[Hashable, threading.Lock] = {}

    @contextmanager
    def __call__(self, key: Hashable) -> Iterator[None]:
        with self._lock:
            lock = self._inflight.setdefault(key, threading.Lock())
        with lock:
            yield
        with self._lock:
            if self._inflight.get(key) is lock:
                del self._inflight[key]

    def __len__(self) -> int:
        """How many keys are being computed now."""
        with self._lock:
            return len(self._inflight)
