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
