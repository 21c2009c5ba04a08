#!/bin/bash
# meson install into a DESTDIR puts everything where a system expects it; a client builds against the
# installed pkg-config file and talks to the daemon; the public header stands alone as C99 and C++; the
# version script and the exported symbols agree.
set -u
BUILD=${PRESSURED_BUILD_ROOT:?}
SRC=${PRESSURED_SOURCE_ROOT:?}
pass=0
fail=0
check() { if [ "$2" -eq 0 ]; then pass=$((pass + 1)); echo "ok - $1"; else fail=$((fail + 1)); echo "FAIL - $1"; fi; }

dest=$(mktemp -d /tmp/pressured-install-XXXXXX)
daemon_pid=
cleanup() {
        [ -n "$daemon_pid" ] && kill "$daemon_pid" 2>/dev/null && wait "$daemon_pid" 2>/dev/null
        rm -rf "$dest"
}
trap cleanup EXIT

meson install -C "$BUILD" --destdir "$dest" --no-rebuild --quiet >"$dest.log" 2>&1
check "meson install exits 0" $?
rm -f "$dest.log"

prefix=$(meson introspect "$BUILD" --buildoptions | python3 -c 'import json,sys; print([o["value"] for o in json.load(sys.stdin) if o["name"]=="prefix"][0])')
libdir=$(meson introspect "$BUILD" --buildoptions | python3 -c 'import json,sys; print([o["value"] for o in json.load(sys.stdin) if o["name"]=="libdir"][0])')
case "$libdir" in /*) ;; *) libdir=$prefix/$libdir ;; esac
root=$dest$prefix

for f in sbin/pressured bin/pressurectl include/pressure.h share/man/man8/pressured.8 share/man/man1/pressurectl.1 \
         share/man/man5/pressured.conf.5 share/man/man3/libpressure.3 share/doc/pressured/examples/pressured.conf; do
        check "installed $f" $([ -e "$root/$f" ]; echo $?)
done
# Where dbus-daemon reads them, whatever the prefix (it has no /usr/local/share/dbus-1/system.d).
dbus_datadir=$(meson introspect "$BUILD" --buildoptions | python3 -c 'import json,sys; print([o["value"] for o in json.load(sys.stdin) if o["name"]=="dbus_datadir"][0])')
for f in dbus-1/system.d/org.freedesktop.LowMemoryMonitor.conf dbus-1/system-services/org.freedesktop.LowMemoryMonitor.service; do
        check "installed $dbus_datadir/$f" $([ -e "$dest$dbus_datadir/$f" ]; echo $?)
done
# system.conf includes "system.d" relative to itself: /usr/share/dbus-1/system.d on Debian.
check "the policy is where the system bus reads policies" \
        $([ "$dbus_datadir" != /usr/share ] || grep -q "<includedir>system.d</includedir>" /usr/share/dbus-1/system.conf; echo $?)
check "installed libpressure with its soname" $([ -e "$dest$libdir/libpressure.so.0" ] && [ -L "$dest$libdir/libpressure.so" ]; echo $?)
check "installed libpressure.pc" $([ -e "$dest$libdir/pkgconfig/libpressure.pc" ]; echo $?)
units=$(find "$dest" -name pressured.service -o -name pressured.socket | wc -l)
check "installed both units" $([ "$units" -eq 2 ]; echo $?)
check "the installed service runs the installed daemon" \
        $(grep -q "^ExecStart=$prefix/sbin/pressured\$" "$(find "$dest" -name pressured.service)"; echo $?)
soname=$(objdump -p "$dest$libdir/libpressure.so.0" | awk '$1 == "SONAME" { print $2 }')
check "soname is libpressure.so.0" $([ "$soname" = libpressure.so.0 ]; echo $?)

# A client from the installed files only (built the way the library was, for a sanitizer build).
sanitize=$(meson introspect "$BUILD" --buildoptions | python3 -c 'import json,sys; print([o["value"] for o in json.load(sys.stdin) if o["name"]=="b_sanitize"][0])')
san_flags=
[ "$sanitize" != none ] && san_flags="-fsanitize=$sanitize"
export PKG_CONFIG_PATH=$dest$libdir/pkgconfig PKG_CONFIG_SYSROOT_DIR=$dest
cc $san_flags -o "$dest/client" "$SRC/tests/install-client.c" $(pkg-config --cflags --libs libpressure) 2>&1
check "a client compiles against the installed pkg-config file" $?
check "pkg-config says 1.3.0, the daemon's version" \
        $([ "$(pkg-config --modversion libpressure)" = 1.3.0 ] && [ "$("$root/sbin/pressured" --version)" = "pressured 1.3.0" ]; echo $?)
check "a project may require libpressure >= 1.0" $(pkg-config --atleast-version=1.0 libpressure; echo $?)
sock=$dest/io.pressured
"$root/sbin/pressured" --config /dev/null --socket "$sock" 2>/dev/null &
daemon_pid=$!
for _ in $(seq 1 500); do [ -S "$sock" ] && break; sleep 0.01; done
out=$(LD_LIBRARY_PATH=$dest$libdir "$dest/client" "$sock")
check "and talks to the installed daemon" $?
check "and reads a level" $(echo "$out" | grep -qE '^system level (ok|low|medium|critical)$'; echo $?)
# The Python client, where the configured Python finds it (its site-packages under the prefix).
python=$(meson introspect "$BUILD" --buildoptions | python3 -c 'import json,sys; print([o["value"] for o in json.load(sys.stdin) if o["name"]=="python"][0])')
[ -n "$python" ] || { [ -x /usr/bin/python3 ] && python=/usr/bin/python3 || python=python3; }
pydir=$("$python" "$SRC/build-aux/python-dir.py" "$prefix")
check "installed the pressure package in $pydir" $([ -e "$dest$pydir/pressure/__init__.py" ] && [ -e "$dest$pydir/pressure/py.typed" ]; echo $?)
check "which that Python searches" $([ "$prefix" != /usr ] && [ "$prefix" != /usr/local ] ||
        "$python" -c "import sys; sys.exit('$pydir' not in sys.path)"; echo $?)
out=$(cd / && PYTHONPATH=$dest$pydir "$python" -c "import pressure; print(pressure.__version__, pressure.Client('$sock').status().system.level)")
check "the installed Python client reads a level: $out" $(echo "$out" | grep -qE '^1.3.0 (ok|low|medium|critical)$'; echo $?)

# The public header alone: strict C99, and C++.
echo '#include <pressure.h>' >"$dest/h.c"
cc -std=c99 -pedantic -Wall -Wextra -Werror -I"$root/include" -c "$dest/h.c" -o "$dest/h.o"
check "pressure.h compiles alone as C99 -pedantic -Werror" $?
cp "$dest/h.c" "$dest/h.cc"
c++ -std=c++11 -pedantic -Wall -Wextra -Werror -I"$root/include" -c "$dest/h.cc" -o "$dest/h2.o"
check "pressure.h compiles as C++" $?

# The man page's SYNOPSIS is real C: its prototypes compile beside the header's (a conflict is an error).
python3 - "$SRC/man/libpressure.3" >"$dest/synopsis.c" <<'PY'
import shlex, sys
page = open(sys.argv[1]).read()
synopsis = page[page.index(".SH SYNOPSIS"):page.index(".fi")]
print("#include <pressure.h>")
for line in synopsis.splitlines():
    if line.startswith(".BI "):  # alternating fonts, concatenated
        print("".join(shlex.split(line[4:])))
    elif line.startswith(".B ") and "#include" not in line:
        print(" ".join(shlex.split(line[3:])))
PY
cc -std=c99 -pedantic -Wall -Wextra -Werror -I"$root/include" -c "$dest/synopsis.c" -o "$dest/synopsis.o"
check "libpressure(3)'s SYNOPSIS compiles against pressure.h" $?

# The version script and the library agree: every symbol listed is exported, nothing else is.
listed=$(sed -n 's/^[[:space:]]*\(pressure_[a-z_0-9]*\);/\1/p' "$SRC/lib/libpressure.sym" | sort)
exported=$(nm -D --defined-only "$dest$libdir/libpressure.so.0" | awk '$2 == "T" { sub(/@.*/, "", $3); print $3 }' | sort)
check "version script and exported symbols agree" $([ "$listed" = "$exported" ]; echo $?)
[ "$listed" = "$exported" ] || diff <(echo "$listed") <(echo "$exported")
# The stable nodes' symbols are declared in the installed header; LIBPRESSURE_PRIVATE's only in the
# uninstalled lib/pressure-private.h.
private=$(sed -n '/^LIBPRESSURE_PRIVATE/,/^}/s/^[[:space:]]*\(pressure_[a-z_0-9]*\);/\1/p' "$SRC/lib/libpressure.sym" | sort)
stable=$(comm -23 <(echo "$exported") <(echo "$private"))
declared=$(grep -oE '\bpressure_[a-z_0-9]+\(' "$SRC/include/pressure.h" | tr -d '(' | sort -u)
check "every stable exported function is declared in pressure.h" $([ "$(comm -13 <(echo "$declared") <(echo "$stable"))" = "" ]; echo $?)
declared_private=$(grep -oE '\bpressure_[a-z_0-9]+\(' "$SRC/lib/pressure-private.h" | tr -d '(' | sort -u)
check "every private one in pressure-private.h, and none in pressure.h" \
        $([ "$(comm -13 <(echo "$declared_private") <(echo "$private"))" = "" ] && [ "$(comm -12 <(echo "$declared") <(echo "$private"))" = "" ]; echo $?)
check "pressure-private.h is not installed" $([ -z "$(find "$dest" -name pressure-private.h)" ]; echo $?)

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
