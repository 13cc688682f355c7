#!/bin/sh
# systemd-analyze verify on fusesched@.service as `cmake --install --prefix /usr`
# puts it in a DESTDIR. verify needs the commands it names to exist and runs
# `man` for Documentation=: the copy verified names the DESTDIR's binary, and
# MANPATH points at the DESTDIR's man pages. verify exits 0 on lines it
# ignores, so any output fails. (install_package verifies the unit installed
# by the package, at its real paths.)
# Environment (tests/install/CMakeLists.txt): BUILD SRC MAN_DIR UNIT_TYPE CFG_*.
TEST=install_units
. "$SRC/tests/install/lib.sh"
set -eu
command -v systemd-analyze >/dev/null || skip "systemd-analyze not found (package systemd)"
T=$(mktemp -d /tmp/fusesched-install-units.XXXXXX)
trap 'rm -rf "$T"' EXIT
D=$T/root
DESTDIR=$D cmake --install "$BUILD" --prefix /usr >"$T/log" 2>&1 || { cat "$T/log" >&2; fail "cmake --install"; }
install_paths /usr
[ -f "$D$UNIT" ] || fail "no $UNIT in the DESTDIR install"
mkdir "$T/units"
sed "s#$BIN#$D$BIN#g" "$D$UNIT" > "$T/units/fusesched@.service"
grep -q "^ExecStart=$D$BIN " "$T/units/fusesched@.service" || fail "could not point the unit at $D$BIN"
if [ -n "$MAN_DIR" ] && command -v man >/dev/null; then
	export MANPATH="$D/usr/share/man"
else
	# Without the pages (or man) verify could only report them missing.
	sed -i '/^Documentation=/d' "$T/units/fusesched@.service"
	note "Documentation= not checked: $([ -n "$MAN_DIR" ] && echo "man not found" || echo "man pages not built")"
fi
out=$(systemd-analyze verify "$T/units/fusesched@.service" 2>&1) || { echo "$out" >&2; fail "systemd-analyze verify failed"; }
[ -z "$out" ] || { echo "$out" >&2; fail "systemd-analyze verify reported problems"; }
note "systemd-analyze verify fusesched@.service: clean (Type=$UNIT_TYPE)"
