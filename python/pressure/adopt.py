# SPDX-License-Identifier: MIT
"""Make a cachetools cache (LRUCache, LFUCache, TTLCache...) shrinkable in place.

The cache keeps its own policy: a scan pops items with the cache's popitem(), which takes the least
recently used (LRU, TTL after the expired), the least frequently used (LFU) and so on. cachetools caches
are not thread-safe: the daemon's requests come on the client's dispatching thread, so give adopt() the
lock your own code holds around the cache (one is made otherwise, and then only adopt's calls hold it).
"""

from __future__ import annotations

import itertools
import sys
import threading
from typing import Any, Callable, MutableMapping, Optional

from .client import EMPTY, Client, ShrinkControl, Shrinker

SAMPLE = 64  # values sized to estimate what a cache holds, when it does not count in bytes


class Adopted:
    """A cache under a shrinker: remove() lets it go again."""

    def __init__(self, cache: MutableMapping[Any, Any], name: str, lock: Any, client: Client,
                 sizeof: Optional[Callable[[Any], int]]) -> None:
        self.cache = cache
        self.lock = lock
        self.sizeof = sizeof or sys.getsizeof
        #: The growth limit last told, in bytes (None: none). Kept by the next scan or trim().
        self.limit: Optional[int] = None
        self.evicted = 0
        # memcg_aware: the cache is charged to this process's cgroup, whose pressure asks it too.
        self.shrinker: Shrinker = client.add_shrinker(name, self._count, self._scan, memcg_aware=True,
                                                      on_limit=self._on_limit)

    def bytes(self) -> int:
        """An estimate of what the cache holds: its entries times the mean size of up to SAMPLE values."""
        with self.lock:
            n = len(self.cache)
            if n == 0:
                return 0
            sample = [self.sizeof(v) for v in itertools.islice(self.cache.values(), SAMPLE)]
        return n * sum(sample) // max(len(sample), 1)

    def _pop(self, n: int) -> tuple[int, int]:
        freed = nbytes = 0
        with self.lock:
            while freed < n:
                try:
                    _, v = self.cache.popitem()
                except KeyError:
                    break
                nbytes += self.sizeof(v)
                freed += 1
            self.evicted += freed
        return freed, nbytes

    def _count(self, sc: ShrinkControl) -> Any:
        with self.lock:
            n = len(self.cache)
        sc.nr_bytes = self.bytes()
        return n if n > 0 else EMPTY

    def _scan(self, sc: ShrinkControl) -> int:
        freed, sc.nr_bytes = self._pop(sc.nr_to_scan)
        return freed

    def trim(self) -> int:
        """Pop items until the estimate keeps within the limit told: the entries dropped."""
        dropped = 0
        while self.limit is not None:
            held = self.bytes()
            if held <= self.limit:
                break
            with self.lock:
                n = len(self.cache)
            freed, _ = self._pop(max(1, n * (held - self.limit) // max(held, 1)))
            if freed == 0:
                break
            dropped += freed
        return dropped

    def _on_limit(self, shrinker: Shrinker, limit: Optional[int]) -> None:
        self.limit = limit
        self.trim()

    def remove(self) -> None:
        self.shrinker.remove()


def adopt(cache: MutableMapping[Any, Any], *, name: Optional[str] = None, lock: Any = None,
          client: Optional[Client] = None, sizeof: Optional[Callable[[Any], int]] = None) -> Adopted:
    """Register a shrinker for a cachetools cache, in place (see the module's text)."""
    if not hasattr(cache, "popitem"):
        raise TypeError("adopt() takes a cache with popitem() (a cachetools cache)")
    from .cache import default_client

    return Adopted(cache, name or f"cachetools.{type(cache).__name__}", lock or threading.RLock(),
                   client or default_client(), sizeof)
