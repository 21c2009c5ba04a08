# SPDX-License-Identifier: MIT
"""The Python client against its baselines, in one run (bench/run python; root, a build in BUILD_DIR):

1. A count's round trip: dry-run Shrinks naming one shrinker, answered by a Python process (pressure)
   and by a C one (libpressure's tests/shrinker-client), interleaved; the ratio of the medians.
2. The hit path of pressure.lru_cache against functools.lru_cache (C), same keys, same process.
3. The closed loop: a Python cache growing 8 MiB/s for 15 s into a 64 MiB group, with and without the
   daemon: does it survive, and what part of what it stored does it keep.
4. Beside a neighbour: a Python cache serving a Zipf load over 256 MiB of values (each miss costs 100 µs
   of work; the kvcache benchmark's shape) in a 96 MiB
   group where a neighbour reads a 48 MiB file working set; the group's stall against the regulator's
   budget, with the daemon and without it.

Usage: python-bench.py BUILD_DIR [SECONDS]
"""

from __future__ import annotations

import functools
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(HERE)
BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(SRC, "build"))
SECONDS = float(sys.argv[2]) if len(sys.argv) > 2 else 30.0
os.environ.setdefault("PRESSURED_BUILD_ROOT", BUILD)
sys.path[:0] = [os.path.join(SRC, "python"), os.path.join(SRC, "tests", "python")]
os.environ["PYTHONPATH"] = os.pathsep.join([os.path.join(SRC, "python"), os.environ.get("PYTHONPATH", "")])

import harness  # noqa: E402
import pressure  # noqa: E402

QUICK = "hold=1s\nsample_interval=250ms\nround_interval=100ms\nrequest_timeout=1s\n"


def call(sock: socket.socket, method: str, params: dict) -> dict:
    sock.sendall(json.dumps({"method": "io.pressured." + method, "parameters": params}).encode() + b"\0")
    buf = b""
    while not buf.endswith(b"\0"):
        buf += sock.recv(65536)
    return json.loads(buf[:-1])


def shrinker_of(d: harness.Daemon, pid: int) -> int:
    with pressure.Client(d.socket) as c:
        for _ in range(200):
            for s in c.call("ListShrinkers")["shrinkers"]:
                if s["pid"] == pid:
                    return s["id"]
            time.sleep(0.05)
    raise RuntimeError(f"pid {pid} registered no shrinker")


def round_trip() -> None:
    d = harness.Daemon(QUICK)
    try:
        c_proc = harness.track(subprocess.Popen([os.path.join(BUILD, "tests", "shrinker-client"), "--socket", d.socket,
                                                 "--objects", "1000"], stdout=subprocess.DEVNULL))
        py = harness.Child(d, "--mode", "block", "--sleep", "0", "--entries", "1000")
        py.wait_line("ready")  # its count lines (12 bytes each) fit in the pipe
        ids = {"C (libpressure)": shrinker_of(d, c_proc.pid), "Python (pressure)": shrinker_of(d, py.pid)}
        s = socket.socket(socket.AF_UNIX)
        s.connect(d.socket)
        times: dict[str, list[float]] = {k: [] for k in ids}
        for _ in range(20):  # interleaved blocks: both see the same machine
            for name, sid in ids.items():
                for _ in range(50):
                    t = time.perf_counter()
                    r = call(s, "Shrink", {"shrinker": sid, "dry_run": True})
                    times[name].append(time.perf_counter() - t)
                    assert r["parameters"]["results"][0].get("count") == 1000, r
        med = {k: statistics.median(v) * 1e6 for k, v in times.items()}
        p99 = {k: sorted(v)[int(len(v) * 0.99)] * 1e6 for k, v in times.items()}
        print("count round trip (dry-run Shrink of one shrinker, 1000 each, interleaved):")
        for k in ids:
            print(f"  {k:20s} median {med[k]:7.1f} us  p99 {p99[k]:7.1f} us")
        print(f"  Python / C: {med['Python (pressure)'] / med['C (libpressure)']:.2f}x (goal <= 3x)")
        harness.stop(c_proc)
        py.close()
    finally:
        d.close()


def hit_path() -> None:
    class Quiet:
        def add_shrinker(self, *a, **k):
            return None

    from pressure import cache as cache_mod

    cache_mod.default_client = lambda: Quiet()  # the hit path never touches the client

    @functools.lru_cache(maxsize=None)
    def f(x):
        return x

    @pressure.lru_cache()
    def g(x):
        return x

    keys = list(range(1000)) * 100
    for fn in (f, g):
        for k in range(1000):
            fn(k)
    best = {}
    for _ in range(5):
        for name, fn in (("functools.lru_cache", f), ("pressure.lru_cache", g)):
            t = time.perf_counter()
            for k in keys:
                fn(k)
            ns = (time.perf_counter() - t) / len(keys) * 1e9
            best[name] = min(best.get(name, ns), ns)
    print("hit path (1000 int keys, 100,000 hits, best of 5):")
    for k, v in best.items():
        print(f"  {k:20s} {v:6.1f} ns per call")
    print(f"  pressure / functools: {best['pressure.lru_cache'] / best['functools.lru_cache']:.2f}x (goal <= 1.5x)")
    loop = (lambda: None)
    t = time.perf_counter()
    for k in keys:
        loop()
    print(f"  (a call of an empty Python function: {(time.perf_counter() - t) / len(keys) * 1e9:.1f} ns)")


GROWER = r"""
import sys, time, pressure
client = pressure.Client(sys.argv[1]) if sys.argv[1] != "-" else None
class Quiet:
    def add_shrinker(self, *a, **k): return None
rate, seconds, size = float(sys.argv[2]), float(sys.argv[3]), 256 << 10
lru = pressure.LRU("grower", client=client or Quiet(), register=True)
if client: client.run_in_thread(); client.wait_registered(10)
start, n = time.monotonic(), 0
while time.monotonic() - start < seconds:
    due = int((time.monotonic() - start) * rate * (1 << 20) / size)
    while n < due:
        lru[n] = bytes([n & 255]) * size; n += 1
    time.sleep(0.01)
print("kept", len(lru), "stored", n, flush=True)
"""


def closed_loop() -> None:
    print("closed loop: a Python cache growing 8 MiB/s for 15 s into a 64 MiB group (anonymous only):")
    for with_daemon in (False, True):
        d = harness.Daemon("") if with_daemon else None
        g = harness.Generator(64)
        try:
            p = harness.track(subprocess.Popen([sys.executable, "-c", GROWER, d.socket if d else "-", "8", "15"],
                                               stdout=subprocess.PIPE, text=True,
                                               preexec_fn=lambda: g.join(os.getpid())))
            out, _ = p.communicate(timeout=120)
            words = out.split()
            killed = p.returncode == -signal.SIGKILL
            if killed or len(words) < 4:
                print(f"  {'pressured' if d else 'no daemon':10s} killed (exit {p.returncode})")
            else:
                kept, stored = int(words[1]), int(words[3])
                print(f"  {'pressured' if d else 'no daemon':10s} survived; kept {kept} of {stored} values "
                      f"({100 * kept / stored:.1f}%, goal >= 40%)")
        finally:
            g.close()
            if d:
                d.close()


SERVER = r"""
import random, sys, time, pressure
client = pressure.Client(sys.argv[1]) if sys.argv[1] != "-" else None
class Quiet:
    def add_shrinker(self, *a, **k): return None
if client is None:
    import pressure.cache as pc; pc.default_client = lambda: Quiet()
seconds, keys, size, RATE = float(sys.argv[2]), int(sys.argv[3]), 4096, 2000
@pressure.lru_cache(client=client) if client else pressure.lru_cache()
def value(k):
    t = time.perf_counter()
    while time.perf_counter() - t < 100e-6: pass   # a miss costs 100 us of work
    return bytes([k & 255]) * size
if client: client.run_in_thread(); client.wait_registered(10)
weights = [1 / (i + 1) ** 0.9 for i in range(keys)]
draws = random.Random(1).choices(range(keys), weights, k=200000)
start, n = time.monotonic(), 0
while time.monotonic() - start < seconds:
    if n >= (time.monotonic() - start) * RATE:
        time.sleep(0.001)  # paced: a cache filling faster than any loop can answer is OOM-killed first
        continue
    value(draws[n % len(draws)]); n += 1
info = value.cache_info()
print("requests", n, "hits", info.hits, "misses", info.misses, "entries", info.currsize, flush=True)
"""


def psi_total(path: str) -> int:
    with open(path) as f:
        return int(f.readline().split("total=")[1])


def beside_neighbour() -> None:
    print(f"beside a neighbour: a Python cache (Zipf 0.9 over 65536 values of 4 KiB, 2000 requests/s, 100 us misses) "
          f"and a reader of "
          f"a 48 MiB working set in a 96 MiB group, {SECONDS:g} s (stall measured over the second half):")
    ws = os.path.join(os.getcwd(), "python-bench-ws.dat")
    with open(ws, "wb") as f:
        f.write(os.urandom(48 << 20))
    try:
        for with_daemon in (False, True):
            d = harness.Daemon("") if with_daemon else None
            g = harness.Generator(96)
            try:
                server = harness.track(subprocess.Popen(
                    [sys.executable, "-c", SERVER, d.socket if d else "-", str(SECONDS), "65536"], stdout=subprocess.PIPE,
                    text=True, preexec_fn=lambda: g.join(os.getpid())))
                os.posix_fadvise(os.open(ws, os.O_RDONLY), 0, 0, os.POSIX_FADV_DONTNEED)
                reader = harness.track(subprocess.Popen(
                    ["sh", "-c", f"while :; do cat {ws} > /dev/null; done"], preexec_fn=lambda: g.join(os.getpid())))
                time.sleep(SECONDS / 2)
                pressure_file = os.path.join(g.v2_dir, "memory.pressure")
                t0, s0 = time.monotonic(), psi_total(pressure_file)
                out, _ = server.communicate(timeout=SECONDS * 3)
                stall = (psi_total(pressure_file) - s0) / (time.monotonic() - t0) / 1000
                harness.stop(reader)
                words = out.split()
                if server.returncode != 0 or len(words) < 8:
                    print(f"  {'pressured' if d else 'no daemon':10s} the cache was killed (exit {server.returncode})")
                    continue
                req, hits = int(words[1]), int(words[3])
                print(f"  {'pressured' if d else 'no daemon':10s} stall {stall:6.2f} ms/s (budget 1.00); "
                      f"{req / SECONDS:8.0f} requests/s, hit rate {100 * hits / req:.1f}%, {words[7]} entries at the end")
            finally:
                g.close()
                if d:
                    d.close()
    finally:
        os.unlink(ws)


if __name__ == "__main__":
    if os.geteuid() != 0:
        sys.exit("python-bench: run as root (cgroups, PSI triggers)")
    only = os.environ.get("PYTHON_BENCH_ONLY", "")
    for name, fn in (("round-trip", round_trip), ("hit-path", hit_path), ("closed-loop", closed_loop),
                     ("neighbour", beside_neighbour)):
        if not only or only == name:
            fn()
            print(flush=True)
