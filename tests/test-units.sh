#!/bin/bash
# The systemd units: systemd-analyze verify is clean, and the service's exposure is at most 1.5.
set -u
BUILD=${PRESSURED_BUILD_ROOT:?}
SRC=${PRESSURED_SOURCE_ROOT:?}
pass=0
fail=0
check() { if [ "$2" -eq 0 ]; then pass=$((pass + 1)); echo "ok - $1"; else fail=$((fail + 1)); echo "FAIL - $1"; fi; }

if ! command -v systemd-analyze >/dev/null; then
        echo "SKIP: systemd-analyze is not installed"
        exit 77
fi
dir=$(mktemp -d /tmp/pressured-units-XXXXXX)
trap 'rm -rf "$dir"' EXIT

# The unit as installed, but pointing at the daemon just built (verify wants ExecStart= to exist).
sed "s|^ExecStart=.*|ExecStart=$BUILD/pressured|" "$BUILD/pressured.service" >"$dir/pressured.service"
cp "$SRC/units/pressured.socket" "$SRC/units/pressured-memory-pressure.socket" "$dir/"

(cd "$dir" && systemd-analyze verify --man=no pressured.service pressured.socket pressured-memory-pressure.socket) >"$dir/verify.log" 2>&1
rc=$?
cat "$dir/verify.log"
check "systemd-analyze verify exits 0" $rc
check "and prints nothing" $([ ! -s "$dir/verify.log" ]; echo $?)

systemd-analyze security --offline=true "$dir/pressured.service" >"$dir/security.log" 2>&1
score=$(sed -n 's/.*Overall exposure level for pressured.service: \([0-9.]*\).*/\1/p' "$dir/security.log")
echo "exposure: ${score:-none}"
check "security exposure is reported" $([ -n "$score" ]; echo $?)
check "security exposure <= 1.5" $(awk -v s="${score:-99}" 'BEGIN { exit !(s <= 1.5) }'; echo $?)

check "the service is Type=notify with a watchdog" $(grep -q '^Type=notify' "$dir/pressured.service" && grep -q '^WatchdogSec=' "$dir/pressured.service"; echo $?)
check "the socket is the daemon's default path, world-accessible" \
        $(grep -q '^ListenStream=/run/pressured/io.pressured' "$dir/pressured.socket" && grep -q '^SocketMode=0666' "$dir/pressured.socket"; echo $?)

# pressure-adapt's template, for a stand-in Redis service (verify wants the unit it binds to).
sed "s|^ExecStart=[^ ]*|ExecStart=$BUILD/pressure-adapt|" "$BUILD/pressure-adapt-redis@.service" >"$dir/pressure-adapt-redis@.service"
printf '[Unit]\nDescription=stand-in\n[Service]\nExecStart=/bin/true\n' >"$dir/redis-server.service"
(cd "$dir" && systemd-analyze verify --man=no pressure-adapt-redis@redis-server.service) >"$dir/verify-adapt.log" 2>&1
rc=$?
cat "$dir/verify-adapt.log"
check "pressure-adapt-redis@redis-server.service: verify exits 0 and prints nothing" $([ $rc = 0 ] && [ ! -s "$dir/verify-adapt.log" ]; echo $?)
score=$(systemd-analyze security --offline=true "$dir/pressure-adapt-redis@redis-server.service" 2>&1 |
        sed -n 's/.*Overall exposure level for pressure-adapt-redis@redis-server.service: \([0-9.]*\).*/\1/p')
echo "adapter exposure: ${score:-none}"
check "its exposure <= 1.5" $(awk -v s="${score:-99}" 'BEGIN { exit !(s <= 1.5) }'; echo $?)

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
