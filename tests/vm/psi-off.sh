#!/bin/sh
# Runs inside a VM booted with psi=0 (tests/vm/run with PRESSURED_VM_PSI=0): the daemon must refuse to
# start with the exit status pressured(8) documents for a kernel without PSI (3), and say how to get it.
# Exits 0 when it does.
pass=0 fail=0
check() { if [ "$2" -eq 0 ]; then pass=$((pass + 1)); echo "ok - $1"; else fail=$((fail + 1)); echo "FAIL - $1"; fi; }

# The kernel has PSI built in but switched off: the file is there and cannot be read, or is not there.
if cat /proc/pressure/memory >/dev/null 2>&1; then
        check "the kernel was booted with PSI off" 1
else
        check "the kernel was booted with PSI off" 0
fi
dir=$(mktemp -d /tmp/pressured-psi0-XXXXXX)
"$PRESSURED_BIN" --socket "$dir/io.pressured" --config /dev/null >"$dir/out" 2>"$dir/err"
status=$?
check "pressured exits 3 without PSI (got $status)" $([ "$status" -eq 3 ]; echo $?)
check "and names CONFIG_PSI" $(grep -q "CONFIG_PSI=y" "$dir/err"; echo $?)
check "and psi=1" $(grep -q "psi=1" "$dir/err"; echo $?)
check "and leaves no socket" $([ ! -e "$dir/io.pressured" ]; echo $?)
sed 's/^/    pressured: /' "$dir/err"
rm -rf "$dir"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
