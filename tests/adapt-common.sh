# Shared by the adapter tests (test-adapt-redis.sh, test-adapt-memcached.sh), sourced after they set
# KIND (the adapter's server kind, the prefix of its shrinker's name), $sock and $PRESSURECTL_BIN.
pass=0
fail=0
check() { # name, condition result
        if [ "$2" -eq 0 ]; then pass=$((pass + 1)); echo "ok - $1"; else fail=$((fail + 1)); echo "FAIL - $1"; fi
}
# Wait up to $1 seconds for a command to succeed (the servers' settings have no event to wait on).
until_ok() { t=$(($1 * 10)); shift; while [ "$t" -gt 0 ]; do "$@" && return 0; sleep 0.1; t=$((t - 1)); done; return 1; }
shrinker_json() { "$PRESSURECTL_BIN" --socket "$sock" --json shrinkers; }
# Whether the adapter's shrinker is registered for pid $1.
for_pid_is() {
        shrinker_json | python3 -c 'import json, sys
d = json.load(sys.stdin)
sys.exit(0 if any(s.get("for_pid") == int(sys.argv[1]) and s["name"].startswith(sys.argv[2] + ":") for s in d["shrinkers"]) else 1)' "$1" "$KIND"
}
shrinker_id() {
        shrinker_json | python3 -c 'import json, sys
print([s["id"] for s in json.load(sys.stdin)["shrinkers"] if s["name"].startswith(sys.argv[1] + ":")][0])' "$KIND"
}
# The memory.pressure of an empty cgroup v2 group made for this test, where nobody ever stalls, for the
# daemon's --system-pressure: the host's own stall (a benchmark beside the suite) must not give the
# adapter a growth limit of the machine's (it set Redis's cap to 70 MB once). Nothing where there
# is no cgroup v2 with PSI. Sets $quiet (the daemon's option, or nothing) and $quiet_group (removed by
# quiet_pressure_done).
quiet_group=
quiet=
quiet_pressure() {
        for root in /sys/fs/cgroup/unified /sys/fs/cgroup; do
                [ -e "$root/cgroup.procs" ] && [ -e "$root/cgroup.controllers" ] || continue
                quiet_group=$root/pressured-test-quiet-$$
                if mkdir -p "$quiet_group" 2>/dev/null && [ -r "$quiet_group/memory.pressure" ]; then
                        quiet="--system-pressure=$quiet_group/memory.pressure"
                        return
                fi
                rmdir "$quiet_group" 2>/dev/null
                quiet_group=
        done
}
quiet_pressure_done() { [ -n "$quiet_group" ] && rmdir "$quiet_group" 2>/dev/null; quiet_group=; }
