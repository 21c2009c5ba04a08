#!/bin/bash
# The README's quick start works on this machine: every line of its quickstart block runs against a
# daemon of its own (through $PRESSURED_SOCKET) and exits 0; watch lines run until a timeout.
set -u
SRC=${PRESSURED_SOURCE_ROOT:?}
BUILD=${PRESSURED_BUILD_ROOT:?}
pass=0
fail=0
check() { if [ "$2" -eq 0 ]; then pass=$((pass + 1)); echo "ok - $1"; else fail=$((fail + 1)); echo "FAIL - $1"; fi; }

[ -r /proc/pressure/memory ] || { echo "SKIP: no PSI on this kernel"; exit 77; }
dir=$(mktemp -d /tmp/pressured-readme-XXXXXX)
chmod 755 "$dir"
daemon_pid=
cleanup() {
        [ -n "$daemon_pid" ] && kill "$daemon_pid" 2>/dev/null && wait "$daemon_pid" 2>/dev/null
        rm -rf "$dir"
}
trap cleanup EXIT

sed -n '/^<!-- quickstart/,/^<!-- \/quickstart/p' "$SRC/README.md" | grep '^build/' | sed 's/ *#.*$//' >"$dir/lines"
check "the README has a quickstart block" $([ "$(wc -l <"$dir/lines")" -ge 4 ]; echo $?)

export PRESSURED_SOCKET=$dir/io.pressured
"$BUILD/pressured" --config /dev/null --socket "$PRESSURED_SOCKET" 2>"$dir/daemon.log" &
daemon_pid=$!
for _ in $(seq 1 500); do [ -S "$PRESSURED_SOCKET" ] && break; sleep 0.01; done

cd "$BUILD/.." 2>/dev/null || true
while read -r line; do
        cmd=${line/#build\//$BUILD/}
        case "$line" in
        *" watch"*)
                # Runs until interrupted: it must still be running after its first lines.
                timeout 2 bash -c "$cmd" >"$dir/out" 2>"$dir/err" </dev/null
                rc=$?
                check "$line (runs, prints the current state)" $([ $rc -eq 124 ] && [ -s "$dir/out" ]; echo $?) ;;
        *)
                bash -c "$cmd" >"$dir/out" 2>"$dir/err" </dev/null
                rc=$?
                check "$line (exit $rc)" $([ $rc -eq 0 ] && [ -s "$dir/out" ]; echo $?) ;;
        esac
        [ -s "$dir/err" ] && sed 's/^/    /' "$dir/err"
done <"$dir/lines"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
