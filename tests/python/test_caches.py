# SPDX-License-Identifier: MIT
"""Caches that shrink themselves, in real Python processes against a real daemon: a pressure.lru_cache of
64 MiB asked by pressurectl and by real pressure in a limited group, keeping its most recently used
entries, freeing resident memory, surviving a restart; cachetools caches adopted in place."""

from __future__ import annotations

import unittest

import harness

QUICK = "hold=1s\nsample_interval=250ms\nround_interval=100ms\nrequest_timeout=3s\n"
ENTRY = 256 << 10  # 256 KiB: malloc maps each value alone, so a freed one leaves the resident set at once
ENTRIES = 256  # 64 MiB


@unittest.skipIf(harness.skip_reason(), harness.skip_reason() or "")
class CacheTest(unittest.TestCase):
    def setUp(self) -> None:
        self.daemon = harness.Daemon(QUICK)
        self.addCleanup(self.daemon.close)

    def child(self, *args: str, group: harness.Generator | None = None) -> harness.Child:
        c = harness.Child(self.daemon, *args, group=group)
        self.addCleanup(c.close)
        return c

    def generator(self, mib: int) -> harness.Generator:
        g = harness.Generator(mib)
        self.addCleanup(g.close)
        return g

    def test_lru_cache_asked_by_pressurectl(self) -> None:
        c = self.child("--mode", "lru", "--entries", str(ENTRIES), "--size", str(ENTRY))
        ready = harness.fields(c.wait_line("ready"))
        self.assertEqual(int(ready["entries"]), ENTRIES)
        before = int(c.ask("stats", "stats")["rss"])
        self.assertGreater(before, ENTRIES * ENTRY)
        # The last 32 keys used are the oldest ones, touched again: they must stay.
        recent = [str(k) for k in range(32)]
        c.ask("touch " + " ".join(recent), "touched")
        out = self.daemon.ctl("--shrinker", ready["id"], "--nr", "128", "shrink")
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("freed 128 objects", out.stdout)
        after = c.ask("stats", "stats")
        self.assertEqual(int(after["entries"]), ENTRIES - 128)
        self.assertEqual(int(after["bytes"]), (ENTRIES - 128) * (ENTRY + 33))  # sys.getsizeof(bytes)
        self.assertLess(int(after["rss"]), before - 100 * ENTRY, "the resident set did not fall")
        has = c.ask("has " + " ".join(recent), "has")
        self.assertEqual(set(has.values()), {"1"}, "a recently used entry went")
        # The daemon's own numbers agree.
        infos = [x for x in self.daemon_client().call("ListShrinkers")["shrinkers"] if x["pid"] == c.pid]
        self.assertEqual((infos[0]["freed"], infos[0]["bytes_freed"]), (128, 128 * (ENTRY + 33)))

    def daemon_client(self):
        import pressure

        cl = pressure.Client(self.daemon.socket)
        self.addCleanup(cl.close)
        return cl

    def test_lru_cache_under_real_pressure(self) -> None:
        """64 MiB of cache and a writer in a 96 MiB group: the daemon asks the cache to scan, it frees, and
        the process lives on."""
        g = self.generator(96)
        c = self.child("--mode", "lru", "--entries", str(ENTRIES), "--size", str(ENTRY), group=g)
        c.wait_line("ready")
        g.start()
        scanned = harness.fields(c.wait_line("scan", 120))
        self.assertGreater(int(scanned["freed"]), 0)
        stats = c.ask("stats", "stats")
        self.assertLess(int(stats["entries"]), ENTRIES)
        self.assertIsNone(c.proc.poll())

    def test_registration_survives_restart(self) -> None:
        c = self.child("--mode", "lru", "--entries", "16", "--size", "4096")
        c.wait_line("ready")
        self.daemon.restart()
        c.wait_line("away")
        c.wait_line("connected", 30)
        sid = c.ask("stats", "stats")["id"]
        out = self.daemon.ctl("--shrinker", sid, "--nr", "4", "shrink")
        self.assertIn("freed 4 objects", out.stdout, out.stderr)
        self.assertEqual(c.ask("stats", "stats")["entries"], "12")

    def test_cachetools_adopted_in_place(self) -> None:
        """LRU and TTL give their least recently used first, LFU its least frequently used."""
        for kind in ("lru", "lfu", "ttl"):
            with self.subTest(kind=kind):
                c = self.child("--mode", "cachetools", "--kind", kind, "--entries", "64", "--size", "4096")
                ready = harness.fields(c.wait_line("ready"))
                # 0..15 used again (most recently, and more often than the others).
                keep = " ".join(str(k) for k in range(16))
                c.ask(f"touch {keep}", "touched")
                c.ask(f"touch {keep}", "touched")
                out = self.daemon.ctl("--shrinker", ready["id"], "--nr", "40", "shrink")
                self.assertIn("freed 40 objects", out.stdout, out.stderr)
                self.assertEqual(c.ask("stats", "stats")["entries"], "24")
                self.assertEqual(set(c.ask(f"has {keep}", "has").values()), {"1"})
                c.close()

    def test_cachetools_under_real_pressure(self) -> None:
        g = self.generator(96)
        c = self.child("--mode", "cachetools", "--kind", "ttl", "--entries", str(ENTRIES), "--size", str(ENTRY),
                       group=g)
        c.wait_line("ready")
        g.start()
        scanned = harness.fields(c.wait_line("scan", 120))
        self.assertGreater(int(scanned["freed"]), 0)
        self.assertLess(int(c.ask("stats", "stats")["entries"]), ENTRIES)


if __name__ == "__main__":
    unittest.main()
