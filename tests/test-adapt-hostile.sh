#!/bin/bash
# pressure-adapt against servers that lie (tests/fake-resp.py) and against a state file others could
# write: a pid that is not the connection's peer registers nothing, over a Unix socket or TCP; an honest
# fake over TCP is served; replies of 3 MiB or deep arrays cost bounded CPU and memory; a slow server's
# commands end by the request's deadline; the state file's
# directory must be the adapter's user's alone, and a planted file is not read; a refused registration
# does not say "serving".
set -u
PRESSURED_BIN=${PRESSURED_BIN:-./pressured}
PRESSURECTL_BIN=${PRESSURECTL_BIN:-./pressurectl}
ADAPT_BIN=${PRESSURE_ADAPT_BIN:-./pressure-adapt}
FAKE=$(dirname "$0")/fake-resp.py

KIND=redis
. "$(dirname "$0")/adapt-common.sh"

dir=$(mktemp -d /tmp/pressured-adapt-hostile-XXXXXX)
chmod 755 "$dir"
daemon_pid=
pids=()
cleanup() {
        for p in "${pids[@]}"; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
        [ -n "$daemon_pid" ] && kill "$daemon_pid" 2>/dev/null && wait "$daemon_pid" 2>/dev/null
        rm -rf "$dir"
}
trap cleanup EXIT

sock=$dir/io.pressured
"$PRESSURED_BIN" --config /dev/null --socket "$sock" 2>"$dir/daemon.log" &
daemon_pid=$!
until_ok 10 test -S "$sock" || { echo "FAIL - the daemon did not start"; exit 1; }
mkdir -m 700 "$dir/state"
# Start a fake in mode $1 at address $2; its pid in $fake_pid, a TCP port in $fake_port.
start_fake() {
        # A new file each time: the old one's "ready" would pass the wait before this fake's shell has
        # truncated it (seen under load: the adapter then found no socket, or read the old port).
        rm -f "$dir/fake.out"
        python3 "$FAKE" "$1" "$2" >"$dir/fake.out" 2>&1 &
        fake_pid=$!
        pids+=("$fake_pid")
        until_ok 10 grep -q ready "$dir/fake.out"
        fake_port=$(head -n 1 "$dir/fake.out")
}
stop_fake() { kill "$fake_pid" 2>/dev/null; wait "$fake_pid" 2>/dev/null; rm -f "$dir/fake.sock"; }
# Run the adapter for at most $1 seconds; its status in $st, its output in $dir/adapt.err.
run_adapt() {
        local t=$1
        shift
        timeout "$t" "$ADAPT_BIN" --socket "$sock" --state-file="$dir/state/s" "$@" >"$dir/adapt.err" 2>&1
        st=$?
}

# 1. A liar names root's init, over a Unix socket and over TCP: refused at once, nothing registered.
start_fake liar "$dir/fake.sock"
run_adapt 10 redis "$dir/fake.sock"
check "a server naming pid 1 over a Unix socket: the adapter exits 1" $([ "$st" -eq 1 ]; echo $?)
check "and says why" $(grep -q "says it is pid 1, but that process is not the one at the other end" "$dir/adapt.err"; echo $?)
check "and nothing is registered for pid 1" $(! for_pid_is 1; echo $?)
stop_fake
start_fake liar 127.0.0.1:0
run_adapt 10 redis "127.0.0.1:$fake_port"
check "the same over TCP" $([ "$st" -eq 1 ] && grep -q "says it is pid 1" "$dir/adapt.err"; echo $?)
stop_fake

# 2. An honest fake over TCP holds the listening socket: served, for its own pid.
start_fake honest 127.0.0.1:0
rm -f "$dir/adapt.err" # the last adapter's lines must not pass this one's waits
"$ADAPT_BIN" --socket "$sock" --state-file="$dir/state/s" redis "127.0.0.1:$fake_port" >"$dir/adapt.err" 2>&1 &
adapt=$!
pids+=("$adapt")
check "an honest server over TCP is served for its own pid" $(until_ok 10 for_pid_is "$fake_pid"; echo $?)
check "and the adapter says serving once the daemon took it" $(until_ok 10 grep -q "pressure-adapt: serving 127.0.0.1:$fake_port (pid $fake_pid)" "$dir/adapt.err"; echo $?)
check "its lines carry a time stamp" $(grep -qE '^[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9:]{8}\.[0-9]{3} pressure-adapt: ' "$dir/adapt.err"; echo $?)
kill "$adapt"; wait "$adapt" 2>/dev/null
stop_fake

# 3. Replies past the bounds: a 3 MiB PING reply and nested arrays, each second. The adapter closes the
# connection and connects again with its back-off; what it costs is measured over 5 s.
for mode in bigping deep; do
        start_fake "$mode" "$dir/fake.sock"
        rm -f "$dir/adapt.err" # the last adapter's lines must not pass this one's waits
        "$ADAPT_BIN" --socket "$sock" --state-file="$dir/state/s" redis "$dir/fake.sock" >"$dir/adapt.err" 2>&1 &
        adapt=$!
        pids+=("$adapt")
        until_ok 10 for_pid_is "$fake_pid"
        until_ok 10 grep -q "lost $dir/fake.sock" "$dir/adapt.err"
        t0=$(awk '{ print $14 + $15 }' "/proc/$adapt/stat")
        sleep 5 # a measure over a span, not a wait for an event
        t1=$(awk '{ print $14 + $15 }' "/proc/$adapt/stat")
        rss=$(awk '/^VmHWM/ { print $2 }' "/proc/$adapt/status")
        echo "# $mode: $((t1 - t0)) ticks of CPU in 5 s, peak RSS $rss KiB"
        check "$mode: the adapter is refused the reply (the connection is dropped)" $(grep -q "lost $dir/fake.sock (Protocol error)" "$dir/adapt.err"; echo $?)
        check "$mode: under a tenth of a core" $([ $((t1 - t0)) -lt 50 ]; echo $?)
        check "$mode: peak RSS under 16 MiB" $([ "$rss" -lt 16384 ]; echo $?)
        kill "$adapt"; wait "$adapt" 2>/dev/null
        stop_fake
done

# 4. The state file: a directory others may write is refused; a planted file is not read.
start_fake honest "$dir/fake.sock"
timeout 10 "$ADAPT_BIN" --socket "$sock" --state-file=/tmp/pressure-adapt-planted redis "$dir/fake.sock" >"$dir/adapt.err" 2>&1
st=$?
check "a state file in /tmp (others may write there) is refused with status 2" $([ "$st" -eq 2 ]; echo $?)
check "and the message says so" $(grep -q "may be written by other users" "$dir/adapt.err"; echo $?)
printf 'redis %d 5\n' "$fake_pid" >"$dir/state/s"
chown nobody "$dir/state/s"
rm -f "$dir/adapt.err" # the last adapter's lines must not pass this one's waits
"$ADAPT_BIN" --socket "$sock" --state-file="$dir/state/s" -v redis "$dir/fake.sock" >"$dir/adapt.err" 2>&1 &
adapt=$!
pids+=("$adapt")
until_ok 10 for_pid_is "$fake_pid"
"$PRESSURECTL_BIN" --socket "$sock" shrink --shrinker "$(shrinker_id)" --nr 16 >/dev/null 2>&1
check "a state file owned by another user is not read" $(grep -q "is not a file of ours that only we may write: not read" "$dir/adapt.err" &&
        ! grep -q "was set by an adapter before us" "$dir/adapt.err"; echo $?)
kill "$adapt"; wait "$adapt" 2>/dev/null
stop_fake

# 5. A server that answers slowly: no command runs past the request's deadline, so the daemon has its
# answer in time (a scan's four commands at 450 ms each took 1.8 s before, past the 1 s deadline).
start_fake slow "$dir/fake.sock"
rm -f "$dir/adapt.err" # the last adapter's lines must not pass this one's waits
"$ADAPT_BIN" --socket "$sock" --state-file="$dir/state/s" redis "$dir/fake.sock" >"$dir/adapt.err" 2>&1 &
adapt=$!
pids+=("$adapt")
until_ok 10 for_pid_is "$fake_pid"
"$PRESSURECTL_BIN" --socket "$sock" shrink --shrinker "$(shrinker_id)" --nr 16 >/dev/null 2>&1
timeouts=$(shrinker_json | python3 -c 'import json, sys
print([s["timeouts"] for s in json.load(sys.stdin)["shrinkers"] if s["name"].startswith("redis:")][0])')
check "a slow server: the scan ends by the request's deadline (daemon's timeouts: $timeouts)" $([ "$timeouts" = 0 ]; echo $?)
[ "$timeouts" = 0 ] || { shrinker_json; sed 's/^/    /' "$dir/adapt.err" | tail -8; }
check "and the adapter says the command ran out of time" $(until_ok 5 grep -q "lost $dir/fake.sock (Connection timed out)" "$dir/adapt.err"; echo $?)
kill "$adapt"; wait "$adapt" 2>/dev/null
stop_fake

# 6. Run as nobody for root's server: the daemon refuses, and the adapter does not say "serving".
start_fake honest "$dir/fake.sock"
chmod 755 "$dir"
rm -f "$dir/adapt.err" # the last adapter's lines must not pass this one's waits
setpriv --reuid=nobody --regid=nogroup --clear-groups "$ADAPT_BIN" --socket "$sock" redis "$dir/fake.sock" >"$dir/adapt.err" 2>&1 &
adapt=$!
pids+=("$adapt")
until_ok 10 grep -q "pressured did not take this client's shrinkers (Operation not permitted)" "$dir/adapt.err"
said=$?
check "refused by the daemon: the library's refusal is said" $said
[ "$said" -eq 0 ] || sed 's/^/    /' "$dir/adapt.err" | head -8
check "and never \"serving\"" $(! grep -q "pressure-adapt: serving" "$dir/adapt.err"; echo $?)
check "without a runtime directory, a warning that there is no state file" $(grep -q "no state file" "$dir/adapt.err"; echo $?)
kill "$adapt"; wait "$adapt" 2>/dev/null
stop_fake
check "pressure-adapt --version" $([ "$("$ADAPT_BIN" --version)" = "pressure-adapt 1.3.0" ]; echo $?)

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
