#!/bin/bash
# The man pages render without a warning, carry no macro left in their text, say the version meson
# builds, and libpressure(3) names every stable function of the library.
set -u
SRC=${PRESSURED_SOURCE_ROOT:?}
pass=0
fail=0
check() { if [ "$2" -eq 0 ]; then pass=$((pass + 1)); echo "ok - $1"; else fail=$((fail + 1)); echo "FAIL - $1"; fi; }

command -v groff >/dev/null && command -v man >/dev/null || { echo "SKIP: needs groff-base and man-db"; exit 77; }
version=$(sed -n "s/^ *version : '\([0-9.]*\)',$/\1/p" "$SRC/meson.build" | head -1)
tmp=$(mktemp -d /tmp/pressured-man-XXXXXX)
trap 'rm -rf "$tmp"' EXIT

for page in "$SRC"/man/*.[0-9]; do
        name=$(basename "$page")
        groff -man -ww -Tutf8 -z "$page" 2>"$tmp/groff.err"
        check "$name: groff -ww says nothing" $([ ! -s "$tmp/groff.err" ]; echo $?)
        [ -s "$tmp/groff.err" ] && sed 's/^/    /' "$tmp/groff.err"
        LC_ALL=C.UTF-8 MANWIDTH=100 man --warnings -l "$page" 2>"$tmp/man.err" | col -b >"$tmp/text"
        check "$name: man --warnings says nothing" $([ ! -s "$tmp/man.err" ]; echo $?)
        [ -s "$tmp/man.err" ] && sed 's/^/    /' "$tmp/man.err"
        # A request glued to text ("...of..TP") is printed, not obeyed.
        check "$name: no request left in the text" $(! grep -nE '\.(TP|PP|IP|BR|BI|RB|IR|nf|fi|br|SH)\b' "$tmp/text" | grep -vE '\.(br|fi)[a-z]' >"$tmp/stray"; [ ! -s "$tmp/stray" ]; echo $?)
        [ -s "$tmp/stray" ] && sed 's/^/    /' "$tmp/stray"
        check "$name: says version $version" $(head -1 "$page" | grep -q "\"pressured $version\""; echo $?)
done

# Every configuration key in pressured.conf(5) and in the shipped /etc/pressured.conf, which says it
# shows every key with its default.
for key in $(grep -o '{ "[a-z_]*", parse' "$SRC/daemon/config.c" | cut -d'"' -f2); do
        grep -q "$key=" "$SRC/man/pressured.conf.5" || echo "$key" >>"$tmp/no-man"
        grep -q "^#$key=" "$SRC/data/pressured.conf" || echo "$key" >>"$tmp/no-conf"
done
check "every key is in pressured.conf(5)" $([ ! -s "$tmp/no-man" ]; echo $?)
[ -s "$tmp/no-man" ] && sed 's/^/    missing: /' "$tmp/no-man"
check "every key is in the shipped pressured.conf" $([ ! -s "$tmp/no-conf" ]; echo $?)
[ -s "$tmp/no-conf" ] && sed 's/^/    missing: /' "$tmp/no-conf"
# No page runs past 80 columns where a terminal shows it.
for page in "$SRC"/man/*.[0-9]; do
        LC_ALL=C.UTF-8 MANWIDTH=80 man -l "$page" 2>/dev/null | col -b | awk 'length > 80' >"$tmp/wide"
        check "$(basename "$page"): no line past 80 columns" $([ ! -s "$tmp/wide" ]; echo $?)
        [ -s "$tmp/wide" ] && head -3 "$tmp/wide" | sed 's/^/    /'
done

# Every stable symbol (not LIBPRESSURE_PRIVATE's) in libpressure(3)'s SYNOPSIS.
awk '/^LIBPRESSURE_PRIVATE/ { exit } /^[ \t]+pressure_[a-z0-9_]+;/ { gsub(/[ \t;]/, ""); print }' "$SRC/lib/libpressure.sym" | sort >"$tmp/symbols"
sed -n '/^\.SH SYNOPSIS/,/^\.SH DESCRIPTION/p' "$SRC/man/libpressure.3" | grep -oE 'pressure_[a-z0-9_]+\(' | tr -d '(' | sort -u >"$tmp/listed"
missing=$(comm -23 "$tmp/symbols" "$tmp/listed")
check "libpressure(3) lists all $(wc -l <"$tmp/symbols") stable functions" $([ -z "$missing" ]; echo $?)
[ -n "$missing" ] && echo "    missing: $missing"
for page in pressurectl.1 pressured.8 pressured.conf.5 libpressure.3 pressure-adapt.1; do
        check "$page has EXAMPLES" $(grep -q '^\.SH EXAMPLES' "$SRC/man/$page"; echo $?)
done

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
