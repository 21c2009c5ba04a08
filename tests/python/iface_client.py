# SPDX-License-Identifier: MIT
"""Every call the Python client writes, once, on the socket given (test-interface's relay holds each to
the IDL's inputs): GetStatus, GetConfiguration, Subscribe, Serve, AddShrinker, Shrink, Answer,
RemoveShrinker. Says "done" when all went through."""

import sys

import pressure

client = pressure.Client(sys.argv[1])
client.status()
client.configuration()
client.subscribe(["system"], min_level="medium")
items = list(range(100))


def count(sc):
    sc.nr_bytes = len(items) * 10
    sc.value = 2.5
    return len(items)


def scan(sc):
    del items[: sc.nr_to_scan]
    sc.nr_bytes = sc.nr_to_scan * 10
    sc.nr_scanned = sc.nr_to_scan + 1
    return sc.nr_to_scan


a = client.add_shrinker("iface-a", count, scan, numa_aware=True, seeks=2, batch=16, on_limit=lambda s, b: None)
assert client.wait_registered(10)
b = client.add_shrinker("iface-b", count, scan, memcg_aware=True)  # AddShrinker
assert client.wait_registered(10)
client.run_in_thread()
results = client.shrink(4, shrinker=a.id)  # answered with Answer by the dispatching thread
assert results[0].freed == 4, results
assert client.shrink(shrinker=a.id, dry_run=True)[0].count == 96
b.remove()  # RemoveShrinker, one way
client.status()  # after it on the same connection: the relay has seen the removal by then
client.close()
print("done", flush=True)
