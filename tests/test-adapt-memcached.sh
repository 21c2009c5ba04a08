#!/bin/bash
# pressure-adapt against a real memcached (Debian's 1.6, unpacked by build-aux/install-deps) and the real
# daemon: registered for memcached's pid, a Shrink lowers cache_memlimit and moves pages to the global pool
# so that memcached's resident memory falls, the limit rises back once quiet, memcached's own limit comes
# back when the adapter stops, a memcached without slab_reassign is refused with nothing changed, and a
# restarted memcached (and daemon) is served again.
set -u
PRESSURED_BIN=${PRESSURED_BIN:-./pressured}
PRESSURECTL_BIN=${PRESSURECTL_BIN:-./pressurectl}
ADAPT_BIN=${PRESSURE_ADAPT_BIN:-./pressure-adapt}

KIND=memcached
. "$(dirname "$0")/adapt-common.sh"

mc_bin=${MEMCACHED_BIN:-$(command -v memcached || echo /var/cache/pressured-peers/memcached/usr/bin/memcached)}
if [ ! -x "$mc_bin" ]; then
        echo "SKIP: no memcached (build-aux/install-deps unpacks Debian's into /var/cache/pressured-peers)"
        exit 77
fi
dir=$(mktemp -d /tmp/pressured-adapt-mc-test-XXXXXX)
daemon_pid=
adapt_pid=
mc_pid=
cleanup() {
        [ -n "$adapt_pid" ] && kill "$adapt_pid" 2>/dev/null && wait "$adapt_pid" 2>/dev/null
        [ -n "$mc_pid" ] && kill "$mc_pid" 2>/dev/null && wait "$mc_pid" 2>/dev/null
        [ -n "$daemon_pid" ] && kill "$daemon_pid" 2>/dev/null && wait "$daemon_pid" 2>/dev/null
        rm -rf "$dir"
        quiet_pressure_done
}
trap cleanup EXIT
quiet_pressure

sock=$dir/io.pressured
msock=$dir/memcached.sock
# One text command, its reply on stdout (a stats reply up to END).
mc() {
        python3 - "$msock" "$1" <<'PY'
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
cmd = sys.argv[2]
s.sendall(cmd.encode() + b"\r\n")
buf = b""
while not (buf.endswith(b"END\r\n") if cmd.startswith("stats") else buf.endswith(b"\r\n")):
    chunk = s.recv(1 << 16)
    if not chunk:
        break
    buf += chunk
sys.stdout.write(buf.decode())
PY
}
stat() { mc "${2:-stats}" | tr -d '\r' | sed -n "s/^STAT $1 //p"; }
limit() { stat limit_maxbytes; }
rss() { awk '{ print $2 * 4096 }' "/proc/$mc_pid/statm"; }
start_mc() { # extra arguments
        "$mc_bin" -u root -s "$msock" -a 0600 -m 64 "$@" >>"$dir/memcached.log" 2>&1 &
        mc_pid=$!
        until_ok 10 sh -c "[ -S '$msock' ]" && until_ok 10 sh -c "python3 -c 'import socket; s = socket.socket(socket.AF_UNIX); s.connect(\"$msock\")' 2>/dev/null"
}
# 15,000 values of 4,000 bytes: the 64 MiB fill up (64 pages of the 4 KB class).
fill() {
        python3 - "$msock" <<'PY'
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
val, buf = b"v" * 4000, b""
for i in range(15000):
    buf += b"set key%d 0 0 %d noreply\r\n%s\r\n" % (i, len(val), val)
    if len(buf) > 1 << 20:
        s.sendall(buf)
        buf = b""
s.sendall(buf + b"version\r\n")
got = b""
while not got.endswith(b"\r\n"):
    got += s.recv(4096)
PY
}

"$PRESSURED_BIN" --config /dev/null --socket "$sock" $quiet 2>"$dir/daemon.log" &
daemon_pid=$!
until_ok 10 test -S "$sock"
check "the daemon listens" $?
start_mc
check "memcached runs ($("$mc_bin" -V))" $?
fill
before_rss=$(rss)
check "memcached holds the values (total_malloced $(stat total_malloced "stats slabs"), RSS $before_rss)" \
        $([ "$(stat total_malloced "stats slabs")" -ge 60000000 ]; echo $?)

# Registered for memcached's pid.
"$ADAPT_BIN" -vv --socket "$sock" --floor 8M --quiet 2 memcached "$msock" 2>"$dir/adapt.log" &
adapt_pid=$!
until_ok 10 for_pid_is "$mc_pid"
check "the adapter's shrinker is registered for memcached's pid" $?

# A Shrink of 320 objects of 64 KiB (20 MiB): cache_memlimit lowered, pages freed, RSS down.
"$PRESSURECTL_BIN" --socket "$sock" shrink --shrinker "$(shrinker_id)" --nr 320 >"$dir/shrink.out" 2>&1
check "pressurectl shrink of the adapter's shrinker succeeds" $?
after_rss=$(rss)
cap=$(limit)
check "cache_memlimit lowered ($cap) and memcached's RSS fell by more than 16 MiB ($before_rss -> $after_rss)" \
        $([ "$cap" -lt 67108864 ] && [ $((before_rss - after_rss)) -gt 16777216 ]; echo $?)
check "the adapter moved pages and said what fell" \
        $(grep -q "pages to the global pool" "$dir/adapt.log" && grep -q "asked .* it holds [0-9]* less, RSS" "$dir/adapt.log"; echo $?)
check "the daemon measured the release" $(grep -q "1 client claimed to free" "$dir/daemon.log" || "$PRESSURECTL_BIN" --socket "$sock" shrinkers | grep -q memcached; echo $?)

# Quiet: the limit rises back to memcached's own, in steps.
limit_is() { [ "$(limit)" = "$1" ]; }
until_ok 60 limit_is 67108864
check "once quiet, cache_memlimit rises back to memcached's own (64 MiB)" $?
check "in steps" $(grep -q "quiet, cap raised to" "$dir/adapt.log"; echo $?)

# SIGTERM right after a shrink: memcached's own limit back, exactly.
"$PRESSURECTL_BIN" --socket "$sock" shrink --shrinker "$(shrinker_id)" --nr 64 >/dev/null 2>&1
cap=$(limit)
kill "$adapt_pid"; wait "$adapt_pid"
status=$?
adapt_pid=
check "SIGTERM after a shrink ($cap): exit 0, and memcached's own limit is back" \
        $([ "$status" = 0 ] && [ "$cap" -lt 67108864 ] && limit_is 67108864; echo $?)

# The daemon restarted, then memcached restarted, under the adapter: served again, for the new pid.
"$ADAPT_BIN" -v --socket "$sock" memcached "$msock" 2>"$dir/adapt2.log" &
adapt_pid=$!
until_ok 10 for_pid_is "$mc_pid"
kill "$daemon_pid"; wait "$daemon_pid"
"$PRESSURED_BIN" --config /dev/null --socket "$sock" $quiet 2>>"$dir/daemon.log" &
daemon_pid=$!
until_ok 30 for_pid_is "$mc_pid"
check "pressured restarted: registered again, for memcached's pid" $?
old_pid=$mc_pid
kill "$mc_pid"; wait "$mc_pid" 2>/dev/null
mc_pid=
start_mc
until_ok 60 for_pid_is "$mc_pid"
check "memcached restarted (pid $old_pid -> $mc_pid): registered for the new one" $?
kill "$adapt_pid"; wait "$adapt_pid"
adapt_pid=

# Without slab_reassign a lower limit frees nothing: refused, nothing changed.
kill "$mc_pid"; wait "$mc_pid" 2>/dev/null
start_mc -o no_slab_reassign
"$ADAPT_BIN" --socket "$sock" memcached "$msock" 2>"$dir/noreassign.log"
status=$?
check "no slab_reassign: exit 1, says why, changed nothing" \
        $([ "$status" = 1 ] && grep -q "runs without slab_reassign" "$dir/noreassign.log" && limit_is 67108864; echo $?)

# Bad input.
echo secret >"$dir/password"
"$ADAPT_BIN" --socket "$sock" --password-file "$dir/password" memcached "$msock" 2>"$dir/pw.log"
check "a password for memcached: exit 2, not printed" $([ $? = 2 ] && ! grep -q secret "$dir/pw.log"; echo $?)
"$ADAPT_BIN" --socket "$sock" memcached "$dir/nothing.sock" 2>"$dir/absent.log"
check "no server at the address: exit 1, said" $([ $? = 1 ] && grep -q "cannot reach memcached at" "$dir/absent.log"; echo $?)

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
