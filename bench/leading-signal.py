#!/usr/bin/env python3
# Does a neighbour's file working set show refaults (or the group page out) before the group stalls, as a
# cache grows into it? Samples a running kvcache-bench group every 100 ms: the v2 `some` stall total and the
# memory.stat counters (v1 or v2) by name, then prints, for each onset of stall (over 1 ms/s after a quiet
# second), how long before it refaults and page-outs had risen. Usage: leading-signal.py SECONDS
# (start it, then `KVCACHE_BENCH_ONLY=unbounded KVCACHE_BENCH_WORKLOAD=zipf99 bench/run kvcache`).
import glob, os, sys, time

def find_group():
    for _ in range(600):
        for d in glob.glob("/sys/fs/cgroup/unified/pressured-test-*") + glob.glob("/sys/fs/cgroup/pressured-test-*"):
            if os.path.exists(d + "/memory.pressure") and os.path.exists(d + "/cgroup.procs"):
                with open(d + "/cgroup.procs") as f:
                    if f.read().strip():
                        name = os.path.basename(d)
                        stat = "/sys/fs/cgroup/memory/" + name + "/memory.stat"
                        return d + "/memory.pressure", stat if os.path.exists(stat) else d + "/memory.stat"
        time.sleep(0.1)
    sys.exit("no group")

def stat(path):
    out = {}
    with open(path) as f:
        for line in f:
            k, v = line.split()
            out[k] = int(v)
    return out

def some_total(path):
    with open(path) as f:
        return int(f.readline().split("total=")[1])

seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 30
pressure, mstat = find_group()
rows = []
t0 = time.monotonic()
while time.monotonic() - t0 < seconds:
    try:
        s = stat(mstat)
        rows.append((time.monotonic() - t0, some_total(pressure), s.get("workingset_refault_file", 0),
                     s.get("pgpgout", s.get("pgscan", 0)), s.get("rss", s.get("anon", 0))))
    except (OSError, ValueError, IndexError):
        break
    time.sleep(0.1)

# per-100ms rates
print("t_s stall_ms_per_s refaults_per_s pageouts_per_s anon_mib")
prev = None
series = []
for r in rows:
    if prev:
        dt = r[0] - prev[0]
        series.append((r[0], (r[1] - prev[1]) / 1000 / dt, (r[2] - prev[2]) / dt, (r[3] - prev[3]) / dt, r[4] / 2**20))
    prev = r
for x in series:
    print("%.1f %.1f %.0f %.0f %.1f" % x)
# onsets: stall over 1 ms/s after 1 s under it; look back 3 s for the first rise of each counter
print("\nonsets (stall over 1 ms/s after a quiet second): lead of refaults / page-outs over their quiet level")
for i, x in enumerate(series):
    if x[1] > 1 and i >= 10 and all(y[1] <= 1 for y in series[i - 10:i]):
        lead = {}
        for col, name in ((2, "refaults"), (3, "pageouts")):
            base = sorted(y[col] for y in series[max(0, i - 30):i])[len(series[max(0, i - 30):i]) // 2] if i > 0 else 0
            j = i
            while j > max(0, i - 30) and series[j - 1][col] > 2 * base + 100:
                j -= 1
            lead[name] = x[0] - series[j][0]
        print("stall onset at %.1f s (%.0f ms/s, anon %.1f MiB): refaults rose %.1f s before, page-outs %.1f s before"
              % (x[0], x[1], x[4], lead["refaults"], lead["pageouts"]))
