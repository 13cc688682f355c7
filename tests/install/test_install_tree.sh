#!/bin/sh
# cmake --install into a DESTDIR (prefix /usr, as the package), with the default
# prefix (/usr/local), and to a plain prefix without DESTDIR: exactly the
# expected files, modes and paths inside the unit; the installed binary runs and
# accepts the installed config; an edited config survives a second install.
# Environment (tests/install/CMakeLists.txt): BUILD SRC VERSION MAN_DIR UNIT_TYPE CFG_*.
TEST=install_tree
. "$SRC/tests/install/lib.sh"
set -eu
command -v cmake >/dev/null || skip "cmake not found"
T=$(mktemp -d /tmp/fusesched-install-tree.XXXXXX)
trap 'rm -rf "$T"' EXIT

# check_tree ROOT PREFIX [TOP]: the files of one install to PREFIX below ROOT (its
# DESTDIR, or empty), which are all there is below TOP (default ROOT).
check_tree() {
	root=$1
	top=${3:-$1}
	install_paths "$2"
	{
		echo "$BIN"; echo "$ETC/fusesched.conf"; echo "$UNIT"
		if [ -n "$MAN_DIR" ]; then echo "$MAN5"; echo "$MAN8"; fi
	} | sed "s#^#$root#; s#//*#/#g" | sort > "$T/expected"
	find "$top" ! -type d | sed 's#//*#/#g' | sort > "$T/found"
	diff -u "$T/expected" "$T/found" >&2 || fail "install to prefix $2: files differ (- expected, + found)"
	[ "$(stat -c %a "$root$BIN")" = 755 ] || fail "$BIN: mode $(stat -c %a "$root$BIN"), not 755"
	[ "$(stat -c %a "$root$ETC/fusesched.conf")" = 644 ] || fail "$ETC/fusesched.conf: not mode 644"
	[ "$(stat -c %a "$root$UNIT")" = 644 ] || fail "$UNIT: not mode 644"
	"$root$BIN" version | grep -qx "fusesched $VERSION" || fail "$root$BIN version: not 'fusesched $VERSION'"
	"$root$BIN" check-config "$root$ETC/fusesched.conf" >/dev/null ||
		fail "the installed config does not pass check-config"
	cmp -s "$root$ETC/fusesched.conf" "$SRC/conf/fusesched.conf" || fail "installed config differs from conf/fusesched.conf"
	# The unit names this install's paths.
	for want in "Type=$UNIT_TYPE" \
		"ExecStart=$BIN mount \${BACKING} \${MOUNTPOINT} -f -c \${CONFIG} \$OPTIONS" \
		"ExecReload=$BIN reload \${MOUNTPOINT}" \
		"EnvironmentFile=$ETC/%i.env" "Environment=CONFIG=$ETC/%i.conf"; do
		grep -qxF "$want" "$root$UNIT" || fail "$UNIT: no line '$want'"
	done
	if grep -n '@[A-Z_]*@' "$root$UNIT" >&2; then fail "$UNIT: unsubstituted @VARIABLE@"; fi
	for page in "$MAN5" "$MAN8"; do
		[ -z "$MAN_DIR" ] || gzip -t "$root$page" || fail "$page: not a valid gzip file"
	done
	note "prefix $2: $(wc -l < "$T/found") files as expected"
}

# As the Debian package lays it out: /usr, config in /etc.
DESTDIR=$T/pkg cmake --install "$BUILD" --prefix /usr >"$T/log" 2>&1 || { cat "$T/log" >&2; fail "cmake --install --prefix /usr"; }
check_tree "$T/pkg" /usr
# The configured prefix (default /usr/local: config in /usr/local/etc).
prefix=$(sed -n 's/^CMAKE_INSTALL_PREFIX:PATH=//p' "$BUILD/CMakeCache.txt")
DESTDIR=$T/default cmake --install "$BUILD" >"$T/log" 2>&1 || { cat "$T/log" >&2; fail "cmake --install"; }
check_tree "$T/default" "$prefix"
# A prefix of one's own, no DESTDIR (no root needed).
cmake --install "$BUILD" --prefix "$T/own" >"$T/log" 2>&1 || { cat "$T/log" >&2; fail "cmake --install --prefix DIR"; }
check_tree "" "$T/own" "$T/own"

# An operator's edited config is kept by a second install.
echo "; edited" >> "$T/pkg/etc/fusesched/fusesched.conf"
DESTDIR=$T/pkg cmake --install "$BUILD" --prefix /usr >"$T/log" 2>&1 || { cat "$T/log" >&2; fail "second install"; }
grep -q "Keeping: .*fusesched.conf" "$T/log" || fail "second install: no 'Keeping:' message for the edited config"
tail -n 1 "$T/pkg/etc/fusesched/fusesched.conf" | grep -qx "; edited" || fail "second install overwrote the edited config"
note "an edited config is kept by a second install"
