#!/bin/bash
# The systemd units: systemd-analyze verify is clean, and the service's exposure is at most 1.6 (1.2 before
# it read the kernel log for OOM victims: ProtectKernelLogs=no, CAP_SYSLOG and /dev/kmsg cost 0.4), the
# adapters' at most 1.5.
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
check "security exposure <= 1.6" $(awk -v s="${score:-99}" 'BEGIN { exit !(s <= 1.6) }'; echo $?)

check "the service is Type=notify with a watchdog" $(grep -q '^Type=notify' "$dir/pressured.service" && grep -q '^WatchdogSec=' "$dir/pressured.service"; echo $?)
check "the socket is the daemon's default path, world-accessible" \
        $(grep -q '^ListenStream=/run/pressured/io.pressured' "$dir/pressured.socket" && grep -q '^SocketMode=0666' "$dir/pressured.socket"; echo $?)

# pressure-adapt's templates, each for a stand-in server service (verify wants the unit it binds to).
for pair in redis:redis-server memcached:memcached; do
        kind=${pair%%:*} server=${pair#*:}
        unit=pressure-adapt-$kind@$server.service
        sed "s|^ExecStart=[^ ]*|ExecStart=$BUILD/pressure-adapt|" "$BUILD/pressure-adapt-$kind@.service" >"$dir/pressure-adapt-$kind@.service"
        printf '[Unit]\nDescription=stand-in\n[Service]\nExecStart=/bin/true\n' >"$dir/$server.service"
        (cd "$dir" && systemd-analyze verify --man=no "$unit") >"$dir/verify-adapt.log" 2>&1
        rc=$?
        cat "$dir/verify-adapt.log"
        check "$unit: verify exits 0 and prints nothing" $([ $rc = 0 ] && [ ! -s "$dir/verify-adapt.log" ]; echo $?)
        score=$(systemd-analyze security --offline=true "$dir/$unit" 2>&1 |
                sed -n "s/.*Overall exposure level for $unit: \([0-9.]*\).*/\1/p")
        echo "$unit exposure: ${score:-none}"
        check "its exposure <= 1.5" $(awk -v s="${score:-99}" 'BEGIN { exit !(s <= 1.5) }'; echo $?)
        check "it keeps its state file across restarts" \
                $(grep -q "^RuntimeDirectory=pressure-adapt/%i" "$dir/pressure-adapt-$kind@.service" &&
                  grep -q "^RuntimeDirectoryPreserve=restart" "$dir/pressure-adapt-$kind@.service"; echo $?)
done

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
