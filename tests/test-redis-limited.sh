#!/bin/sh
# An unmodified Redis in a cgroup with a 128 MiB limit and no maxmemory, under a load of GETs that SET on
# a miss over more keys than fit (bench/redis-bench.c, 30 s per policy): without the daemon the OOM
# killer takes Redis; with pressured and pressure-adapt beside it Redis survives (capped at the growth
# limits the daemon tells the adapter as it fills its group), its maxmemory rises again once the load
# ends or stands at the daemon's limit (the room under the group's headroom, which Redis has filled), and
# Redis's own setting is back when the adapter stops. The hit rates are
# printed; they are figures for docs/performance.md, not assertions.
set -u
build=${1:?usage: test-redis-limited.sh BUILD_DIR}
out=$(mktemp /tmp/pressured-redis-limited-XXXXXX)
trap 'rm -f "$out"' EXIT
cd "$build/tests" || exit 1
REDIS_BENCH_ONLY="none adapter" ./redis-bench "$build" 30 >"$out" 2>&1
status=$?
cat "$out"
[ $status = 77 ] && exit 77
fails=0
check() { if [ "$2" -eq 0 ]; then echo "ok - $1"; else echo "FAIL - $1"; fails=$((fails + 1)); fi; }
check "redis-bench ran" $status
check "without the daemon, Redis is OOM-killed" $(grep -q "^| none  *| killed at" "$out"; echo $?)
check "with pressure-adapt, Redis survives" $(grep -q "^| adapter  *| survived" "$out"; echo $?)
check "the adapter was told growth limits (Redis capped at the regulator's limit as it filled)" \
        $(grep -Eq "^adapter: told [1-9][0-9]* growth limits" "$out"; echo $?)
check "after the load maxmemory rose again (or stood at the daemon's growth limit), and Redis's own came back when the adapter stopped" \
        $(grep "^| adapter" "$out" | grep -Eq "(rose again|at the daemon's limit); restored"; echo $?)
[ $fails = 0 ]
