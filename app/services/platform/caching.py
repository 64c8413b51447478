"""The services' per-process caches: bounded by measured bytes, thread-safe, counted.

Each :class:`BoundedCache` is a least-recently-used map (``cachetools.LRUCache`` sized by
:func:`app.services.platform.sizing.nbytes`) holding at most ``max_bytes``; every cache of the
process together holds at most :data:`BUDGET`'s limit (``CACHE_MAX_BYTES``): a put that takes
the process over it evicts least-recently-used entries from the largest caches first (never the
entry just written). A value larger than its cache is not stored (counted as ``too_large``).

Hits, misses, evictions and bytes per cache are exported on ``/metrics`` (prometheus_client).

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

from cachetools import LRUCache
from prometheus_client import Counter, Gauge

from app.services.platform.sizing import nbytes

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
F = TypeVar("F", bound=Callable[..., Any])

MB = 1024 * 1024
DEFAULT_CACHE_BYTES = 64 * MB

HITS = Counter("benchslice_cache_hits", "Cache lookups that found a value", ["cache"])
MISSES = Counter("benchslice_cache_misses", "Cache lookups that found nothing", ["cache"])
EVICTIONS = Counter(
    "benchslice_cache_evictions", "Entries dropped to stay under a byte limit", ["cache"]
)
TOO_LARGE = Counter(
    "benchslice_cache_too_large", "Values not stored: larger than their cache", ["cache"]
)
BYTES = Gauge("benchslice_cache_bytes", "Measured bytes a cache holds", ["cache"])
ENTRIES = Gauge("benchslice_cache_entries", "Entries a cache holds", ["cache"])


class _CountingLRU(LRUCache):
    def __init__(self, maxsize: int, owner: BoundedCache) -> None:
        super().__init__(maxsize=maxsize, getsizeof=nbytes)
        self._owner = owner

    def popitem(self) -> tuple[Any, Any]:  # called by cachetools to make room
        item = super().popitem()
        self._owner._evicted()
        return item


class _Budget:
    """Every cache of the process, and the bytes they may hold together."""

    def __init__(self, limit: int) -> None:
        self.limit = int(limit)
        self.caches: dict[str, BoundedCache] = {}
        self._lock = threading.Lock()

    def register(self, cache: BoundedCache) -> None:
        with self._lock:
            self.caches[cache.name] = cache

    def total(self) -> int:
        return sum(c.currsize for c in list(self.caches.values()))

    def enforce(self, written: BoundedCache) -> None:
        """Evict least recently used entries, largest caches first, until the process is under
        its limit; the entry just written to ``written`` stays."""
        if self.total() <= self.limit:
            return
        with self._lock:
            largest = sorted(self.caches.values(), key=lambda c: c.currsize, reverse=True)
        for cache in largest:
            excess = self.total() - self.limit
            if excess <= 0:
                return
            cache.shrink_by(excess, keep=1 if cache is written else 0)


BUDGET = _Budget(1024 * MB)


def configure(total_bytes: int) -> None:
    """Set the process-wide limit (``CACHE_MAX_BYTES``); evicts at once when now over it."""
    BUDGET.limit = int(total_bytes)
    for cache in list(BUDGET.caches.values()):
        BUDGET.enforce(cache)


class BoundedCache(Generic[K, V]):
    """A least-recently-used map holding at most ``max_bytes`` (measured), safe across threads."""

    def __init__(self, name: str, max_bytes: int = DEFAULT_CACHE_BYTES) -> None:
        self.name = name
        self.max_bytes = int(max_bytes)
        self._data: _CountingLRU = _CountingLRU(self.max_bytes, self)
        self._lock = threading.RLock()
        self._hits = HITS.labels(name)
        self._misses = MISSES.labels(name)
        self._evictions = EVICTIONS.labels(name)
        self._too_large = TOO_LARGE.labels(name)
        self._bytes = BYTES.labels(name)
        self._entries = ENTRIES.labels(name)
        BUDGET.register(self)

    def _evicted(self) -> None:
        self._evictions.inc()

    def _gauge(self) -> None:
        self._bytes.set(self._data.currsize)
        self._entries.set(len(self._data))

    @property
    def currsize(self) -> int:
        """Measured bytes held now."""
        return int(self._data.currsize)

    def get(self, key: K) -> V | None:
        """The value under ``key`` (now the most recently used), or None."""
        with self._lock:
            value = self._data.get(key)
        (self._misses if value is None else self._hits).inc()
        return value

    def put(self, key: K, value: V) -> None:
        """Store ``value`` under ``key``; least recently used entries go to make room."""
        with self._lock:
            try:
                self._data[key] = value
            except ValueError:  # larger than the whole cache
                self._data.pop(key, None)
                self._too_large.inc()
            self._gauge()
        BUDGET.enforce(self)

    def shrink_by(self, excess: int, keep: int = 0) -> None:
        """Evict least recently used entries until ``excess`` bytes are freed or ``keep``
        entries (the most recent) are left."""
        with self._lock:
            freed = 0
            while freed < excess and len(self._data) > keep:
                _, value = self._data.popitem()
                freed += self._data.getsizeof(value)
            self._gauge()

    def pop(self, key: K) -> V | None:
        with self._lock:
            value = self._data.pop(key, None)
            self._gauge()
            return value

    def discard_where(self, stale: Callable[[K], bool]) -> None:
        """Drop every entry whose key ``stale`` says is out of date."""
        with self._lock:
            for key in [k for k in self._data if stale(k)]:
                del self._data[key]
            self._gauge()

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
            self._gauge()

    def __len__(self) -> int:
        with self._lock:
            return len(self._data)


def memoized(name: str, max_bytes: int = DEFAULT_CACHE_BYTES) -> Callable[[F], F]:
    """Decorator: memoise a pure function of hashable arguments in a :class:`BoundedCache`
    (``f.cache_clear()`` empties it)."""
    cache: BoundedCache = BoundedCache(name, max_bytes)

    def decorate(func: F) -> F:
        from functools import wraps

        from cachetools.keys import hashkey

        @wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            key = hashkey(*args, **kwargs)
            hit = cache.get(key)
            if hit is not None:
                return hit
            value = func(*args, **kwargs)
            cache.put(key, value)
            return value

        wrapper.cache_clear = cache.clear  # type: ignore[attr-defined]
        wrapper.cache = cache  # type: ignore[attr-defined]
        return wrapper  # type: ignore[return-value]

    return decorate


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
