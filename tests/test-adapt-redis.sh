#!/bin/bash
# pressure-adapt against a real Redis (Debian's, installed by build-aux/install-deps) and the real daemon:
# it registers for Redis's pid, a Shrink lowers maxmemory and Redis evicts, the cap rises back once
# quiet, Redis's own setting comes back when the adapter stops, a noeviction Redis and a wrong password
# are refused with nothing changed (volatile-* too), and a restarted Redis is served again.
set -u
PRESSURED_BIN=${PRESSURED_BIN:-./pressured}
PRESSURECTL_BIN=${PRESSURECTL_BIN:-./pressurectl}
ADAPT_BIN=${PRESSURE_ADAPT_BIN:-./pressure-adapt}

KIND=redis
. "$(dirname "$0")/adapt-common.sh"

# Debian ships the server binary in redis-tools as redis-check-rdb; it is the server when called so.
redis_bin=$(command -v redis-server || true)
dir=$(mktemp -d /tmp/pressured-adapt-test-XXXXXX)
if [ -z "$redis_bin" ] && [ -x /usr/bin/redis-check-rdb ]; then
        ln -s /usr/bin/redis-check-rdb "$dir/redis-server"
        redis_bin=$dir/redis-server
fi
if [ -z "$redis_bin" ] || ! command -v redis-cli >/dev/null; then
        echo "SKIP: no redis-server (build-aux/install-deps installs redis-tools)"
        rm -rf "$dir"
        exit 77
fi
daemon_pid=
adapt_pid=
redis_pid=
load_pid=
cleanup() {
        [ -n "$load_pid" ] && kill "$load_pid" 2>/dev/null && wait "$load_pid" 2>/dev/null
        [ -n "$adapt_pid" ] && kill "$adapt_pid" 2>/dev/null && wait "$adapt_pid" 2>/dev/null
        [ -n "$redis_pid" ] && kill "$redis_pid" 2>/dev/null && wait "$redis_pid" 2>/dev/null
        [ -n "$daemon_pid" ] && kill "$daemon_pid" 2>/dev/null && wait "$daemon_pid" 2>/dev/null
        rm -rf "$dir"
        quiet_pressure_done
}
trap cleanup EXIT
quiet_pressure

sock=$dir/io.pressured
rsock=$dir/redis.sock
rcli() { redis-cli -s "$rsock" "$@"; }
start_redis() { # extra arguments
        "$redis_bin" --port 0 --unixsocket "$rsock" --save '' --appendonly no --maxmemory-policy allkeys-lru "$@" \
                >>"$dir/redis.log" 2>&1 &
        redis_pid=$!
        until_ok 10 sh -c "redis-cli -s '$rsock' ping 2>/dev/null | grep -q PONG"
}
# 15,000 values of 4,000 bytes: about 63 MB of used_memory.
fill() {
        python3 - "$rsock" <<'EOF'
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
val, buf = b"v" * 4000, b""
for i in range(15000):
    k = b"key%d" % i
    buf += b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (len(k), k, len(val), val)
    if len(buf) > 1 << 20:
        s.sendall(buf)
        buf = b""
s.sendall(buf + b"*1\r\n$4\r\nPING\r\n")
got = b""
while not got.endswith(b"+PONG\r\n"):
    got += s.recv(1 << 20)
EOF
}
used() { rcli info memory | tr -d '\r' | sed -n 's/^used_memory://p'; }
maxmemory() { rcli config get maxmemory | tail -n 1; }

"$PRESSURED_BIN" --config /dev/null --socket "$sock" $quiet 2>"$dir/daemon.log" &
daemon_pid=$!
until_ok 10 test -S "$sock"
check "the daemon listens" $?
start_redis
check "redis-server runs ($("$redis_bin" --version | cut -d' ' -f3))" $?
fill
before=$(used)
check "Redis holds the values (used_memory $before)" $([ "${before:-0}" -gt 50000000 ]; echo $?)

# Registered for Redis's pid.
"$ADAPT_BIN" -v --socket "$sock" --floor 4M --quiet 2 redis "$rsock" 2>"$dir/adapt.log" &
adapt_pid=$!
until_ok 10 for_pid_is "$redis_pid"
check "the adapter's shrinker is registered for Redis's pid" $?
check "pressurectl shrinkers shows it in FOR" \
        $("$PRESSURECTL_BIN" --socket "$sock" shrinkers | awk -v p="$redis_pid" '$2 ~ /^redis:/ && $4 == p { f = 1 } END { exit !f }'; echo $?)

# A Shrink of 160 objects of 64 KiB (10 MiB): maxmemory lowered, Redis evicted.
"$PRESSURECTL_BIN" --socket "$sock" shrink --shrinker "$(shrinker_id)" --nr 160 >"$dir/shrink.out" 2>&1
check "pressurectl shrink of the adapter's shrinker succeeds" $?
after=$(used)
cap=$(maxmemory)
check "maxmemory lowered ($cap) and Redis evicted (used_memory $before -> $after)" \
        $([ "$cap" -gt 0 ] && [ $((before - after)) -gt 8000000 ]; echo $?)
check "the adapter measured and said what it asked and what fell" $(grep -q "asked .* it holds [0-9]* less, RSS" "$dir/adapt.log"; echo $?)

# Quiet: the cap is raised back to Redis's own (none) step by step.
maxmemory_is() { [ "$(maxmemory)" = "$1" ]; }
until_ok 60 maxmemory_is 0
check "once quiet, maxmemory rises back to Redis's own (0)" $?
check "in steps" $(grep -q "quiet, cap raised to" "$dir/adapt.log"; echo $?)

# Stopped after a Shrink: Redis's own setting back, exactly.
rcli config set maxmemory 200000000 >/dev/null
kill "$adapt_pid"; wait "$adapt_pid"
"$ADAPT_BIN" -v --socket "$sock" --floor 4M --quiet 600 redis "$rsock" 2>"$dir/adapt2.log" &
adapt_pid=$!
until_ok 10 for_pid_is "$redis_pid"
"$PRESSURECTL_BIN" --socket "$sock" shrink --shrinker "$(shrinker_id)" --nr 80 >/dev/null 2>&1
cap=$(maxmemory)
check "a second adapter lowers a set maxmemory ($cap)" $([ "$cap" -lt 200000000 ]; echo $?)
kill "$adapt_pid"; wait "$adapt_pid"
status=$?
adapt_pid=
check "SIGTERM: exit 0" $([ "$status" = 0 ]; echo $?)
check "and Redis's own maxmemory is back, exactly" $([ "$(maxmemory)" = 200000000 ]; echo $?)

# Redis restarted under the adapter (and the daemon): served again, for the new pid.
"$ADAPT_BIN" -v --socket "$sock" --floor 4M redis "$rsock" 2>"$dir/adapt3.log" &
adapt_pid=$!
until_ok 10 for_pid_is "$redis_pid"

# The daemon restarted under the adapter: the library registers again, for Redis still.
kill "$daemon_pid"; wait "$daemon_pid"
"$PRESSURED_BIN" --config /dev/null --socket "$sock" $quiet 2>>"$dir/daemon.log" &
daemon_pid=$!
until_ok 30 for_pid_is "$redis_pid"
check "pressured restarted: the adapter's shrinker is registered again, for Redis's pid" $?
old_pid=$redis_pid
kill "$redis_pid"; wait "$redis_pid" 2>/dev/null
redis_pid=
start_redis
until_ok 60 for_pid_is "$redis_pid"
check "Redis restarted (pid $old_pid -> $redis_pid): the shrinker is registered for the new one" $?
kill "$adapt_pid"; wait "$adapt_pid"
adapt_pid=

# Redis stopped (SIGSTOP) while a Shrink asks: the adapter's commands run into their 700 ms deadline, the
# request fails instead of hanging, and once Redis runs again the adapter reconnects and serves.
fill
"$ADAPT_BIN" -v --socket "$sock" --floor 4M redis "$rsock" 2>"$dir/adapt6.log" &
adapt_pid=$!
until_ok 10 for_pid_is "$redis_pid"
kill -STOP "$redis_pid"
t0=$(date +%s)
"$PRESSURECTL_BIN" --socket "$sock" shrink --shrinker "$(shrinker_id)" --nr 16 >"$dir/stopped.out" 2>&1
t1=$(date +%s)
kill -CONT "$redis_pid"
check "a Shrink while Redis is stopped ends within the explicit budget ($((t1 - t0)) s)" $([ $((t1 - t0)) -le 11 ]; echo $?)
check "the adapter says it lost Redis to the deadline" $(until_ok 5 grep -q "lost .* (Connection timed out)" "$dir/adapt6.log"; echo $?)
check "Redis running again: the next Shrink is served" $(until_ok 40 sh -c "'$PRESSURECTL_BIN' --socket '$sock' shrink --shrinker $(shrinker_id) --nr 16 2>/dev/null | grep -q 'freed [1-9]'"; echo $?)
kill "$adapt_pid"; wait "$adapt_pid"
adapt_pid=
rcli config set maxmemory 0 >/dev/null

# The adapter killed under load (no restore is possible) and started again: it finds in its state file
# that the cap in force was its predecessor's, serves on, and gives Redis its own setting back.
"$KV_ZIPF_BIN" "redis:$rsock" 8 20000 4000 7 0 >"$dir/load.out" 2>"$dir/load.err" &
load_pid=$!
"$ADAPT_BIN" -v --socket "$sock" --floor 4M --state-file "$dir/state" redis "$rsock" 2>"$dir/adapt4.log" &
adapt_pid=$!
until_ok 10 for_pid_is "$redis_pid"
"$PRESSURECTL_BIN" --socket "$sock" shrink --shrinker "$(shrinker_id)" --nr 80 >/dev/null 2>&1
cap=$(maxmemory)
check "under load, a shrink sets a cap ($cap) and the state file keeps Redis's own" \
        $([ "$cap" -gt 0 ] && grep -q "^redis $redis_pid 0$" "$dir/state"; echo $?)
kill -9 "$adapt_pid"; wait "$adapt_pid" 2>/dev/null
adapt_pid=
check "killed: the cap stays in Redis" $([ "$(maxmemory)" = "$cap" ]; echo $?)
"$ADAPT_BIN" -v --socket "$sock" --floor 4M --state-file "$dir/state" redis "$rsock" 2>"$dir/adapt5.log" &
adapt_pid=$!
until_ok 10 for_pid_is "$redis_pid"
check "started again: registered for Redis" $?
check "and knows the cap was its predecessor's, Redis's own 0" \
        $(grep -q "was set by an adapter before us; its own is 0" "$dir/adapt5.log"; echo $?)
kill "$adapt_pid"; wait "$adapt_pid"
adapt_pid=
check "stopped: Redis's own maxmemory (0) is back, and the state file is gone" \
        $([ "$(maxmemory)" = 0 ] && [ ! -e "$dir/state" ]; echo $?)
wait "$load_pid"
load_pid=
check "the load never lost Redis ($(cut -d' ' -f1-3 "$dir/load.out"))" $(grep -q "^survived" "$dir/load.out"; echo $?)

# A noeviction Redis: refused, and nothing changed.
rcli config set maxmemory-policy noeviction >/dev/null
rcli config set maxmemory 0 >/dev/null
"$ADAPT_BIN" --socket "$sock" redis "$rsock" 2>"$dir/noevict.log"
status=$?
check "noeviction: exit 1" $([ "$status" = 1 ]; echo $?)
check "and says why" $(grep -q "maxmemory-policy noeviction" "$dir/noevict.log"; echo $?)
check "and changed nothing" $([ "$(maxmemory)" = 0 ] && [ "$(rcli config get maxmemory-policy | tail -n 1)" = noeviction ]; echo $?)
rcli config set maxmemory-policy volatile-lru >/dev/null
"$ADAPT_BIN" --socket "$sock" redis "$rsock" 2>/dev/null
status=$?
check "volatile-lru: refused too (it would fail writes once the keys with a TTL are gone)" $([ "$status" = 1 ]; echo $?)
rcli config set maxmemory-policy allkeys-lru >/dev/null

# A wrong password: refused, and the password is not printed.
rcli config set requirepass right-one >/dev/null
echo wrong-one >"$dir/password"
"$ADAPT_BIN" --socket "$sock" --password-file "$dir/password" redis "$rsock" 2>"$dir/auth.log"
status=$?
check "a wrong password: exit 1" $([ "$status" = 1 ]; echo $?)
check "named as refused, the password itself not printed" \
        $(grep -q "refused the password from" "$dir/auth.log" && ! grep -q wrong-one "$dir/auth.log"; echo $?)
echo right-one >"$dir/password"
"$ADAPT_BIN" --socket "$sock" --password-file "$dir/password" redis "$rsock" 2>"$dir/auth2.log" &
adapt_pid=$!
until_ok 10 for_pid_is "$redis_pid"
check "the right password: registered" $?

# Bad arguments.
"$ADAPT_BIN" mysql "$rsock" 2>/dev/null
check "an unknown server kind: exit 2" $([ $? = 2 ]; echo $?)
"$ADAPT_BIN" --floor lots redis "$rsock" 2>/dev/null
check "a bad --floor: exit 2" $([ $? = 2 ]; echo $?)

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
