#!/bin/bash
# pressurectl as a user meets it: exit codes, stdout and stderr, against the real daemon.
set -u
PRESSURED_BIN=${PRESSURED_BIN:-./pressured}
PRESSURECTL_BIN=${PRESSURECTL_BIN:-./pressurectl}

pass=0
fail=0
check() { # name, condition result
        if [ "$2" -eq 0 ]; then pass=$((pass + 1)); echo "ok - $1"; else fail=$((fail + 1)); echo "FAIL - $1"; fi
}

if [ ! -r /proc/pressure/memory ]; then
        echo "SKIP: no PSI on this kernel"
        exit 77
fi

dir=$(mktemp -d /tmp/pressurectl-test-XXXXXX)
chmod 755 "$dir"
daemon_pid=
watch_pid=
user_daemon_pid=
cleanup() {
        [ -n "$watch_pid" ] && kill "$watch_pid" 2>/dev/null && wait "$watch_pid" 2>/dev/null
        [ -n "$daemon_pid" ] && kill "$daemon_pid" 2>/dev/null && wait "$daemon_pid" 2>/dev/null
        [ -n "$user_daemon_pid" ] && kill "$user_daemon_pid" 2>/dev/null && wait "$user_daemon_pid" 2>/dev/null
        rm -rf "$dir"
}
trap cleanup EXIT
sock=$dir/io.pressured

# Unreachable: exit 1 and the message names the socket it tried.
"$PRESSURECTL_BIN" --socket "$sock" status >"$dir/out" 2>"$dir/err"
check "unreachable daemon exits 1" $([ $? -eq 1 ]; echo $?)
check "unreachable message names the socket" $(grep -q "$sock" "$dir/err"; echo $?)

# Usage errors: exit 2.
"$PRESSURECTL_BIN" >/dev/null 2>&1
check "no command exits 2" $([ $? -eq 2 ]; echo $?)
"$PRESSURECTL_BIN" frobnicate >/dev/null 2>&1
check "unknown command exits 2" $([ $? -eq 2 ]; echo $?)
"$PRESSURECTL_BIN" --min-level=ok watch >/dev/null 2>&1
check "bad --min-level exits 2" $([ $? -eq 2 ]; echo $?)
"$PRESSURECTL_BIN" --nr 0 shrink >/dev/null 2>&1
check "shrink --nr 0 exits 2" $([ $? -eq 2 ]; echo $?)
"$PRESSURECTL_BIN" --cgroup / --node 0 shrink >/dev/null 2>&1
check "shrink with --cgroup and --node exits 2" $([ $? -eq 2 ]; echo $?)
"$PRESSURECTL_BIN" shrinkers extra >/dev/null 2>&1
check "shrinkers with an argument exits 2" $([ $? -eq 2 ]; echo $?)

# A bad configuration: exit 2, and the message names the file and the line.
printf 'hold=2s\nlow=some 5s 2s\n' >"$dir/bad.conf"
"$PRESSURED_BIN" --config "$dir/bad.conf" --socket "$dir/unused" 2>"$dir/err"
check "daemon with a bad configuration exits 2" $([ $? -eq 2 ]; echo $?)
check "and names file:line" $(grep -q "$dir/bad.conf:2: low:" "$dir/err"; echo $?)
"$PRESSURED_BIN" --hold=soon --socket "$dir/unused" 2>"$dir/err"
check "daemon with a bad option exits 2" $([ $? -eq 2 ]; echo $?)

# Start the daemon and wait for its socket through its own readiness: a watch that connects.
"$PRESSURED_BIN" --config /dev/null --socket "$sock" 2>"$dir/daemon.log" &
daemon_pid=$!
for _ in $(seq 1 500); do [ -S "$sock" ] && break; sleep 0.01; done

"$PRESSURECTL_BIN" --socket "$sock" status >"$dir/out" 2>"$dir/err"
check "status exits 0" $?
check "status table has a header" $(head -1 "$dir/out" | grep -q '^SCOPE *LEVEL *SOURCE *SOME10'; echo $?)
check "status table has the system row" $(grep -q '^system ' "$dir/out"; echo $?)
check "status table has node 0" $(grep -q '^node:0 ' "$dir/out"; echo $?)

"$PRESSURECTL_BIN" --socket "$sock" --json status >"$dir/json"
check "status --json exits 0" $?
check "status --json is JSON with system, nodes, cgroups" \
        $(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["system"]["level"] in ("ok","low","medium","critical"); assert isinstance(d["nodes"], list) and isinstance(d["cgroups"], list)' "$dir/json"; echo $?)

"$PRESSURECTL_BIN" --socket "$sock" watch /no/such/cgroup >/dev/null 2>"$dir/err"
check "watch of a missing cgroup exits 3" $([ $? -eq 3 ]; echo $?)
check "and says so" $(grep -q "no such cgroup" "$dir/err"; echo $?)
"$PRESSURECTL_BIN" --socket "$sock" watch bogus >/dev/null 2>&1
check "watch of a malformed scope exits 2" $([ $? -eq 2 ]; echo $?)

# No shrinkers yet: an empty table with its header, an empty JSON list, and a shrink that scans nothing.
"$PRESSURECTL_BIN" --socket "$sock" shrinkers >"$dir/out"
check "shrinkers exits 0" $?
check "shrinkers table has a header" $(head -1 "$dir/out" | grep -q '^ID *NAME *PID'; echo $?)
"$PRESSURECTL_BIN" --socket "$sock" --json shrinkers >"$dir/json"
check "shrinkers --json is an empty list" $(python3 -c 'import json,sys; assert json.load(open(sys.argv[1]))["shrinkers"] == []' "$dir/json"; echo $?)
"$PRESSURECTL_BIN" --socket "$sock" shrink >"$dir/out"
check "shrink with nobody registered exits 0" $?
check "and says nothing was freed" $(grep -q "scanned 0, freed 0 objects" "$dir/out"; echo $?)

# Any user may ask: the socket is world-accessible.
if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null; then
        setpriv --reuid=nobody --regid=nogroup --clear-groups "$PRESSURECTL_BIN" --socket "$sock" status >"$dir/out" 2>&1
        check "status as an unprivileged user" $?

        # The daemon itself unprivileged: default socket under XDG_RUNTIME_DIR, found by default by the
        # client; cgroup pressure files are not writable to it, which is a clear error, not a crash.
        rt="$dir/runtime"
        mkdir -m 700 "$rt" && chown nobody:nogroup "$rt"
        XDG_RUNTIME_DIR=$rt setpriv --reuid=nobody --regid=nogroup --clear-groups \
                "$PRESSURED_BIN" --config /dev/null 2>"$dir/user-daemon.log" &
        user_daemon_pid=$!
        for _ in $(seq 1 500); do [ -S "$rt/pressured/io.pressured" ] && break; sleep 0.01; done
        XDG_RUNTIME_DIR=$rt setpriv --reuid=nobody --regid=nogroup --clear-groups "$PRESSURECTL_BIN" status >"$dir/out" 2>&1
        check "unprivileged daemon serves on \$XDG_RUNTIME_DIR/pressured/io.pressured" $?
        # Without a daemon of its own, a user is pointed at the system's.
        mkdir -p "$dir/empty-rt" && chmod 0777 "$dir/empty-rt"
        XDG_RUNTIME_DIR=$dir/empty-rt setpriv --reuid=nobody --regid=nogroup --clear-groups "$PRESSURECTL_BIN" status >"$dir/out" 2>&1
        check "a user without a daemon of its own is pointed at /run/pressured/io.pressured" \
                $([ $? -eq 0 ] || grep -q "/run/pressured/io.pressured" "$dir/out"; echo $?)
        XDG_RUNTIME_DIR=$rt setpriv --reuid=nobody --regid=nogroup --clear-groups "$PRESSURECTL_BIN" watch / >"$dir/out" 2>"$dir/err"
        rc=$?
        check "unprivileged daemon refuses a cgroup it cannot watch (exit 3)" $([ $rc -eq 3 ]; echo $?)
        check "and says why" $(grep -q "may not watch that cgroup" "$dir/err"; echo $?)
        kill "$user_daemon_pid"; wait "$user_daemon_pid"
        check "unprivileged daemon exits 0" $?
        user_daemon_pid=
        check "unprivileged daemon removed its socket" $([ ! -e "$rt/pressured/io.pressured" ]; echo $?)
fi

# Socket activation: the daemon serves on the socket it is handed and leaves the file to its owner.
if command -v systemd-socket-activate >/dev/null; then
        act="$dir/activated.sock"
        systemd-socket-activate -l "$act" "$PRESSURED_BIN" --config /dev/null 2>"$dir/act.log" &
        act_pid=$!
        for _ in $(seq 1 500); do [ -S "$act" ] && break; sleep 0.01; done
        "$PRESSURECTL_BIN" --socket "$act" status >"$dir/out" 2>&1
        check "socket-activated daemon answers" $?
        check "and says it uses the passed socket" $(grep -q "socket passed by the service manager" "$dir/act.log"; echo $?)
        kill "$act_pid"; wait "$act_pid"
        check "socket-activated daemon exits 0" $?
        check "and leaves the socket file to its owner" $([ -S "$act" ]; echo $?)
fi

# watch prints the current state at once, then runs until the daemon goes away: exit 1.
"$PRESSURECTL_BIN" --socket "$sock" --json watch system node:0 >"$dir/watch" 2>"$dir/watch.err" &
watch_pid=$!
for _ in $(seq 1 500); do [ "$(wc -l <"$dir/watch")" -ge 2 ] && break; sleep 0.01; done
check "watch --json prints the initial state of both scopes" \
        $(python3 -c 'import json,sys; l=[json.loads(x) for x in open(sys.argv[1])]; assert len(l)>=2 and all(x["initial"] for x in l[:2])' "$dir/watch"; echo $?)
[ "$fail" -eq 0 ] || { echo "--- watch output:"; cat "$dir/watch" "$dir/watch.err"; }
kill "$daemon_pid"; wait "$daemon_pid"
check "daemon exits 0 on SIGTERM" $?
daemon_pid=
wait "$watch_pid"
check "watch exits 1 when the daemon goes away" $([ $? -eq 1 ]; echo $?)
watch_pid=

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
