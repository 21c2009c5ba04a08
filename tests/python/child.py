# SPDX-License-Identifier: MIT
"""A Python process with a cache, for the tests: it says what happens to it on stdout, one line each, and
answers commands on stdin.

    child.py --socket S --mode lru --entries N --size BYTES      pressure.lru_cache of N values
    child.py --socket S --mode cachetools --kind lru|lfu|ttl ...  a cachetools cache, adopted
    child.py --socket S --mode block --sleep SECONDS             a shrinker whose scan blocks
    child.py --socket S --mode subscribe --scope SCOPE           a subscription (the exception it met)

Lines: "ready id=ID", "scan nr=N freed=F", "count n=N", "away", "connected", "refused error=NAME errno=E".
Commands: "stats" -> "stats entries= bytes= rss= evicted=", "touch K..." (use keys: recently used),
"has K..." -> "has K=0|1 ...", "grow N" (N more entries).
"""

from __future__ import annotations

import argparse
import os
import select
import sys
import threading
import time

import pressure


_say_lock = threading.Lock()


def say(*words: object) -> None:
    """One whole line: the dispatching thread says "connected" while the main one says "ready" (two
    print() calls interleaved their words and newlines)."""
    with _say_lock:
        sys.stdout.write(" ".join(str(w) for w in words) + "\n")
        sys.stdout.flush()


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def wrap(shrinker: pressure.Shrinker) -> None:
    """Say each scan and count the daemon asks of the shrinker."""
    scan, count = shrinker.scan_fn, shrinker.count_fn

    def scan_said(sc: pressure.ShrinkControl):
        n = scan(sc)
        say("scan", f"nr={sc.nr_to_scan}", f"freed={n}", f"level={sc.level}")
        return n

    def count_said(sc: pressure.ShrinkControl):
        n = count(sc)
        say("count", f"n={n}")
        return n

    shrinker.scan_fn, shrinker.count_fn = scan_said, count_said


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--socket", required=True)
    ap.add_argument("--mode", default="lru")
    ap.add_argument("--entries", type=int, default=256)
    ap.add_argument("--size", type=int, default=256 << 10)
    ap.add_argument("--kind", default="lru")
    ap.add_argument("--sleep", type=float, default=0)
    ap.add_argument("--scope", default="system")
    args = ap.parse_args()

    client = pressure.Client(args.socket)
    client.on_connection(lambda up: say("connected" if up else "away"))

    if args.mode == "subscribe":
        try:
            sub = client.subscribe([args.scope])
        except pressure.PressureError as e:
            say("refused", f"error={type(e).__name__}", f"errno={e.parameters.get('errno', '-')}")
            return 0
        say("subscribed", f"level={sub.level(args.scope)}")
        return 0

    cache = None
    get = None
    if args.mode == "lru":
        @pressure.lru_cache(client=client, name="child-lru")
        def value(i: int) -> bytes:
            return bytes([i & 255]) * args.size  # touched: resident

        get, cache, shrinker = value, value.cache, value.cache.shrinker
    elif args.mode == "cachetools":
        import cachetools

        kinds = {"lru": lambda: cachetools.LRUCache(1 << 30, getsizeof=len),
                 "lfu": lambda: cachetools.LFUCache(1 << 30, getsizeof=len),
                 "ttl": lambda: cachetools.TTLCache(1 << 30, ttl=3600, getsizeof=len)}
        store = kinds[args.kind]()
        adopted = pressure.adopt(store, client=client, name=f"child-{args.kind}", sizeof=len)

        def get(i: int) -> bytes:
            with adopted.lock:
                v = store.get(i)
                if v is None:
                    v = store[i] = bytes([i & 255]) * args.size
                return v

        cache, shrinker = store, adopted.shrinker
    elif args.mode == "block":
        items = [0] * args.entries

        def count(sc: pressure.ShrinkControl):
            return len(items) or pressure.EMPTY

        def scan(sc: pressure.ShrinkControl):
            time.sleep(args.sleep)  # past the deadline: the daemon goes on without us
            n = min(sc.nr_to_scan, len(items))
            del items[:n]
            return n

        shrinker = client.add_shrinker("child-block", count, scan)
        cache = items
    else:
        raise SystemExit(f"no mode {args.mode}")

    for i in range(args.entries if get else 0):
        get(i)
    wrap(shrinker)
    client.run_in_thread()
    if not client.wait_registered(30):
        say("unregistered")
        return 1
    say("ready", f"id={shrinker.id}", f"entries={len(cache)}", f"rss={rss()}")

    while True:
        r, _, _ = select.select([sys.stdin], [], [])
        line = sys.stdin.readline()
        if not line:
            return 0
        cmd, *rest = line.split()
        if cmd == "stats":
            held = cache.bytes if isinstance(cache, pressure.LRU) else getattr(cache, "currsize", len(cache))
            say("stats", f"entries={len(cache)}", f"bytes={held}", f"rss={rss()}", f"id={shrinker.id}")
        elif cmd == "touch":
            for k in rest:
                get(int(k))
            say("touched", f"n={len(rest)}")
        elif cmd == "has":
            say("has", *(f"{k}={int(int(k) in cache)}" for k in rest))
        elif cmd == "grow":
            start = len(cache) + 100000
            for i in range(int(rest[0])):
                get(start + i)
            say("grown", f"entries={len(cache)}")


if __name__ == "__main__":
    sys.exit(main())
