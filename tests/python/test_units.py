# SPDX-License-Identifier: MIT
"""The Python client's parts without a daemon: strict decoding, answers saturated to what the daemon takes,
requests past their deadline not run, the LRU's order, shadow entries and value, lru_cache's semantics."""

from __future__ import annotations

import json
import os
import unittest

import pressure
from pressure import protocol
from pressure.client import Client, ShrinkControl, _answer, now_usec
from pressure.protocol import Level, Request, ShrinkOp

DOCS = os.path.join(os.environ.get("PRESSURED_SOURCE_ROOT", os.path.join(os.path.dirname(__file__), "..", "..")),
                    "docs", "protocol.md")


class DecodeTest(unittest.TestCase):
    def test_documented_replies_decode(self) -> None:
        """Every reply docs/protocol.md records decodes (GetStatus, GetConfiguration, Subscribe, Serve...)."""
        seen = set()
        with open(DOCS) as f:
            calls = []
            for line in f:
                line = line.rstrip("\n")
                i = line.find("-> {")
                if 0 <= i <= 2:
                    calls.append(json.loads(line[i + 3:]).get("method", "").rsplit(".", 1)[-1])
                i = line.find("<- {")
                if not 0 <= i <= 2:
                    continue
                msg = json.loads(line[i + 3:])
                params = msg.get("parameters") or {}
                if "error" in msg or not params:
                    continue
                for method, cls in protocol.REPLIES.items():
                    keys = {f for f in cls.__dataclass_fields__}
                    if set(params) <= keys and any(k in params for k in keys):
                        try:
                            protocol.decode(cls, params, method)
                            seen.add(method)
                        except pressure.ProtocolError:
                            pass
        self.assertLessEqual({"GetStatus", "GetConfiguration", "Subscribe", "Serve", "AddShrinker", "Shrink"}, seen)

    def test_strict(self) -> None:
        ok = {"scope": {"type": "system"}, "level": "low", "reclaim_target": 5, "since": 0, "future_field": 1}
        st = protocol.decode(protocol.ScopeState, ok)
        self.assertEqual((st.level, st.reclaim_target), (Level.LOW, 5))
        for bad in ({**ok, "level": "loud"}, {**ok, "reclaim_target": "5"}, {**ok, "reclaim_target": True},
                    {k: v for k, v in ok.items() if k != "since"}, {**ok, "scope": {"type": "galaxy"}},
                    {**ok, "pressure": {"full": None}}):
            with self.assertRaises(pressure.ProtocolError):
                protocol.decode(protocol.ScopeState, bad)

    def test_encode(self) -> None:
        spec = protocol.ShrinkerSpec(name="a", numa_aware=True)
        self.assertEqual(protocol.encode(spec), {"name": "a", "numa_aware": True})
        self.assertEqual(protocol.encode([pressure.ScopeRef.parse("node:1"), pressure.ScopeRef.parse("/a")]),
                         [{"type": "node", "node": 1}, {"type": "cgroup", "cgroup": "/a"}])
        self.assertEqual(protocol.encode(Level.MEDIUM), "medium")

    def test_errors_by_name(self) -> None:
        e = pressure.errors.from_reply("io.pressured.CgroupNotWatchable", {"cgroup": "/x", "errno": 13})
        self.assertIsInstance(e, pressure.CgroupNotWatchable)
        self.assertEqual(e.parameters["errno"], 13)
        e = pressure.errors.from_reply("io.pressured.SomethingNew", {})
        self.assertEqual(type(e), pressure.PressureError)


class AnswerTest(unittest.TestCase):
    def sc(self, op: ShrinkOp, nr: int = 0) -> ShrinkControl:
        return ShrinkControl(op=op, node=0, cgroup="/", priority=0, level=Level.LOW,
                             scope_type=pressure.ScopeType.SYSTEM, deadline=now_usec() + 10**6, nr_to_scan=nr)

    def test_saturated(self) -> None:
        sc = self.sc(ShrinkOp.COUNT)
        sc.value = float("inf")
        sc.nr_bytes = 2**70
        self.assertEqual(_answer(1, False, 2**70, sc), {"request": 1, "count": 2**63 - 1, "bytes": 2**63 - 1,
                                                        "value": 1e9})
        sc.value = float("nan")
        self.assertNotIn("value", _answer(1, False, 5, sc))
        self.assertEqual(_answer(2, False, pressure.EMPTY, sc), {"request": 2, "empty": True})
        scan = self.sc(ShrinkOp.SCAN, 10)
        self.assertEqual(_answer(3, True, pressure.STOP, scan), {"request": 3, "stop": True})
        scan.nr_scanned = 4
        self.assertEqual(_answer(4, True, -3, scan), {"request": 4, "freed": 0, "scanned": 4})

    def test_past_deadline_not_run(self) -> None:
        c = Client("/nonexistent")
        ran = []
        s = pressure.Shrinker(c, protocol.ShrinkerSpec(name="x"), lambda sc: ran.append(sc) or 1,
                              lambda sc: ran.append(sc) or 1, None)
        c._by_id[7] = s
        late = Request(id=1, shrinker=7, op=ShrinkOp.COUNT, node=0, cgroup="/", priority=0, deadline=now_usec() - 1)
        self.assertIsNone(c._run_request(late))
        self.assertEqual(ran, [])
        timely = Request(id=2, shrinker=7, op=ShrinkOp.COUNT, node=0, cgroup="/", priority=0,
                         deadline=now_usec() + 10**6)
        self.assertEqual(c._run_request(timely), {"request": 2, "count": 1})
        c.close()


class LRUTest(unittest.TestCase):
    def test_order_shadow_and_value(self) -> None:
        lru = pressure.LRU("t", register=False, sizeof=lambda v: 1000)
        for i in range(1000):
            lru[i] = i
        _ = lru[0]  # 0 is the most recently used now
        self.assertEqual(lru.evict(10), (10, 10000))
        self.assertIn(0, lru)
        self.assertNotIn(1, lru)
        self.assertEqual(lru.miss(1), 10)  # the first evicted: 10 evictions ago
        self.assertEqual(lru.miss(10), 1)  # the last evicted
        self.assertEqual(lru.miss(5000), 0)  # never here
        self.assertEqual(lru.stats()["shadow_hits"], 2)
        self.assertGreater(lru.value(), 0)
        # Past the last sixteenth: found while the shadows reach (an eighth of the list), but worth
        # nothing; further back not kept at all.
        cold = pressure.LRU("c", register=False, sizeof=lambda v: 1000)
        for i in range(2000):
            cold[i] = i
        cold.evict(1000)
        self.assertLessEqual(cold.stats()["shadow_entries"], 2000 // 8)
        self.assertEqual(cold.miss(0), 0)
        self.assertEqual(cold.miss(900), 100)  # 100 evictions ago: past the sixteenth of 1000 (62)
        self.assertEqual(cold.value(), 0)
        self.assertEqual(cold.miss(999), 1)
        self.assertGreater(cold.value(), 0)
        # The shadows of a long run stay within an eighth of the list.
        big = pressure.LRU("b", register=False, sizeof=lambda v: 1)
        for i in range(100000):
            big[i] = i
            if len(big) > 8000:
                big.evict(1)
        self.assertLessEqual(big.stats()["shadow_entries"], 1000)

    def test_limit_and_maxsize(self) -> None:
        lru = pressure.LRU("t", register=False, sizeof=lambda v: 100, maxsize=50)
        for i in range(60):
            lru[i] = i
        self.assertEqual(len(lru), 50)
        self.assertNotIn(0, lru)
        lru._on_limit(None, 2000)
        self.assertLessEqual(lru.bytes, 2000)
        self.assertIn(59, lru)

    def test_lru_cache_is_functools_like(self) -> None:
        calls = []

        import functools
        from pressure import cache as cache_mod

        orig = cache_mod.default_client
        cache_mod.default_client = lambda: FakeClient()
        try:
            @pressure.lru_cache(maxsize=2)
            def sq(x, y=1):
                calls.append(x)
                return x * x * y

            self.assertEqual([sq(2), sq(2), sq(3), sq(2, y=2), sq(2)], [4, 4, 9, 8, 4])
            self.assertEqual(calls, [2, 3, 2, 2])  # y=2 is another key; maxsize 2 dropped (2,)
            info = sq.cache_info()
            self.assertEqual((info.hits, info.misses, info.maxsize, info.currsize), (1, 4, 2, 2))
            self.assertIsInstance(info, functools._CacheInfo)
            sq.cache_clear()
            self.assertEqual(sq.cache_info().currsize, 0)
            self.assertEqual(sq.__name__, "sq")
        finally:
            cache_mod.default_client = orig


class GenerationsTest(unittest.TestCase):
    """lru_cache's hits are functools' own (the front); what the daemon's scans take is what was not used
    since the last aging, oldest first; what they take is gone from the front too."""

    def test_recently_used_stay(self) -> None:
        from pressure import cache as cache_mod

        orig = cache_mod.default_client
        cache_mod.default_client = lambda: FakeClient()
        try:
            calls = []

            @pressure.lru_cache()
            def f(x):
                calls.append(x)
                return x

            for i in range(256):  # aged once at 128: 0..127 are old
                f(i)
            self.assertEqual(f.cache._young, 128)
            for i in range(32):  # used again: young, through Python once
                f(i)
            for i in range(32):  # and again: the front's hits
                f(i)
            self.assertEqual(f.cache_info().hits, 64)
            self.assertEqual(len(calls), 256)
            freed, _ = f.cache.evict(128)
            self.assertEqual(freed, 128)
            # 32..127 went (old), then the front was cleared and 128..159 went: 0..31 and 160..255 stay.
            self.assertEqual(sorted(f.cache._d), list(range(32)) + list(range(160, 256)))
            f(40)  # an evicted one is computed again: the front does not serve it
            self.assertEqual(calls[-1], 40)
            f(200)  # one that stayed is not
            self.assertEqual(calls[-1], 40)
        finally:
            cache_mod.default_client = orig


class FakeClient:
    """Takes a shrinker and does nothing: for the decorator's semantics without a daemon."""

    def add_shrinker(self, *args, **kwargs):
        return None


class SchemaTest(unittest.TestCase):
    def test_schema_is_json(self) -> None:
        s = json.loads(json.dumps(protocol.schema()))
        self.assertEqual(s["types"]["Request"]["nr_to_scan"], "?int")
        self.assertEqual(s["replies"]["GetStatus"]["nodes"], "[]ScopeState")


if __name__ == "__main__":
    unittest.main()
