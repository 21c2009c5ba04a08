#!/bin/sh
# The installed service under real systemd: runs as the guest agent's command in the VM of
# tests/vm/run with PRESSURED_VM_INIT=systemd (systemd as PID 1, the build installed). BUILD is the build
# directory (for the test shrinker client). Every filtered system call kills here (SystemCallErrorNumber
# reset in a drop-in), so a call the filter misses shows as a SIGSYS, not as a quiet errno.
set -u
pass=0 fail=0
check() { if [ "$2" -eq 0 ]; then pass=$((pass + 1)); echo "ok - $1"; else fail=$((fail + 1)); echo "FAIL - $1"; fi; return "$2"; }
# Wait up to $1 seconds for a command to succeed (polling: systemd's state has no event to wait on here).
until_ok() { t=$1; shift; while [ "$t" -gt 0 ]; do "$@" && return 0; sleep 1; t=$((t - 1)); done; return 1; }
prop() { systemctl show -p "$1" --value pressured.service; }

# Installed with --prefix=/usr, as a distribution would: the guest's /usr/bin and /usr/sbin have it.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
command -v pressurectl >/dev/null && [ -x /usr/sbin/pressured ]
check "installed in /usr: $(command -v pressurectl), /usr/sbin/pressured" $?
ldconfig
sock=/run/pressured/io.pressured
start=$(date +%s)

mkdir -p /etc/systemd/system/pressured.service.d
# WatchdogSec shortened from the unit's 30 s: the daemon must follow $WATCHDOG_USEC, and the test waits less.
printf '[Service]\nSystemCallErrorNumber=\nWatchdogSec=10s\n' >/etc/systemd/system/pressured.service.d/test.conf
systemctl daemon-reload

# Socket activation.
systemctl enable --now pressured.socket
check "systemctl enable --now pressured.socket" $?
# Before the service runs: systemd refuses to start a socket unit whose service is already active.
systemctl enable --now pressured-memory-pressure.socket >/tmp/mp-enable.out 2>&1
check "systemctl enable --now pressured-memory-pressure.socket" $? || sed 's/^/    /' /tmp/mp-enable.out
check "the socket listens, the service waits for a connection" \
        $([ "$(systemctl is-active pressured.socket)" = active ] && [ "$(systemctl is-active pressured.service)" = inactive ]; echo $?)
pressurectl status >/tmp/status.out 2>&1
check "a connection starts the service, and it answers" $?
check "the service is active (Type=notify: READY=1 came)" $([ "$(systemctl is-active pressured.service)" = active ]; echo $?)
status_text=$(prop StatusText)
echo "    STATUS=$status_text"
check "systemctl show has its STATUS= text" $([ -n "$status_text" ]; echo $?)

# Triggers on /proc/pressure/memory (at start) and on a slice's memory.pressure, under the sandbox.
pressurectl watch /system.slice >/tmp/watch.out 2>&1 &
watch_pid=$!
until_ok 20 grep -q "(current)" /tmp/watch.out
check "a slice's memory.pressure is watched (pressurectl watch /system.slice)" $?
check "the daemon says its system trigger is armed" $(journalctl -u pressured.service -o cat | grep -q "PSI triggers armed"; echo $?)

# The $MEMORY_PRESSURE_WATCH socket (enabled above): listening from sockets.target, before the services
# that would use it (every service is ordered after basic.target, which comes after sockets.target).
check "it is ordered before sockets.target" \
        $(systemctl show -p Before --value pressured-memory-pressure.socket | grep -qw sockets.target; echo $?)
python3 -c 'import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect("/run/pressured/memory-pressure")
s.sendall(b"some 150000 2000000\0")
s.settimeout(2)
try:
    data = s.recv(64)
except socket.timeout:
    data = b"(quiet)"
sys.exit(0 if data != b"" else 1)' >/tmp/mp.out 2>&1
check "a client of the memory pressure socket is served (its connection stays open)" $? || sed 's/^/    /' /tmp/mp.out

# Unprivileged users: a status, a watch, and a shrinker client.
# No --socket and no per-user daemon: the system's.
setpriv --reuid=65534 --regid=65534 --clear-groups env -u XDG_RUNTIME_DIR pressurectl status >/tmp/status-nobody.out 2>&1
check "nobody's pressurectl status" $? || sed 's/^/    /' /tmp/status-nobody.out
setpriv --reuid=65534 --regid=65534 --clear-groups env -u XDG_RUNTIME_DIR pressurectl watch system >/tmp/watch-nobody.out 2>&1 &
nobody_watch=$!
until_ok 20 grep -q "(current)" /tmp/watch-nobody.out
check "nobody's pressurectl watch" $? || sed 's/^/    /' /tmp/watch-nobody.out
kill "$nobody_watch" 2>/dev/null
setpriv --reuid=65534 --regid=65534 --clear-groups "$BUILD/tests/shrinker-client" --socket "$sock" --objects 10 \
        >/tmp/client.out 2>&1 &
client_pid=$!
until_ok 30 grep -q "ready pid=" /tmp/client.out
check "nobody's shrinker client registers" $? || { sed 's/^/    /' /tmp/client.out; journalctl -u pressured.service -o cat | tail -15 | sed 's/^/    journal: /'; }
id_before=$(pressurectl --json shrinkers 2>/dev/null | grep -o '"id":[0-9]*' | head -1)
check "and pressurectl shrinkers lists it" $([ -n "$id_before" ]; echo $?)

# Reload keeps the process, its subscribers and its shrinkers.
pid_before=$(prop MainPID)
systemctl reload pressured.service
check "systemctl reload" $?
until_ok 10 journalctl -u pressured.service -o cat --since "@$start" -g "eload" -q >/dev/null
check "the same process after the reload" $([ "$(prop MainPID)" = "$pid_before" ]; echo $?)
check "the subscriber is still there" $(kill -0 "$watch_pid" 2>/dev/null; echo $?)
id_after=$(pressurectl --json shrinkers 2>/dev/null | grep -o '"id":[0-9]*' | head -1)
check "the shrinker keeps its id ($id_before, $id_after)" $([ "$id_after" = "$id_before" ]; echo $?)

# Real pressure in a transient unit: an anonymous grower under its slice's 64 MiB limit raises the
# slice's level (headroom) before the OOM killer comes, and the slice is back at ok once it is gone.
mkdir -p /run/systemd/system
printf '[Slice]\nMemoryMax=64M\n' >/run/systemd/system/pressuredtest.slice
systemctl daemon-reload
systemd-run --quiet --unit=pressured-grow --slice=pressuredtest.slice \
        "$BUILD/tests/shrinker-client" --socket "$sock" --objects 4 --size 1048576 --grow 150 --shrinkers 0 \
        >/tmp/run.out 2>&1
check "systemd-run starts the grower in pressuredtest.slice" $? || sed 's/^/    /' /tmp/run.out
pressurectl watch /pressuredtest.slice >/tmp/grow.out 2>&1 &
grow_watch=$!
until_ok 90 grep -qE " -> (low|medium|critical)" /tmp/grow.out
check "the grower raises its slice's level" $? || { sed 's/^/    /' /tmp/grow.out; systemctl status pressured-grow.service pressuredtest.slice 2>&1 | sed 's/^/    /' | head -30; ls /sys/fs/cgroup/pressuredtest.slice 2>&1 | head -3; journalctl -u pressured.service -o cat | tail -8 | sed 's/^/    journal: /'; }
until_ok 120 grep -qE "(low|medium|critical) -> ok" /tmp/grow.out
check "and the slice returns to ok after it is gone" $? || sed 's/^/    /' /tmp/grow.out
# The kernel killed it: under the shipped unit (private /dev, /dev/kmsg bound read-only, CAP_SYSLOG
# with Debian's dmesg_restrict=1) the daemon names the victim from the kernel log.
check "dmesg_restrict is on, as on Debian" $([ "$(cat /proc/sys/kernel/dmesg_restrict)" = 1 ]; echo $?)
until_ok 30 journalctl -u pressured.service -o cat -q -g "OOM killer killed shrinker-client \(pid [0-9]+, uid 0, in /pressuredtest.slice/pressured-grow.service\)" >/dev/null
check "the OOM kill is logged with its victim under the shipped unit" $? ||
        journalctl -u pressured.service -o cat | grep -i "oom" | tail -4 | sed 's/^/    journal: /'
kill "$grow_watch" 2>/dev/null
systemctl stop pressured-grow.service 2>/dev/null

# And a file writer under a 16 MiB limit on a disk of its own: stalls on writeback (PSI), as the test
# suite's generator makes them, raise its slice's level; the slice is back at ok after it stops.
printf '[Slice]\nMemoryMax=16M\n' >/run/systemd/system/pressuredwrite.slice
systemctl daemon-reload
disk=/var/lib/pressured-vm-disk
check "the VM has its disk" $(mountpoint -q "$disk"; echo $?)
systemd-run --quiet --unit=pressured-writer --slice=pressuredwrite.slice \
        sh -c "while :; do dd if=/dev/zero of=$disk/f bs=1M count=256 2>/dev/null; done" >/tmp/run-w.out 2>&1
check "systemd-run starts the file writer in pressuredwrite.slice (MemoryMax=16M)" $? || sed 's/^/    /' /tmp/run-w.out
pressurectl watch /pressuredwrite.slice >/tmp/write.out 2>&1 &
write_watch=$!
until_ok 90 grep -qE " -> (low|medium|critical)" /tmp/write.out
check "the writer's stalls raise its slice's level" $? || { sed 's/^/    /' /tmp/write.out; cat /sys/fs/cgroup/pressuredwrite.slice/memory.pressure | sed 's/^/    /'; }
systemctl stop pressured-writer.service
until_ok 120 grep -qE "(low|medium|critical) -> ok" /tmp/write.out
check "and the slice returns to ok once it stops" $? || sed 's/^/    /' /tmp/write.out
kill "$write_watch" 2>/dev/null
rm -f "$disk/f"

# The journal: structured fields and message ids.
journalctl -u pressured.service -o verbose >/tmp/journal.txt
check "journal entries carry PRESSURED_* fields" $(grep -q "PRESSURED_" /tmp/journal.txt; echo $?)
check "and MESSAGE_ID" $(grep -q "MESSAGE_ID=" /tmp/journal.txt; echo $?)
check "and where they were written: CODE_FILE=, CODE_LINE=, CODE_FUNC=" \
        $(grep -qE "^ *CODE_FILE=.*daemon/[a-z_]+\.c$" /tmp/journal.txt && grep -qE "^ *CODE_LINE=[0-9]+$" /tmp/journal.txt &&
          grep -qE "^ *CODE_FUNC=[a-z_]+$" /tmp/journal.txt; echo $?)

# The log level at run time, as root over Varlink (systemd 252 has no varlinkctl: a few lines of Python).
set_log_level() {
        python3 -c 'import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(json.dumps({"method": "io.pressured.SetLogLevel", "parameters": {"level": sys.argv[2]}}).encode() + b"\0")
reply = b""
while not reply.endswith(b"\0"):
    chunk = s.recv(4096)
    if not chunk:
        break
    reply += chunk
sys.exit(0 if "error" not in json.loads(reply.rstrip(b"\0")) else 1)' "$sock" "$1"
}
debug_from=$(date +%s)
set_log_level debug
check "SetLogLevel debug is accepted from root" $?
pressurectl status >/dev/null 2>&1
until_ok 10 sh -c "journalctl -u pressured.service -p debug..debug --since @$debug_from -q -o cat | grep -q ."
check "and debug entries reach the journal" $?
set_log_level info
# The daemon's own notice marks the change in its journal stream: nothing after it may be at debug.
until_ok 10 sh -c 'journalctl -u pressured.service -g "Log level set to info" -q -o cat | grep -q .'
cursor=$(journalctl -u pressured.service -g "Log level set to info" -n 1 -o export | sed -n 's/^__CURSOR=//p')
pressurectl status >/dev/null 2>&1
pressurectl status >/dev/null 2>&1
check "SetLogLevel info: no debug entry after it" \
        $([ -n "$cursor" ] && [ -z "$(journalctl -u pressured.service --after-cursor "$cursor" -p debug..debug -q -o cat)" ]; echo $?)

# The sandbox: no call refused, nothing killed.
journalctl -o cat -u pressured.service >/tmp/journal-cat.txt
if grep -E "SIGSYS|Bad system call|Operation not permitted|Permission denied|EPERM|EACCES" /tmp/journal-cat.txt; then
        check "no refused or killed system call in the journal" 1
else
        check "no refused or killed system call in the journal" 0
fi
check "no restart so far (NRestarts=$(prop NRestarts))" $([ "$(prop NRestarts)" = 0 ]; echo $?)

# systemd-analyze security, as the offline score.
score=$(systemd-analyze security pressured.service 2>/dev/null | sed -n 's/.*Overall exposure level for pressured.service: \([0-9.]*\).*/\1/p')
echo "    exposure: $score"
check "systemd-analyze security: exposure at most 1.6" $(awk -v s="${score:-99}" 'BEGIN { exit !(s <= 1.6) }'; echo $?)

# The watchdog: a stopped daemon is killed and started again (WatchdogSec=10s here); a running one was
# not (NRestarts was 0 above, after more than 10 s).
kill -STOP "$pid_before"
until_ok 120 sh -c '[ "$(systemctl show -p NRestarts --value pressured.service)" -ge 1 ] && [ "$(systemctl is-active pressured.service)" = active ]'
check "the watchdog restarts a stopped daemon" $?
check "as a new process" $([ "$(prop MainPID)" != "$pid_before" ]; echo $?)
until_ok 30 sh -c "pressurectl --json shrinkers 2>/dev/null | grep -q '\"id\"'"
check "the shrinker client registered again with the new daemon" $?

# A clean stop.
kill "$watch_pid" "$client_pid" 2>/dev/null
systemctl stop pressured.socket pressured.service
check "systemctl stop" $?
check "the service ended cleanly (Result=$(prop Result), status $(prop ExecMainStatus))" \
        $([ "$(prop Result)" = success ] && [ "$(prop ExecMainStatus)" = 0 ]; echo $?)
check "the socket file is gone" $([ ! -e "$sock" ]; echo $?)
if journalctl -o cat | grep -E "pressured.*(SIGSYS|Bad system call)|audit.*pressured.*syscall"; then
        check "no SIGSYS anywhere in the journal" 1
else
        check "no SIGSYS anywhere in the journal" 0
fi

echo "systemd cases: $pass passed, $fail failed, $(($(date +%s) - start)) s"
[ "$fail" -eq 0 ]
