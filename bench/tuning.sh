#!/bin/bash
# The figures behind docs/tuning.md: one cgroup under the suite's pressure generator (a writer under a
# 16 MiB limit, 20-50% "some" stall) watched by pressured with each profile's thresholds for a while;
# how soon the first warning came, how many level changes were sent, and the share of the time spent at
# each level. With MODE=bursts the writer runs 2 s in every 10 (SIGSTOP/SIGCONT), as a desktop's
# bursts do: how often each profile's level flaps. Usage: [MODE=steady|bursts] bench/tuning.sh
# [BUILD_DIR [SECONDS]]. Needs root, PSI and cgroup v2.
set -eu
BUILD=${1:-build}
SECONDS_PER_RUN=${2:-60}
MODE=${MODE:-steady}
burst_pid=
dir=$(mktemp -d /tmp/pressured-tuning-XXXXXX)
daemon_pid=
gen_pid=
cleanup() {
        [ -n "$burst_pid" ] && kill "$burst_pid" 2>/dev/null && wait "$burst_pid" 2>/dev/null
        [ -n "$gen_pid" ] && kill "$gen_pid" 2>/dev/null && wait "$gen_pid" 2>/dev/null
        [ -n "$daemon_pid" ] && kill "$daemon_pid" 2>/dev/null && wait "$daemon_pid" 2>/dev/null
        rm -rf "$dir"
}
trap cleanup EXIT

profile() { # name, configuration text
        printf '[pressured]\nlow_memory_monitor=no\n%s\n' "$2" >"$dir/$1.conf"
}
profile defaults ""
profile desktop "hold=10s"
profile server "low=some 500ms 10s
medium=some 2s 10s
critical=full 3s 10s
hold=30s"
profile container-host "low=some 1s 10s
medium=some 3s 10s
critical=full 4s 10s
hold=60s
headroom_low=10%
headroom_medium=5%
headroom_critical=2%"
profile oomd-like "low=some 6s 10s
medium=some 6s 10s
critical=full 6s 10s
hold=30s"

echo "mode $MODE, $SECONDS_PER_RUN s per profile"
printf '%-16s %-34s %12s %8s %8s %8s %8s %8s\n' profile thresholds "first-warn-s" changes "ok%" "low%" "medium%" "critical%"
for p in defaults desktop server container-host oomd-like; do
        sock=$dir/$p.sock
        "$BUILD/pressured" --config "$dir/$p.conf" --socket "$sock" 2>"$dir/$p.log" &
        daemon_pid=$!
        for _ in $(seq 1 500); do [ -S "$sock" ] && break; sleep 0.01; done
        "$BUILD/tests/pressure-gen" "$dir" 16 >"$dir/gen.out" &
        gen_pid=$!
        for _ in $(seq 1 500); do [ -s "$dir/gen.out" ] && break; sleep 0.01; done
        cg=$(head -1 "$dir/gen.out")
        if [ "$MODE" = bursts ]; then
                (while sleep 2; do pkill -STOP -P "$gen_pid"; sleep 8; pkill -CONT -P "$gen_pid"; done) &
                burst_pid=$!
        fi
        timeout "$SECONDS_PER_RUN" "$BUILD/pressurectl" --socket "$sock" --json watch "$cg" >"$dir/$p.json" || true
        if [ -n "$burst_pid" ]; then
                kill "$burst_pid"; wait "$burst_pid" 2>/dev/null || true
                burst_pid=
                pkill -CONT -P "$gen_pid" || true
        fi
        kill "$gen_pid"; wait "$gen_pid" 2>/dev/null || true
        gen_pid=
        kill "$daemon_pid"; wait "$daemon_pid" || true
        daemon_pid=
        python3 - "$dir/$p.json" "$p" "$SECONDS_PER_RUN" "$(grep -v '^\[\|^low_memory\|^$' "$dir/$p.conf" | tr '\n' ';')" <<'PY'
import json, sys, datetime
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
name, total, conf = sys.argv[2], float(sys.argv[3]), sys.argv[4] or "(defaults)"
def t(x): return datetime.datetime.fromisoformat(x["time"]).timestamp()
start = t(lines[0]); end = start + total
level, since = lines[0]["event"]["level"], start
spent = dict.fromkeys(["ok", "low", "medium", "critical"], 0.0)
first, changes = None, 0
for l in lines[1:]:
    if "event" not in l or l["initial"]:
        continue
    now = t(l); spent[level] += now - since
    level, since = l["event"]["level"], now; changes += 1
    if first is None and level != "ok": first = now - start
if first is None and lines[0]["event"]["level"] != "ok": first = 0.0
spent[level] += end - since
f = "-" if first is None else "%.1f" % first
print("%-16s %-34s %12s %8d %8.0f %8.0f %8.0f %8.0f" % (name, conf[:34], f, changes,
      *(100 * spent[k] / total for k in ["ok", "low", "medium", "critical"])))
PY
done
