#!/bin/sh
# Proactive reclaim (reclaim_cgroup=) against the real kernel, inside tests/vm/run (pure cgroup v2, the
# memory controller on it, memory.reclaim, an ext4 disk at /mnt whose page cache reclaim can drop).
#
# A reader in a named group with no limit reads a cold file set once and then a hot file over and over:
# the daemon must take its memory.current down towards the hot set while the group's stall stays near
# its budget. A second group, not named, holds page cache of its own: it must never be touched.
set -u
PRESSURED_BIN=${PRESSURED_BIN:?}
cg=/sys/fs/cgroup
disk=${PRESSURED_VM_DISK:-/mnt}
named=pressured-test-reclaim
other=pressured-test-unnamed
hot_mib=32
cold_mib=128
idle_mib=48
budget_ms=2

fails=0
pass() { echo "ok: $*"; }
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
# Where the time goes, for a run that comes near the VM's timeout.
begun=$(date +%s)
stamp() { echo "    ($(($(date +%s) - begun)) s) $*"; }

grep -qw memory "$cg/cgroup.subtree_control" 2>/dev/null || { echo "FAIL: no memory controller on cgroup v2 here"; exit 1; }
mountpoint -q "$disk" || { echo "FAIL: no disk at $disk (tests/vm/run mounts one)"; exit 1; }

work=$(mktemp -d /tmp/pressured-test-proactive-XXXXXX)
files=$disk/pressured-proactive
pids=
cleanup() {
        for p in $pids; do kill "$p" 2>/dev/null; done
        for g in $named $other; do
                [ -d "$cg/$g" ] || continue
                for p in $(cat "$cg/$g/cgroup.procs" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
        done
        wait 2>/dev/null
        for g in $named $other; do
                i=0
                while [ -d "$cg/$g" ] && ! rmdir "$cg/$g" 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
        done
        [ -d "$cg/pressured-test-users" ] && find "$cg/pressured-test-users" -depth -type d -exec rmdir {} + 2>/dev/null
        rm -rf "$work" "$files"
}
trap cleanup EXIT

mkdir -p "$files" "$cg/$named" "$cg/$other"
[ -e "$cg/$named/memory.reclaim" ] || { echo "FAIL: the kernel has no memory.reclaim"; exit 1; }
i=0
while [ $i -lt 4 ]; do
        dd if=/dev/zero of="$files/cold$i" bs=1M count=$((cold_mib / 4)) status=none
        i=$((i + 1))
done
dd if=/dev/zero of="$files/hot" bs=1M count=$hot_mib status=none
dd if=/dev/zero of="$files/idle" bs=1M count=$idle_mib status=none
sync
echo 3 >/proc/sys/vm/drop_caches

# The unnamed group: reads its file once and keeps the page cache.
sh -c "echo \$\$ >$cg/$other/cgroup.procs && cat $files/idle >/dev/null && touch $work/idle-read && exec sleep 1000" &
pids="$pids $!"
# The named group: the cold set once, then the hot file again and again.
sh -c "echo \$\$ >$cg/$named/cgroup.procs && cat $files/cold* $files/hot >/dev/null && touch $work/warm &&
       while :; do cat $files/hot >/dev/null; done" &
pids="$pids $!"
i=0
while { [ ! -e "$work/warm" ] || [ ! -e "$work/idle-read" ]; } && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
[ -e "$work/warm" ] || { echo "FAIL: the readers did not get through their files"; exit 1; }
stamp "files written and read"

mib() { echo $(($(cat "$cg/$1/memory.current") / 1048576)); }
some_total() { sed -n 's/^some .*total=\([0-9]*\).*/\1/p' "$cg/$1/memory.pressure"; }
start_named=$(mib $named)
start_other=$(mib $other)
echo "before: $named holds $start_named MiB ($hot_mib hot), $other holds $start_other MiB"
[ "$start_named" -ge $((hot_mib + cold_mib * 3 / 4)) ] && pass "the named group holds the cold set ($start_named MiB)" \
        || fail "the named group holds only $start_named MiB before the daemon starts"

mkdir -p "$work/metrics"
cat >"$work/conf" <<EOF
metrics_directory=$work/metrics
node_interval=2s
reclaim_cgroup=/$named
regulate_budget=${budget_ms}ms
regulate_step_max=10%
log_level=debug
EOF
"$PRESSURED_BIN" --config "$work/conf" --socket "$work/sock" >"$work/log" 2>&1 &
daemon=$!
pids="$pids $daemon"
i=0
while ! grep -q "reclaimed proactively" "$work/log" && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
grep -q "/$named: reclaimed proactively" "$work/log" && pass "the daemon follows the named group" \
        || { fail "the daemon did not take up /$named"; cat "$work/log"; exit 1; }
t0=$(date +%s)
stall0=$(some_total $named)

# memory.current falls towards the hot set: wait until it is within 1.2x of it, or 180 s.
# The reading that ends the wait is the one judged: memory.current moves by a MiB or two from one read to
# the next (the reader's own pages), so a second read can land just over the line.
limit=$((hot_mib * 12 / 10))
reached=$(mib $named)
while [ "$reached" -gt $limit ] && [ $(($(date +%s) - t0)) -lt 180 ]; do sleep 1; reached=$(mib $named); done
t1=$(date +%s)
[ "$reached" -le $limit ] && pass "memory.current fell from $start_named to $reached MiB (hot set $hot_mib, limit $limit) in $((t1 - t0)) s" \
        || fail "memory.current is $reached MiB after $((t1 - t0)) s (hot set $hot_mib MiB, limit $limit)"
# Then it holds there for 20 s more, the reader still reading.
sleep 20
t2=$(date +%s)
held=$(mib $named)
stall=$(( ($(some_total $named) - stall0) / ($t2 - $t0) ))
echo "figures: start=${start_named}MiB reached=${reached}MiB after=$((t1 - t0))s held=${held}MiB hot=${hot_mib}MiB stall=${stall}us/s budget=${budget_ms}ms/s"
[ "$held" -le $((hot_mib * 15 / 10)) ] && pass "it stays near the hot set ($held MiB after 20 s more)" \
        || fail "memory.current grew back to $held MiB"
# The stall itself is a figure, not an assertion (a TCG guest on a busy host stalled 66 ms/s once; the
# benchmark's runs are in docs/performance.md). What is asserted is the law: a step is taken only at a
# reading under the budget, never over it.
echo "    the group's stall over the run: $stall us/s (budget ${budget_ms} ms/s)"
steps_over=$(sed -n 's/.*proactive reclaim: stall \([0-9.]*\) ms\/s against \([0-9.]*\),.*: probe [0-9]*\.$/\1 \2/p' "$work/log" |
        awk '$1 > $2 { n++ } END { print n + 0 }')
steps=$(grep -c "proactive reclaim: stall .*: probe [0-9]*\.$" "$work/log")
[ "$steps" -gt 0 ] && [ "$steps_over" -eq 0 ] && pass "every one of the $steps steps was taken under the budget" \
        || fail "$steps_over of $steps steps were taken at a stall over the budget"

now_other=$(mib $other)
[ "$now_other" -ge $((start_other * 95 / 100)) ] && pass "the unnamed group kept its page cache ($start_other -> $now_other MiB)" \
        || fail "the unnamed group lost page cache: $start_other -> $now_other MiB"
grep -q "$other" "$work/log" && fail "the log names the unnamed group" || pass "the unnamed group is never named in the log"
grep -q "proactive reclaim: stall .*: probe" "$work/log" && pass "the log shows the probes" || fail "no probe in the debug log"
# The kernel's value of the group's pages: the share of what was taken that came back, at each look.
grep -q "proactive reclaim: stall .*, refaulted [0-9.]*%: " "$work/log" && pass "the log shows the share refaulted" ||
        fail "no refault share in the debug log"
echo "    refaulted at the last looks: $(grep -o "refaulted [0-9.]*%" "$work/log" | tail -n 5 | tr '\n' ' ')"
metric() { sed -n "s/^$1 //p" "$work/metrics/pressured.prom"; }
# Reclaimed in full chunks only (a write the kernel could not fill is not counted): at least half of
# what memory.current fell by.
[ "$(metric pressured_proactive_groups)" = 1 ] && [ "$(metric pressured_proactive_reclaimed_bytes_total)" -ge $(((start_named - reached) / 2 * 1048576)) ] &&
        pass "the metrics show one group and what was reclaimed ($(metric pressured_proactive_reclaimed_bytes_total) bytes)" ||
        fail "metrics: groups $(metric pressured_proactive_groups), reclaimed $(metric pressured_proactive_reclaimed_bytes_total)"

# The group goes: the daemon lets go of it.
for p in $(cat "$cg/$named/cgroup.procs"); do kill -9 "$p" 2>/dev/null; done
i=0
while ! rmdir "$cg/$named" 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
i=0
while ! grep -q "/$named: proactive reclaim ends" "$work/log" && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
grep -q "/$named: proactive reclaim ends (it is gone" "$work/log" && pass "a removed group is let go" \
        || fail "the daemon did not let go of the removed group"
stamp "the named group's case done"
kill "$daemon"
wait "$daemon" 2>/dev/null
grep -q "ERROR\|AddressSanitizer\|runtime error" "$work/log" && { fail "errors in the daemon's log"; cat "$work/log"; }

# Owners: user A makes 200 groups under its delegated subtree (chowned on to other uids, as a user
# namespace may) and a 30 x 30 tree that a deeper pattern never matches; user B has 2 groups. B's are
# followed, A's take at most 64 places, and the walks cost the daemon a bounded share of a core.
users=$cg/pressured-test-users
mkdir -p "$users/a" "$users/b"
chown 100001 "$users/a"
chown 100002 "$users/b"
# In one process (perl-base is Essential): 1,330 forks of mkdir and chown took minutes in a TCG guest on
# a busy host.
perl -e 'my $a = shift;
         for my $i (0 .. 199) { mkdir "$a/g$i" or die "mkdir: $!"; chown 200000 + $i, -1, "$a/g$i" or die "chown: $!" }
         for my $i (0 .. 29) { mkdir "$a/n$i" or die "mkdir: $!"; mkdir "$a/n$i/m$_" or die "mkdir: $!" for 0 .. 29 }' \
        "$users/a" || { echo "FAIL: could not make user A's groups"; exit 1; }
mkdir "$users/b/g0" "$users/b/g1"
stamp "user A's groups made"
printf 'metrics_directory=%s\nnode_interval=2s\nreclaim_cgroup=/pressured-test-users/*/*\nreclaim_cgroup=/pressured-test-users/*/*/*/never\nregulate_budget=2ms\nregulate_interval=1s\n' \
        "$work/metrics" >"$work/conf2"
"$PRESSURED_BIN" --config "$work/conf2" --socket "$work/sock2" >"$work/log2" 2>&1 &
daemon=$!
pids="$pids $daemon"
i=0
while ! { grep -q "/pressured-test-users/b/g0: reclaimed proactively" "$work/log2" &&
          grep -q "/pressured-test-users/b/g1: reclaimed proactively" "$work/log2"; } && [ $i -lt 300 ]; do
        sleep 0.1
        i=$((i + 1))
done
[ $i -lt 300 ] && pass "user B's groups are followed beside user A's 1,100" || { fail "user B's groups were crowded out"; tail -n 20 "$work/log2"; }
i=0
while [ "$(metric pressured_proactive_groups)" != 66 ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
[ "$(metric pressured_proactive_groups)" = 66 ] && pass "user A's groups take 64 places (66 in all)" ||
        fail "groups followed: $(metric pressured_proactive_groups), not 64 of A's and 2 of B's"
t0=$(awk '{ print $14 + $15 }' "/proc/$daemon/stat")
sleep 5 # a measure over a span, not a wait for an event
t1=$(awk '{ print $14 + $15 }' "/proc/$daemon/stat")
echo "figures: the daemon used $((t1 - t0)) ticks of CPU in 5 s beside 1,100 of user A's groups"
[ $((t1 - t0)) -lt 100 ] && pass "the walks cost under a fifth of a core ($((t1 - t0)) ticks in 5 s)" ||
        fail "the walks cost $((t1 - t0)) ticks in 5 s"
[ "$(grep -c "pressured-test-users/a/" "$work/log2")" -le 60 ] && pass "user A's log lines are limited" ||
        fail "user A's groups wrote $(grep -c "pressured-test-users/a/" "$work/log2") lines"
kill "$daemon"
wait "$daemon" 2>/dev/null
find "$users" -depth -type d -exec rmdir {} + 2>/dev/null
stamp "user A's groups removed"

[ $fails -eq 0 ] || { echo "--- daemon log (last 60 lines)"; tail -n 60 "$work/log"; }
echo "proactive: $fails failed"
[ $fails -eq 0 ]
