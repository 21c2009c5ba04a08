# SPDX-License-Identifier: MIT
"""Caches that shrink themselves: LRU, a mapping whose entries are a shrinker's objects, and lru_cache,
a drop-in for functools.lru_cache built on it.

The daemon counts the entries (and their bytes), asks for the least recently used to go (scan), and
tells a growth limit the cache keeps within on insertion. Evicted keys leave shadow entries: a miss
that finds one says how far past the tail the key was (the kernel's refault distance: the evictions
since), and the misses found within the list's last sixteenth are the value of its last bytes, which
every count sends (docs/shrinkers.md, "Value"): reclaim then asks the caches worth least first.
"""

from __future__ import annotations

import collections
import functools
import math
import sys
import threading
import time
from collections.abc import MutableMapping
from typing import Any, Callable, Hashable, Iterator, Optional, TypeVar

from .client import EMPTY, Client, ShrinkControl, Shrinker, now_usec

K = TypeVar("K")
V = TypeVar("V")

VALUE_DECAY_USEC = 10_000_000  # a found miss counts for about this long (exponential decay), as libpressure
VALUE_WINDOW_MIN = 64  # the tail's worth is judged over at least this many entries
# Shadow entries kept: twice the window (a sixteenth of the list), so that the list may shrink or grow by
# half between an eviction and its miss. A shadow entry costs about 180 bytes in Python: one per entry of
# the list was 4.3% of 4 KiB values and more than the values themselves below 200 bytes; an eighth is 22
# bytes per entry, as libpressure's 20.
SHADOW_DIV = 8
# lru_cache's generations: a new one once three quarters are young, at most this often (seconds). A load
# that uses the whole cache makes everything young again at once: aging each time would send every hit
# through Python; once a second costs one use of each entry a second.
AGE_INTERVAL = 1.0
MIB = 1024 * 1024

_default_client: Optional[Client] = None
_default_lock = threading.Lock()


def default_client() -> Client:
    """The process's shared client, dispatching on a thread of its own (made on first use)."""
    global _default_client
    with _default_lock:
        if _default_client is None or _default_client.closed:
            _default_client = Client()
            _default_client.run_in_thread()
        return _default_client


class _Shadow:
    """Hashes of evicted keys with the eviction count at their eviction, at most `limit` of them."""

    def __init__(self) -> None:
        self.seq: dict[int, int] = {}
        self.order: collections.deque[tuple[int, int]] = collections.deque()
        self.evictions = 0
        self.cost = 0.0  # decayed cost of the misses found within the window
        self.cost_at = now_usec()
        self.found = 0  # misses that found a shadow
        self.missed = 0  # misses

    def evicted(self, h: int, limit: int) -> None:
        self.evictions += 1
        self.seq[h] = self.evictions
        self.order.append((h, self.evictions))
        while len(self.order) > limit:
            old, n = self.order.popleft()
            if self.seq.get(old) == n:
                del self.seq[old]

    def decay(self, now: int) -> None:
        if now > self.cost_at:
            self.cost *= math.exp(-(now - self.cost_at) / VALUE_DECAY_USEC)
            self.cost_at = now

    def miss(self, h: int, cost: float, window: int) -> int:
        """The distance of a miss past the tail (0: not found), counted into the value when within window."""
        self.missed += 1
        n = self.seq.pop(h, None)
        if n is None:
            return 0
        self.found += 1
        distance = self.evictions - n + 1
        if distance <= window:
            self.decay(now_usec())
            self.cost += cost
        return distance


class LRU(MutableMapping[K, V]):
    """A mapping that drops its least recently used entries when the daemon asks (or past maxsize entries,
    or past the growth limit it is told, in bytes).

    sizeof(value) sizes an entry in bytes (default: sys.getsizeof). A read (lookup, get) makes the entry
    the most recently used. miss(key, cost) records a lookup that found nothing, with what the miss costs
    (seconds of work, or 1 per miss by default): misses of recently evicted keys make the cache's value.
    Thread-safe: the daemon's requests come on the client's dispatching thread."""

    def __init__(self, name: str = "pressure.LRU", *, maxsize: Optional[int] = None,
                 sizeof: Optional[Callable[[Any], int]] = None, client: Optional[Client] = None,
                 register: bool = True, numa_aware: bool = False) -> None:
        self.name = name
        self.maxsize = maxsize
        self.sizeof = sizeof or sys.getsizeof
        self._d: collections.OrderedDict[Any, tuple[Any, int]] = collections.OrderedDict()
        self._bytes = 0
        self._lock = threading.RLock()
        self._shadow = _Shadow()
        #: The growth limit last told, in bytes (None: none).
        self.limit: Optional[int] = None
        self.evicted = 0  # entries dropped for the daemon, maxsize or the limit
        # A front that serves the young entries itself (lru_cache's functools cache): the last `young` of
        # the order are in it, and front_clear() empties it, making them old (see lru_cache).
        self._young: Optional[int] = None
        self._front_clear: Optional[Callable[[], None]] = None
        self._aged_at = 0.0
        self.shrinker: Optional[Shrinker] = None
        if register:
            c = client or default_client()
            # memcg_aware: the entries are charged to this process's cgroup, so the group's own pressure
            # asks them too (as the kernel asks a memcg-aware list_lru), not only the system's.
            self.shrinker = c.add_shrinker(name, self._count, self._scan, numa_aware=numa_aware,
                                           memcg_aware=True, on_limit=self._on_limit)

    # ---- the mapping ----

    def __getitem__(self, key: K) -> V:
        v = self._d[key]
        try:
            self._d.move_to_end(key)
        except KeyError:
            pass  # evicted by another thread meanwhile: still a hit
        return v[0]

    def peek(self, key: K, default: Any = None) -> Any:
        """The value without making it recently used."""
        v = self._d.get(key)
        return default if v is None else v[0]

    def __setitem__(self, key: K, value: V) -> None:
        size = max(int(self.sizeof(value)), 0)
        with self._lock:
            self._put(key, value, size)
            self._trim()

    def _put(self, key: Any, value: Any, size: Optional[int]) -> None:
        """key at the recent end, with its size (None: as it was; a new one is sized). Under the lock."""
        old = self._d.pop(key, None)
        if old is not None:
            self._bytes -= old[1]
        if size is None:
            size = old[1] if old is not None else max(int(self.sizeof(value)), 0)
        self._d[key] = (value, size)
        self._bytes += size

    def __delitem__(self, key: K) -> None:
        with self._lock:
            v = self._d.pop(key)
            self._bytes -= v[1]

    def __len__(self) -> int:
        return len(self._d)

    def __iter__(self) -> Iterator[K]:
        return iter(list(self._d))

    def __contains__(self, key: object) -> bool:
        return key in self._d

    def clear(self) -> None:
        with self._lock:
            self._d.clear()
            self._bytes = 0

    @property
    def bytes(self) -> int:
        """What the entries hold, by sizeof."""
        return self._bytes

    # ---- eviction and value ----

    def evict(self, n: int) -> tuple[int, int]:
        """Drop up to n least recently used entries: (entries, bytes) dropped."""
        freed = nbytes = 0
        with self._lock:
            limit = max(len(self._d) // SHADOW_DIV, 2 * VALUE_WINDOW_MIN)
            while freed < n and self._d:
                if self._young is not None and self._young >= len(self._d):
                    self._age()  # only young ones left: they must leave the front before they can go
                key, (_, size) = self._d.popitem(last=False)
                self._bytes -= size
                nbytes += size
                freed += 1
                try:
                    self._shadow.evicted(hash(key), limit)
                except TypeError:
                    pass
            self.evicted += freed
        return freed, nbytes

    # ---- generations, for a front that serves hits itself ----

    def _age(self) -> None:
        """A new generation: the front forgets its entries, and every entry is old (in the order it became
        young). The front serves an old one again after its next use: that use makes it young."""
        if self._front_clear is not None:
            self._front_clear()
        self._young = 0
        self._aged_at = time.monotonic()

    def _young_add(self, key: Any, value: Any) -> None:
        """An entry the front now serves: a new one, or an old one used again (made the most recent)."""
        with self._lock:
            self._put(key, value, None)
            self._young = min((self._young or 0) + 1, len(self._d))
            # Age before the young fill the list: the old part is what eviction takes, and what has not
            # been used since the last aging belongs there.
            if (self._young * 4 >= len(self._d) * 3 and len(self._d) >= 2 * VALUE_WINDOW_MIN and
                    time.monotonic() - self._aged_at >= AGE_INTERVAL):
                self._age()
            self._trim()

    def _trim(self) -> None:
        over = len(self._d) - self.maxsize if self.maxsize is not None else 0
        if over > 0:
            self.evict(over)
        while self.limit is not None and self._bytes > self.limit and self._d:
            self.evict(max(1, len(self._d) // 64))

    def miss(self, key: Hashable, cost: Optional[float] = None) -> int:
        """A lookup of key found nothing; cost is what the miss costs in seconds (e.g. the time it takes to make
        the value again; None: count the miss as 1). Returns how far past the tail the key was (the evictions since it went), 0 if it was
        not a recent eviction."""
        with self._lock:
            window = max(len(self._d) // 16, VALUE_WINDOW_MIN)
            return self._shadow.miss(hash(key), 1.0 if cost is None else max(cost, 0.0) * 1e6, window)

    def value(self) -> float:
        """What one more MiB would save: the decayed cost per second (µs per second where misses were given
        their cost in seconds, misses per second otherwise) of the misses found within the last sixteenth
        of the list, per MiB of that sixteenth. 0: nothing known."""
        with self._lock:
            n = len(self._d)
            if n == 0 or self._bytes == 0:
                return 0.0
            self._shadow.decay(now_usec())
            rate = self._shadow.cost * 1e6 / VALUE_DECAY_USEC  # a decayed sum over T is a rate times T
            window = max(n // 16, VALUE_WINDOW_MIN)
            return rate / (window * (self._bytes / n) / MIB)

    def stats(self) -> dict[str, int]:
        s = self._shadow
        return {"entries": len(self._d), "bytes": self._bytes, "evicted": self.evicted, "misses": s.missed,
                "shadow_hits": s.found, "shadow_entries": len(s.seq)}

    # ---- the shrinker ----

    def _count(self, sc: ShrinkControl) -> Any:
        n = len(self._d)
        sc.nr_bytes = self._bytes
        sc.value = self.value()
        return n if n > 0 else EMPTY

    def _scan(self, sc: ShrinkControl) -> int:
        freed, nbytes = self.evict(sc.nr_to_scan)
        sc.nr_bytes = nbytes
        return freed

    def _on_limit(self, shrinker: Shrinker, limit: Optional[int]) -> None:
        with self._lock:
            self.limit = limit
            self._trim()

    def close(self) -> None:
        """Unregister the shrinker (the entries stay)."""
        if self.shrinker:
            self.shrinker.remove()
            self.shrinker = None


def lru_cache(maxsize: Optional[int] = None, typed: bool = False, *, name: Optional[str] = None,
              sizeof: Optional[Callable[[Any], int]] = None, client: Optional[Client] = None) -> Callable:
    """functools.lru_cache whose entries the daemon may ask back, least recently used first.

    maxsize bounds the entries as functools' does (None: no bound but memory pressure). Each miss's cost
    is the time the function took, so the cache's value is what its last MiB saves in computing time.
    The wrapper has cache_info(), cache_clear(), cache_parameters() and, beyond functools', cache (the LRU).

    Hits cost what functools' cost: the wrapper is a functools.lru_cache(maxsize=None), the young
    generation. Every entry is also in an LRU of our own, in the order it was last made young. An entry the
    front has forgotten (an old one) comes back through our function and is young again. The daemon's scans
    take the old first, oldest first; before young ones must go, the front is cleared (they all become old),
    and that happens by itself once three quarters are young. So what was used since the last aging stays,
    as the kernel's active list keeps it, without a line of Python on a hit."""
    if callable(maxsize) and not isinstance(maxsize, bool):  # @lru_cache without parentheses
        fn, maxsize = maxsize, None
        return lru_cache(None, typed, name=name, sizeof=sizeof, client=client)(fn)

    def decorate(fn: Callable) -> Callable:
        cache = LRU(name or f"{fn.__module__}.{fn.__qualname__}", maxsize=maxsize, sizeof=sizeof, client=client)
        make_key = functools._make_key  # the key functools makes: equal calls hit alike
        entries = cache._d
        # hits: the front's before its last clear, and the old entries used again; misses: computed
        counts = {"front": 0, "promoted": 0, "misses": 0, "cleared": 0}

        def young(*args: Any, **kwds: Any) -> Any:
            key = make_key(args, kwds, typed)
            v = entries.get(key)
            if v is not None:  # old: used again
                counts["promoted"] += 1
                cache._young_add(key, v[0])
                return v[0]
            counts["misses"] += 1
            t = time.perf_counter()
            result = fn(*args, **kwds)
            cache.miss(key, max(time.perf_counter() - t, 1e-6))
            cache._young_add(key, result)
            return result

        front = functools.lru_cache(maxsize=None, typed=typed)(young)
        front_info, front_clear = front.cache_info, front.cache_clear

        def age() -> None:  # the front's own counters go with its entries: kept here
            counts["front"] += front_info().hits
            front_clear()

        cache._front_clear = age
        cache._young = 0

        def hits() -> int:
            return counts["front"] + front_info().hits + counts["promoted"] - counts["cleared"]

        def cache_info() -> functools._CacheInfo:
            return functools._CacheInfo(hits(), counts["misses"], maxsize, len(cache))

        def cache_clear() -> None:
            with cache._lock:
                counts["cleared"] = hits() + counts["cleared"]
                counts["misses"] = 0
                cache.clear()
                cache._age()

        functools.update_wrapper(front, fn)
        front.cache_info = cache_info  # type: ignore[attr-defined]
        front.cache_clear = cache_clear  # type: ignore[attr-defined]
        front.cache_parameters = lambda: {"maxsize": maxsize, "typed": typed}  # type: ignore[attr-defined]
        front.cache = cache  # type: ignore[attr-defined]
        return front

    return decorate
