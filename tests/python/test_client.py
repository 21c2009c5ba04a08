# SPDX-License-Identifier: MIT
"""The Python client against a real daemon: status, errors named as the daemon's, subscriptions under the
suite's real pressure generator (blocking and with asyncio), shrinkers, reconnection after a restart,
and a callback that blocks past its deadline."""

from __future__ import annotations

import asyncio
import os
import selectors
import signal
import subprocess
import sys
import threading
import time
import unittest

import harness
import pressure
import pressure.aio

QUICK = "hold=1s\nsample_interval=250ms\nround_interval=100ms\nrequest_timeout=3s\n"


@unittest.skipIf(harness.skip_reason(), harness.skip_reason() or "")
class ClientTest(unittest.TestCase):
    def setUp(self) -> None:
        self.daemon = harness.Daemon(QUICK)
        self.addCleanup(self.daemon.close)
        self.client = pressure.Client(self.daemon.socket)
        self.addCleanup(self.client.close)

    def generator(self, mib: int = 16) -> harness.Generator:
        g = harness.Generator(mib)
        self.addCleanup(g.close)
        return g

    def test_status_and_configuration(self) -> None:
        st = self.client.status()
        self.assertEqual(st.system.scope.type, pressure.ScopeType.SYSTEM)
        self.assertIsInstance(st.system.level, pressure.Level)
        self.assertGreaterEqual(len(st.nodes), 1)
        self.assertIsNotNone(st.nodes[0].memory)
        conf = self.client.configuration()
        self.assertEqual([lv.level for lv in conf.levels],
                         [pressure.Level.LOW, pressure.Level.MEDIUM, pressure.Level.CRITICAL])
        self.assertEqual(conf.hold_usec, 1_000_000)
        self.assertEqual(conf.request_timeout_usec, 3_000_000)

    def test_errors_are_named(self) -> None:
        with self.assertRaises(pressure.NoSuchCgroup) as e:
            self.client.subscribe(["/pressured-pytest-no-such-group"])
        self.assertEqual(e.exception.parameters["cgroup"], "/pressured-pytest-no-such-group")
        with self.assertRaises(pressure.NoSuchNode):
            self.client.subscribe(["node:4095"])
        with self.assertRaises(pressure.NoSuchShrinker):
            self.client.shrink(1, shrinker=999999)
        with self.assertRaises(ValueError):
            self.client.subscribe(["no-scope"])
        # Nobody may not have a group of root's watched that nobody watches yet: errno 13.
        g = self.generator()
        child = harness.Child(self.daemon, "--mode", "subscribe", "--scope", g.cgroup, user="nobody")
        self.addCleanup(child.close)
        line = harness.fields(child.wait_line("refused"))
        self.assertEqual(line, {"error": "CgroupNotWatchable", "errno": "13"})
        with self.assertRaises(pressure.Unreachable):
            pressure.Client(self.daemon.socket + ".none").status()

    def test_level_change_under_generator(self) -> None:
        g = self.generator()
        sub = self.client.subscribe([g.cgroup])
        self.assertEqual(sub.level(g.cgroup), pressure.Level.OK)
        g.start()
        event = None
        while event is None or not isinstance(event, pressure.LevelChange):
            event = sub.wait(90)
            self.assertIsNotNone(event, "no level change within 90 s under the generator")
        self.assertEqual(event.scope, pressure.ScopeRef.parse(g.cgroup))
        self.assertGreaterEqual(event.level, pressure.Level.LOW)
        self.assertEqual(event.previous, pressure.Level.OK)
        self.assertIsNotNone(event.reason)
        self.assertIsInstance(event.source, pressure.LevelSource)
        self.assertGreater(event.reclaim_target, 0)
        self.assertEqual(sub.level(g.cgroup), event.level)

    def test_wait_beside_a_dispatching_thread(self) -> None:
        """With the client dispatching on its own thread (as default_client() does), wait() is woken by
        that thread, not by polling the fd it already read."""
        g = self.generator()
        self.client.run_in_thread()
        sub = self.client.subscribe([g.cgroup])
        g.start()
        event = sub.wait(90)
        self.assertIsInstance(event, pressure.LevelChange, "no level change within 90 s under the generator")
        self.assertGreaterEqual(event.level, pressure.Level.LOW)
        sub.close()
        with self.assertRaises(pressure.PressureError):
            sub.wait(5)

    def test_memory_event(self) -> None:
        """A process in a watched group outgrows its limit: the kernel kills it, and the subscriber hears
        an oom_kill memory event for the group, whatever its min_level."""
        g = self.generator(16)
        sub = self.client.subscribe([g.cgroup], min_level=pressure.Level.CRITICAL)
        hog = subprocess.Popen([sys.executable, "-c", "b = bytearray(64 << 20)"], preexec_fn=lambda: g.join(os.getpid()),
                               stderr=subprocess.DEVNULL)
        self.assertEqual(hog.wait(60), -signal.SIGKILL)
        event = None
        while not isinstance(event, pressure.MemoryEvent):
            event = sub.wait(30)
            self.assertIsNotNone(event, "no memory event within 30 s of the kill")
        self.assertEqual((event.scope, event.kind), (pressure.ScopeRef.parse(g.cgroup), pressure.MemoryEventKind.OOM_KILL))
        self.assertGreaterEqual(event.count, 1)

    def test_asyncio(self) -> None:
        g = self.generator()

        async def run() -> pressure.LevelChange:
            st = await pressure.aio.status(self.daemon.socket)
            self.assertEqual(st.system.scope.type, pressure.ScopeType.SYSTEM)
            with self.assertRaises(pressure.MethodNotFound):
                await pressure.aio.call("NoSuchMethod", socket_path=self.daemon.socket)
            attached = pressure.aio.attach(self.client)
            try:
                sub = self.client.subscribe([g.cgroup])
                g.start()
                async for event in pressure.aio.events(sub):
                    if isinstance(event, pressure.LevelChange):
                        return event
            finally:
                attached.detach()
            raise AssertionError("the subscription ended")

        event = asyncio.run(asyncio.wait_for(run(), 90))
        self.assertGreaterEqual(event.level, pressure.Level.LOW)

    def test_shrinker_and_restart(self) -> None:
        items = list(range(1000))
        seen = []

        def count(sc: pressure.ShrinkControl):
            seen.append(sc)
            sc.nr_bytes = len(items) * 100
            return len(items) or pressure.EMPTY

        def scan(sc: pressure.ShrinkControl):
            seen.append(sc)
            n = min(sc.nr_to_scan, len(items))
            del items[:n]
            sc.nr_bytes = n * 100
            return n

        states = []
        up = threading.Event()
        self.client.on_connection(lambda connected: (states.append(connected), connected and up.set()))
        s = self.client.add_shrinker("py-shrinker", count, scan, numa_aware=True)
        self.client.run_in_thread()
        self.assertTrue(self.client.wait_registered(10))
        self.assertTrue(up.wait(10))
        results = self.client.shrink(10, shrinker=s.id)
        self.assertEqual([(r.name, r.freed, r.bytes_freed) for r in results], [("py-shrinker", 10, 1000)])
        self.assertEqual(len(items), 990)
        sc = [x for x in seen if x.op is pressure.ShrinkOp.SCAN][0]
        self.assertEqual((sc.nr_to_scan, sc.scope_type, sc.level, sc.cgroup), (10, pressure.ScopeType.SYSTEM,
                                                                               pressure.Level.OK, "/"))
        self.assertGreater(sc.deadline, 0)
        dry = self.client.shrink(shrinker=s.id, dry_run=True)
        self.assertEqual(dry[0].count, 990)

        # The daemon restarts: the client hears it go and come back, and registers again.
        up.clear()
        self.daemon.restart()
        self.assertTrue(up.wait(30), "the client did not register again")
        self.assertEqual(states[-2:], [False, True])
        mine = [x for x in self.client.call("ListShrinkers")["shrinkers"] if x["pid"] == os.getpid()]
        self.assertEqual([x["name"] for x in mine], ["py-shrinker"])
        self.assertEqual(self.client.shrink(5, shrinker=s.id)[0].freed, 5)
        s.remove()
        mine = [x for x in self.client.call("ListShrinkers")["shrinkers"] if x["pid"] == os.getpid()]
        self.assertEqual(mine, [])

    def test_selectors(self) -> None:
        """The client in a selectors loop: its fd says when to dispatch; a scan asked from another thread
        is answered by the loop."""
        items = list(range(10))

        def scan(sc: pressure.ShrinkControl):
            n = min(sc.nr_to_scan, len(items))
            del items[:n]
            return n

        s = self.client.add_shrinker("py-selectors", lambda sc: len(items) or pressure.EMPTY, scan)
        sel = selectors.DefaultSelector()
        sel.register(self.client, selectors.EVENT_READ)
        self.addCleanup(sel.close)
        deadline = time.monotonic() + 30
        while s.id is None and time.monotonic() < deadline:
            sel.select(self.client.timeout() or 1.0)
            self.client.dispatch()
        self.assertIsNotNone(s.id)
        results: list = []
        asker = threading.Thread(target=lambda: results.append(self.client.shrink(3, shrinker=s.id)))
        asker.start()
        while asker.is_alive() and time.monotonic() < deadline:
            sel.select(0.5)
            self.client.dispatch()
        asker.join(10)
        self.assertEqual([r.freed for r in results[0]], [3])
        self.assertEqual(len(items), 7)

    def test_refused_shrinker_raises(self) -> None:
        """A client has at most 64 shrinkers: the 65th is refused by name and dropped, the others stay."""
        shrinkers = [self.client.add_shrinker(f"s{i}", lambda sc: 1, lambda sc: 0) for i in range(64)]
        self.assertTrue(self.client.wait_registered(30))
        with self.assertRaises(pressure.InvalidParameter) as e:
            self.client.add_shrinker("one-too-many", lambda sc: 1, lambda sc: 0)
        self.assertEqual(e.exception.parameters.get("parameter"), "shrinker")
        self.assertTrue(self.client.wait_registered(1))
        self.assertEqual(len({s.id for s in shrinkers}), 64)

    def test_blocking_callback_holds_up_nobody(self) -> None:
        """A scan that blocks 10 s (the deadline is 3 s) holds up neither the daemon's pass nor the other
        shrinkers; its requests that wait meanwhile are not run once past their deadlines."""
        blocker = harness.Child(self.daemon, "--mode", "block", "--sleep", "10", "--entries", "100")
        self.addCleanup(blocker.close)
        other = harness.Child(self.daemon, "--mode", "lru", "--entries", "64", "--size", "4096")
        self.addCleanup(other.close)
        blocker.wait_line("ready")
        other_id = int(harness.fields(other.wait_line("ready"))["id"])
        results = self.client.shrink(8)
        by_name = {r.name: r for r in results}
        self.assertTrue(by_name["child-block"].timed_out)
        self.assertEqual(by_name["child-lru"].freed, 8)
        # The daemon goes on: the other's next scan is answered while the blocker still sleeps.
        self.assertEqual(self.client.shrink(4, shrinker=other_id)[0].freed, 4)
        self.assertEqual(other.ask("stats", "stats")["entries"], "52")


if __name__ == "__main__":
    unittest.main()
