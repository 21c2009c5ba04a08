#!/bin/sh
# The Debian packages (debian/): build them from a copy of the tree (build-aux/build-debs), twice (the
# second with a higher version, for the upgrade), check them with lintian (no error, no warning), check
# that the symbols file is what build-aux/gen-symbols makes of the version script, then install, serve,
# reload, upgrade and purge them under real systemd in the VM (tests/vm/package-cases.sh).
#   tests/test-package.sh BUILD_DIR
set -u
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:?usage: tests/test-package.sh BUILD_DIR}" && pwd)
pass=0 fail=0
check() { if [ "$2" -eq 0 ]; then pass=$((pass + 1)); echo "ok - $1"; else fail=$((fail + 1)); echo "FAIL - $1"; fi; return "$2"; }
for tool in dpkg-buildpackage dh lintian; do
        command -v "$tool" >/dev/null || { echo "SKIP: $tool is not installed (build-aux/install-deps installs it)"; exit 77; }
done
debs=$build/debs
rm -rf "$debs"
mkdir -p "$debs"

"$src/build-aux/gen-symbols" | cmp -s - "$src/debian/libpressure0.symbols"
check "debian/libpressure0.symbols is what build-aux/gen-symbols makes of lib/libpressure.sym" $?

version=$(dpkg-parsechangelog -l "$src/debian/changelog" -S Version)
"$src/build-aux/build-debs" "$debs/v1" >/dev/null
check "dpkg-buildpackage -us -uc -b builds $version" $? || exit 1
"$src/build-aux/build-debs" "$debs/v2" "$version+test1" >/dev/null
check "and a rebuild as $version+test1" $? || exit 1
for p in pressured libpressure0 libpressure-dev python3-pressure; do
        check "$p is built" $(ls "$debs/v1/${p}_"*.deb >/dev/null 2>&1; echo $?)
done
check "the library's symbols were checked against the symbols file (dpkg-gensymbols -c4)" \
        $(grep -q "dpkg-gensymbols.*-c4" "$debs/v1/build.log"; echo $?)

# lintian: no error and no warning; what it says below that is printed.
lintian --fail-on error,warning --display-info "$debs"/v1/*.changes >"$debs/lintian.log" 2>&1
status=$?
sed 's/^/    /' "$debs/lintian.log"
check "lintian: no error, no warning" $status

# Install, upgrade, purge under systemd.
PRESSURED_VM_INIT=systemd PRESSURED_VM_INSTALL=no "$src/tests/vm/run" "$build" "env DEBS=$debs sh $src/tests/vm/package-cases.sh"
status=$?
if [ $status = 77 ]; then
        echo "SKIP: the VM cannot run here; the packages were built and checked, not installed"
        echo "package: $pass passed, $fail failed"
        exit 77
fi
check "install, serve, reload, upgrade and purge under systemd (tests/vm/package-cases.sh)" $status
echo "package: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
