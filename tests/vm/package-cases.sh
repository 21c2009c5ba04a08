#!/bin/sh
# The Debian packages under real systemd: runs as the guest agent's command in the VM of tests/vm/run with
# PRESSURED_VM_INIT=systemd and PRESSURED_VM_INSTALL=no (systemd as PID 1, nothing of pressured installed
# but what the packages bring). DEBS holds v1/ and v2/, two builds of this tree, v2 with a higher version
# (build-aux/build-debs). Install, serve, reload, upgrade keeping the configuration, purge leaving nothing.
set -u
export PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive
pass=0 fail=0
check() { if [ "$2" -eq 0 ]; then pass=$((pass + 1)); echo "ok - $1"; else fail=$((fail + 1)); echo "FAIL - $1"; fi; return "$2"; }
until_ok() { t=$1; shift; while [ "$t" -gt 0 ]; do "$@" && return 0; sleep 1; t=$((t - 1)); done; return 1; }
debs=${DEBS:?}
sock=/run/pressured/io.pressured

# What is on the machine where the packages put things, before: compared after the purge. /var/lib/dpkg
# and apt's state change by design (status, logs), /run/systemd by the boot going on.
snapshot() {
        { find /etc /usr/sbin /usr/bin /usr/include /usr/share/dbus-1 /usr/share/doc /usr/share/man \
                /usr/lib/systemd /lib/systemd /usr/lib/x86_64-linux-gnu/pkgconfig /var/lib/systemd/deb-systemd-helper-enabled \
                /usr/lib/python3/dist-packages/pressure \
                -xdev 2>/dev/null | grep -v -e '^/etc/ld.so.cache$' -e '^/usr/share/man/index' -e '/\.updated$'
          find /usr/lib/x86_64-linux-gnu -maxdepth 1 -name 'libpressure*' 2>/dev/null
          ls -d /run/pressured 2>/dev/null; } | LC_ALL=C sort
}
[ -e /usr/sbin/pressured ] && { echo "FAIL - pressured is installed before the packages are"; exit 1; }
# The guest's root is the host's, and a container image's policy-rc.d forbids maintainer scripts to start
# services; a booted Debian machine has none (this is the guest's overlay, not the host).
rm -f /usr/sbin/policy-rc.d
snapshot >/tmp/before.files
cp /etc/passwd /tmp/before.passwd
cp /etc/group /tmp/before.group

# man-db's trigger would rebuild the whole index under TCG: not what is tested here.
rm -f /var/lib/man-db/auto-update

# Install: the sockets are enabled and listening, no manual step.
pkgs() { ls "$1"/pressured_*.deb "$1"/libpressure0_*.deb "$1"/libpressure-dev_*.deb "$1"/python3-pressure_*.deb; }
apt-get install -y -q $(pkgs "$debs/v1") >/tmp/install.log 2>&1
check "apt-get install ./*.deb" $? || tail -n 30 /tmp/install.log
for u in pressured.socket pressured-memory-pressure.socket pressured.service; do
        check "$u is enabled" $([ "$(systemctl is-enabled $u 2>/dev/null)" = enabled ]; echo $?)
done
check "pressured.socket listens" $([ "$(systemctl is-active pressured.socket)" = active ] && [ -S $sock ]; echo $?) ||
        { systemctl status pressured.socket pressured.service --no-pager; tail -n 20 /tmp/install.log; }
check "pressured.socket is wanted by sockets.target (active after boot)" \
        $([ -L /etc/systemd/system/sockets.target.wants/pressured.socket ]; echo $?)
check "/etc/pressured.conf is a conffile of pressured" $(dpkg-query -W -f='${Conffiles}' pressured | grep -q " /etc/pressured.conf "; echo $?)
check "the D-Bus policy is in place" $([ -e /usr/share/dbus-1/system.d/org.freedesktop.LowMemoryMonitor.conf ]; echo $?)

# A client served, through the installed library.
pressurectl status >/tmp/status.out 2>&1
check "pressurectl status is served" $? || { cat /tmp/status.out; journalctl -u pressured.service --no-pager | tail -n 20; }
check "the service runs" $(until_ok 10 sh -c '[ "$(systemctl is-active pressured.service)" = active ]'; echo $?)
pid1=$(systemctl show -p MainPID --value pressured.service)

# The Python client, from the package, as an unprivileged user would run it: byte-compiled by the
# package's postinst (dh_python3), served by the same daemon.
out=$(cd / && setpriv --reuid=nobody --regid=nogroup --clear-groups /usr/bin/python3 -c \
        'import pressure; c = pressure.Client(); print(pressure.__version__, c.status().system.level)' 2>&1)
check "python3-pressure: a Python program is served ($out)" $(echo "$out" | grep -qE '^1.3.0 (ok|low|medium|critical)$'; echo $?)
check "python3-pressure is byte-compiled" $(ls /usr/lib/python3/dist-packages/pressure/__pycache__/client.*.pyc >/dev/null 2>&1; echo $?)

# Reload: a changed configuration taken without a restart.
printf '\n# local change\nhold=7s\n' >>/etc/pressured.conf
systemctl reload pressured.service
check "systemctl reload pressured" $?
hold() { pressurectl --json config | python3 -c 'import json, sys; print(json.load(sys.stdin)["hold_usec"])'; }
check "the new hold is in force (7 s), same process" \
        $(until_ok 10 sh -c '[ "$(pressurectl --json config | python3 -c "import json, sys; print(json.load(sys.stdin)[\"hold_usec\"])")" = 7000000 ]' &&
          [ "$(systemctl show -p MainPID --value pressured.service)" = "$pid1" ]; echo $?)
score=$(systemd-analyze security pressured.service 2>/dev/null | sed -n 's/.*Overall exposure level for pressured.service: \([0-9.]*\).*/\1/p')
echo "    installed unit's exposure: ${score:-none}"
check "the installed unit's exposure is 1.6 or better (it reads the kernel log)" $(awk -v s="${score:-99}" 'BEGIN { exit !(s <= 1.6) }'; echo $?)

# Upgrade to a rebuilt package with a higher version: the local configuration stays, the service is
# restarted on the new files and serves.
v2=$(dpkg-deb -f "$(ls "$debs"/v2/pressured_*.deb)" Version)
apt-get install -y -q $(pkgs "$debs/v2") >/tmp/upgrade.log 2>&1
check "apt-get install of $v2 (an upgrade)" $? || tail -n 30 /tmp/upgrade.log
check "pressured is $v2 now" $([ "$(dpkg-query -W -f='${Version}' pressured)" = "$v2" ]; echo $?)
check "the local configuration is kept" $(grep -q "^hold=7s" /etc/pressured.conf; echo $?)
pressurectl status >/dev/null 2>&1
check "served after the upgrade" $?
check "and the running daemon has the local configuration" $([ "$(hold)" = 7000000 ]; echo $?)
check "it was restarted for the upgrade" $([ "$(systemctl show -p MainPID --value pressured.service)" != "$pid1" ]; echo $?)

# Purge: nothing left.
apt-get purge -y -q pressured libpressure0 libpressure-dev python3-pressure >/tmp/purge.log 2>&1
check "apt-get purge" $? || tail -n 30 /tmp/purge.log
snapshot >/tmp/after.files
diff /tmp/before.files /tmp/after.files >/tmp/files.diff
check "no file left (compared with before the install)" $? || head -n 20 /tmp/files.diff
check "no user or group added" $(cmp -s /tmp/before.passwd /etc/passwd && cmp -s /tmp/before.group /etc/group; echo $?)
check "no unit left" $(! systemctl list-unit-files 'pressured.*' 'pressured-memory-pressure.*' 'pressure-adapt-*' --no-legend 2>/dev/null | grep -q .; echo $?)
check "no socket left" $([ ! -e $sock ] && ! systemctl is-active -q pressured.socket; echo $?)
check "no D-Bus policy left" $([ ! -e /usr/share/dbus-1/system.d/org.freedesktop.LowMemoryMonitor.conf ]; echo $?)
check "no process left" $(! pgrep -x pressured >/dev/null; echo $?)

echo "package: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
