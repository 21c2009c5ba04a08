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
cgroup_made=
cleanup() {
        [ -n "$cgroup_made" ] && rmdir "$cgroup_made" 2>/dev/null
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
check "and says what to do" $(grep -q "Is it running? (systemctl start pressured.socket, or build-aux/run" "$dir/err"; echo $?)
check "--help names \$PRESSURED_SOCKET" $("$PRESSURECTL_BIN" --help | grep -q 'PRESSURED_SOCKET'; echo $?)

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
# shrink needs to be told how much: like the kernel's debugfs scan, no number, no scan.
"$PRESSURECTL_BIN" --socket "$dir/none" shrink >/dev/null 2>"$dir/err"
check "shrink without --nr, --all or --dry-run exits 2" $([ $? -eq 2 ]; echo $?)
check "and says what it needs" $(grep -q -- "--nr=N.*--all.*--dry-run" "$dir/err"; echo $?)
"$PRESSURECTL_BIN" --all --nr 5 shrink >/dev/null 2>&1
check "shrink with --all and --nr exits 2" $([ $? -eq 2 ]; echo $?)
# Options a command would ignore are refused.
"$PRESSURECTL_BIN" --min-level=critical status >/dev/null 2>"$dir/err"
check "status --min-level exits 2" $([ $? -eq 2 ]; echo $?)
check "and says it is for watch" $(grep -q -- "--min-level is for watch" "$dir/err"; echo $?)
"$PRESSURECTL_BIN" --exec true status >/dev/null 2>&1
check "status --exec exits 2" $([ $? -eq 2 ]; echo $?)
"$PRESSURECTL_BIN" --nr 3 status >/dev/null 2>&1
check "status --nr exits 2" $([ $? -eq 2 ]; echo $?)
"$PRESSURECTL_BIN" config extra >/dev/null 2>&1
check "config with an argument exits 2" $([ $? -eq 2 ]; echo $?)
# One version for the daemon, the tool, the library and pkg-config.
version=$("$PRESSURECTL_BIN" --version)
check "pressurectl --version exits 0 and says 1.3.0" $([ "$version" = "pressurectl 1.3.0" ]; echo $?)
check "pressured --version says the same" $([ "$("$PRESSURED_BIN" --version)" = "pressured 1.3.0" ]; echo $?)
# A bad option value names the option as it was written.
"$PRESSURED_BIN" --sample-interval=0 --socket "$dir/unused" 2>"$dir/err"
check "pressured --sample-interval=0 exits 2" $([ $? -eq 2 ]; echo $?)
check "and names --sample-interval" $(grep -q -- "--sample-interval must be 10ms..60s" "$dir/err"; echo $?)
# systemd's time spans, and a warning for a key set twice.
printf '[pressured]\nlow_memory_monitor_repeat=1h\nhold=2s\nhold=3s  # the second wins\n[Unit]\nDescription=x\n' >"$dir/spans.conf"
# Drop-ins beside it: spans.conf.d/*.conf in lexical order, later lines winning; other names ignored.
mkdir "$dir/spans.conf.d"
printf 'regulate_budget=1ms\nregulate_cgroup=/b.slice 4ms\n' >"$dir/spans.conf.d/40-base.conf"
printf '[pressured]\nregulate_budget=3ms\n' >"$dir/spans.conf.d/50-svc.conf"
printf 'regulate_budget=9ms\n' >"$dir/spans.conf.d/60-old.conf.dpkg-old"
"$PRESSURED_BIN" --config "$dir/spans.conf" --socket "$dir/spans.sock" 2>"$dir/spans.log" &
spans_pid=$!
for _ in $(seq 1 500); do [ -S "$dir/spans.sock" ] && break; sleep 0.01; done
check "a file with 1h, an inline comment and a foreign section starts" $([ -S "$dir/spans.sock" ]; echo $?)
"$PRESSURECTL_BIN" --socket "$dir/spans.sock" --json config >"$dir/json"
check "and the second hold is in effect" \
        $(python3 -c 'import json,sys; assert json.load(open(sys.argv[1]))["hold_usec"] == 3000000' "$dir/json"; echo $?)
check "the drop-ins apply in order: regulate_budget=3ms from 50-svc.conf, a list key from 40-base.conf" \
        $(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["regulate_budget_usec"] == 3000; assert d["regulate_cgroups"] == [{"pattern": "/b.slice", "budget_usec": 4000}]' "$dir/json"; echo $?)
"$PRESSURECTL_BIN" --socket "$dir/spans.sock" config >"$dir/out"
check "and pressurectl config says 3 ms" $(grep -q "under 3.00 ms/s" "$dir/out"; echo $?)
rm -r "$dir/spans.conf.d"
check "the duplicate is warned about with its lines" $(grep -q "spans.conf:4: hold is also set on line 3; this line wins" "$dir/spans.log"; echo $?)
check "the foreign section is warned about" $(grep -q "spans.conf:5: unknown section \[Unit\], its keys are ignored" "$dir/spans.log"; echo $?)
check "log lines carry a timestamp off the journal" $(grep -qE '^[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9:]{8}\.[0-9]{3} pressured: ' "$dir/spans.log"; echo $?)
# A reload names what changed but needs a restart.
printf '[pressured]\nhold=5s\nlock_memory=no\nregulate_budget=5ms\nregulate_cgroup=/a.slice off\nreclaim_cgroup=/pressured-test-none/*.service\n' >"$dir/spans.conf"
kill -HUP "$spans_pid"
for _ in $(seq 1 500); do grep -q "Configuration reloaded" "$dir/spans.log" && break; sleep 0.01; done
check "reload names the keys that need a restart" \
        $(grep -q "Configuration reloaded, but a change of lock_memory takes effect only when pressured restarts" "$dir/spans.log"; echo $?)
"$PRESSURECTL_BIN" --socket "$dir/spans.sock" --json config >"$dir/json"
check "and the rest is taken" $(python3 -c 'import json,sys; assert json.load(open(sys.argv[1]))["hold_usec"] == 5000000' "$dir/json"; echo $?)
check "GetConfiguration has the regulator's budget and its overrides" \
        $(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["regulate_budget_usec"] == 5000; assert d["regulate_cgroups"] == [{"pattern": "/a.slice", "budget_usec": 0}]' "$dir/json"; echo $?)
"$PRESSURECTL_BIN" --socket "$dir/spans.sock" config >"$dir/out"
check "and config prints them" \
        $(grep -q "under 5.00 ms/s" "$dir/out" && grep -q "^  /a.slice: not regulated" "$dir/out"; echo $?)
check "GetConfiguration and config show the groups reclaimed proactively" \
        $(python3 -c 'import json,sys; assert json.load(open(sys.argv[1]))["reclaim_cgroups"] == ["/pressured-test-none/*.service"]' "$dir/json" &&
          grep -q "^Proactive reclaim (memory.reclaim, within the budget above) of: /pressured-test-none/\*.service" "$dir/out"; echo $?)
# Where the memory controller is on cgroup v1 (hybrid hierarchies), proactive reclaim says once why it
# does nothing; on v2 a glob that names no group says nothing.
v2=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/self/mounts)
if [ -n "$v2" ] && grep -qw memory "$v2/cgroup.controllers" 2>/dev/null; then
        check "no group named: nothing said" $(! grep -q "proactive reclaim needs" "$dir/spans.log"; echo $?)
else
        check "memory on cgroup v1: proactive reclaim says why it does nothing" \
                $(grep -q "reclaim_cgroup= is set, but proactive reclaim needs the memory controller on cgroup v2 (memory.reclaim), and it is" "$dir/spans.log"; echo $?)
fi
# The memory pressure socket beside a socket of another name is named after it.
check "a socket of another name gets <socket>-memory-pressure" $([ -S "$dir/spans.sock-memory-pressure" ] && [ ! -e "$dir/memory-pressure" ]; echo $?)
kill "$spans_pid"; wait "$spans_pid"

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
"$PRESSURECTL_BIN" --socket "$sock" shrink --all >"$dir/out"
check "shrink --all with nobody registered exits 0" $?
check "and says nothing was freed" $(grep -q "scanned 0, freed 0 objects" "$dir/out"; echo $?)
"$PRESSURECTL_BIN" --socket "$sock" shrink --dry-run >"$dir/out"
check "shrink --dry-run exits 0" $?
check "and says nothing was freed" $(grep -q "nothing was freed" "$dir/out"; echo $?)
"$PRESSURECTL_BIN" --socket "$sock" shrink --nr 5 --shrinker 4242 >/dev/null 2>"$dir/err"
check "shrink of an unknown shrinker exits 3" $([ $? -eq 3 ]; echo $?)
check "and names its id in words" $(grep -q "no shrinker with id 4242" "$dir/err" && ! grep -q "io.pressured" "$dir/err"; echo $?)

# The thresholds in effect, for people and for scripts.
"$PRESSURECTL_BIN" --socket "$sock" config >"$dir/out"
check "config exits 0" $?
check "config shows low's threshold" $(grep -qE '^low +some stall 100ms per 2s \(5.0%\), or headroom <= 15%' "$dir/out"; echo $?)
check "config shows critical's threshold" $(grep -qE '^critical +full stall 400ms per 2s \(20.0%\), or headroom <= 3%' "$dir/out"; echo $?)
"$PRESSURECTL_BIN" --socket "$sock" --json config >"$dir/json"
check "config --json has three levels and the hold" \
        $(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert [l["level"] for l in d["levels"]]==["low","medium","critical"]; assert d["levels"][0]["headroom_percent"]==15; assert d["hold_usec"]==10000000' "$dir/json"; echo $?)

# status SCOPE: a closer look at any scope, watched or not.
"$PRESSURECTL_BIN" --socket "$sock" status system node:0 >"$dir/out" 2>"$dir/err"
check "status system node:0 exits 0" $?
check "and shows each level, why, headroom and thresholds" \
        $(grep -q "^system" "$dir/out" && grep -q "^node:0" "$dir/out" && grep -q "  Level: " "$dir/out" && grep -q "  Why: " "$dir/out" &&
          grep -q "  Headroom: .* left of " "$dir/out" && grep -q "  Thresholds: some stall 100ms per 2s" "$dir/out"; echo $?)
"$PRESSURECTL_BIN" --socket "$sock" status /no/such/cgroup >/dev/null 2>"$dir/err"
check "status of a missing cgroup exits 3" $([ $? -eq 3 ]; echo $?)
check "and names it, with where paths start" \
        $(grep -q "/no/such/cgroup: no such cgroup.*relative to the cgroup v2 mount" "$dir/err"; echo $?)
"$PRESSURECTL_BIN" --socket "$sock" status bogus >/dev/null 2>"$dir/err"
check "status of a malformed scope exits 2 naming it" $([ $? -eq 2 ] && grep -q "bogus: not a scope" "$dir/err"; echo $?)
v2=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/mounts)
if [ -n "$v2" ] && [ -w "$v2" ]; then
        cg=/pressurectl-test-$$
        mkdir "$v2$cg" && cgroup_made="$v2$cg"
        "$PRESSURECTL_BIN" --socket "$sock" status "$cg" >"$dir/out" 2>"$dir/err"
        check "status of a cgroup nobody watches exits 0" $?
        check "and shows its level and stall" $(grep -q "^$cg" "$dir/out" && grep -q "  Level:  *ok" "$dir/out" && grep -q "  Stall: " "$dir/out"; echo $?)
        "$PRESSURECTL_BIN" --socket "$sock" --json status "$cg" >"$dir/json"
        check "status --json of it names the scope and carries the configuration" \
                $(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["scopes"][0]["scope"]["cgroup"]==sys.argv[2]; assert len(d["configuration"]["levels"])==3' "$dir/json" "$cg"; echo $?)
fi

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
        check "and what to do" $(grep -q "Ask root to add cgroup=" "$dir/err"; echo $?)
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
check "each line with a wall-clock time" \
        $(python3 -c 'import json,sys,re; l=[json.loads(x) for x in open(sys.argv[1])]; assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}[+-]\d\d:\d\d", x["time"]) for x in l)' "$dir/watch"; echo $?)
[ "$fail" -eq 0 ] || { echo "--- watch output:"; cat "$dir/watch" "$dir/watch.err"; }
kill "$daemon_pid"; wait "$daemon_pid"
check "daemon exits 0 on SIGTERM" $?
daemon_pid=
wait "$watch_pid"
check "watch exits 1 when the daemon goes away" $([ $? -eq 1 ]; echo $?)
check "and says it is shutting down" $(grep -q "is shutting down" "$dir/watch.err"; echo $?)
watch_pid=

# watch --exec: a command run on each change with the change in its environment. The machine is a
# fixture /proc whose memory runs short while watched (headroom 4%: medium).
fixture=$dir/root
cp -r "${PRESSURED_FIXTURES}/sysfs-busy" "$fixture"
cp "$fixture/proc/meminfo" "$dir/meminfo.busy"
sed 's/^MemAvailable: .*/MemAvailable:    4000000 kB/; s/^MemFree: .*/MemFree:         4000000 kB/' "$dir/meminfo.busy" >"$fixture/proc/meminfo"
printf '[pressured]\nsysfs_root=%s\nheadroom_interval=100ms\nheadroom_max_interval=200ms\nnode_interval=200ms\nlow_memory_monitor=no\n' "$fixture" >"$dir/fixture.conf"
"$PRESSURED_BIN" --config "$dir/fixture.conf" --socket "$sock" 2>"$dir/daemon.log" &
daemon_pid=$!
for _ in $(seq 1 500); do [ -S "$sock" ] && break; sleep 0.01; done
export PRESSURECTL_TEST_OUT="$dir/exec.env"
"$PRESSURECTL_BIN" --socket "$sock" --exec 'env | grep ^PRESSURE_ | sort >"$PRESSURECTL_TEST_OUT.tmp" && mv "$PRESSURECTL_TEST_OUT.tmp" "$PRESSURECTL_TEST_OUT"' watch system >"$dir/watch" 2>&1 &
watch_pid=$!
for _ in $(seq 1 500); do [ -s "$dir/watch" ] && break; sleep 0.01; done
cp "$dir/meminfo.busy" "$fixture/proc/meminfo.new" && mv "$fixture/proc/meminfo.new" "$fixture/proc/meminfo"
for _ in $(seq 1 1000); do [ -s "$dir/exec.env" ] && break; sleep 0.01; done
check "watch --exec ran the command on the change" $([ -s "$dir/exec.env" ]; echo $?)
check "with scope, event, level, previous level and source" \
        $(grep -qx "PRESSURE_SCOPE=system" "$dir/exec.env" && grep -qx "PRESSURE_EVENT=level" "$dir/exec.env" &&
          grep -qx "PRESSURE_LEVEL=medium" "$dir/exec.env" && grep -qx "PRESSURE_PREVIOUS_LEVEL=ok" "$dir/exec.env" &&
          grep -qx "PRESSURE_SOURCE=headroom" "$dir/exec.env" && grep -qE "^PRESSURE_RECLAIM_TARGET=[1-9][0-9]*$" "$dir/exec.env"; echo $?)
check "the log says the figure and the threshold it decided on" \
        $(grep -q "system: memory pressure ok -> medium: headroom 4.0% (.* left under the 4.0G limit), at or below medium's 8%; reclaim target" "$dir/daemon.log"; echo $?)
[ -s "$dir/exec.env" ] || { cat "$dir/watch" "$dir/daemon.log"; }
kill "$watch_pid"; wait "$watch_pid" 2>/dev/null
watch_pid=
kill "$daemon_pid"; wait "$daemon_pid"
daemon_pid=

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
