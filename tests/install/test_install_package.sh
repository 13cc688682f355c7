#!/bin/sh
# The Debian package: cpack -G DEB builds it (dependencies from dpkg-shlibdeps
# plus fuse3, the config a conffile); dpkg -i installs it, its unit verifies at
# the real paths, the installed binary mounts a volume (directly and through
# mount.fuse3, as fstab does) and unmounts; dpkg -r keeps only the edited
# config, dpkg -P removes everything. A /usr/local install is left alone. The
# package is never left installed, whatever fails.
# Environment (tests/install/CMakeLists.txt): BUILD SRC VERSION MAN_DIR CFG_*.
TEST=install_package
. "$SRC/tests/install/lib.sh"
set -eu
[ "$(id -u)" -eq 0 ] || skip "needs root (dpkg -i, mounts)"
for tool in cpack dpkg dpkg-deb dpkg-query; do
	command -v $tool >/dev/null || skip "$tool not found"
done
command -v dpkg-shlibdeps >/dev/null || skip "dpkg-shlibdeps not found (package dpkg-dev): cpack cannot compute the dependencies"
command -v file >/dev/null || skip "file not found (package file): cpack's dpkg-shlibdeps step needs it"
[ -c /dev/fuse ] || skip "needs /dev/fuse"
command -v fusermount3 >/dev/null || skip "fusermount3 not found (package fuse3)"
if dpkg-query -W -f='${Status}' fusesched 2>/dev/null | grep -qv "not-installed"; then
	skip "a fusesched package is already installed here ($(dpkg-query -W -f='${Version} ${Status}' fusesched)); not touching it"
fi

[ ! -e /etc/fusesched/fusesched.conf ] ||
	skip "/etc/fusesched/fusesched.conf exists, from no package: dpkg -P would remove it; not touching it"
etc_before=$([ -e /etc/fusesched ] && echo yes || echo no)

T=$(mktemp -d /tmp/fusesched-install-package.XXXXXX)
INSTALLED= DAEMON=
# dpkg, waiting while another dpkg/apt holds the lock.
dpkg_run() {
	n=0
	while :; do
		if out=$(dpkg "$@" 2>&1); then printf '%s\n' "$out"; return 0; fi
		case $out in
		*lock*) n=$((n + 1)); [ $n -lt 90 ] || break; sleep 2 ;;
		*) break ;;
		esac
	done
	printf '%s\n' "$out" >&2
	return 1
}
cleanup() {
	[ -z "$DAEMON" ] || kill -TERM "$DAEMON" 2>/dev/null || true
	for m in "$T/mnt" "$T/mnt2"; do
		if mounted "$m"; then
			sleep 1; fusermount3 -u -z "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
		fi
	done
	if [ -n "$INSTALLED" ]; then
		dpkg_run -P fusesched >/dev/null || echo "$TEST: cleanup: dpkg -P fusesched failed" >&2
	fi
	rm -rf "$T"
}
trap cleanup EXIT

# A /usr/local install (cmake --install's default) must come through untouched.
local_state() {
	find /usr/local -path '*fusesched*' ! -type d -exec sha256sum {} + 2>/dev/null | sort
}
local_state > "$T/local.before"

# ---- build and inspect -----------------------------------------------------------------
# In the build directory: cpack builds its preinstall target in the current one.
(cd "$BUILD" && cpack -G DEB --config "$BUILD/CPackConfig.cmake" -B "$T/pkg") > "$T/cpack.log" 2>&1 ||
	{ cat "$T/cpack.log" >&2; fail "cpack -G DEB failed"; }
deb=$(ls "$T"/pkg/fusesched_*.deb 2>/dev/null | head -n 1)
[ -n "$deb" ] || { cat "$T/cpack.log" >&2; fail "cpack made no fusesched_*.deb"; }
case $(basename "$deb") in "fusesched_$VERSION-1_$(dpkg --print-architecture).deb") ;;
*) fail "package file named $(basename "$deb"), not fusesched_$VERSION-1_ARCH.deb" ;; esac
depends=$(dpkg-deb -f "$deb" Depends)
for dep in fuse3 libfuse3-3 liburing2 libinih1 libc6; do
	echo "$depends" | tr ',' '\n' | grep -q "^ *$dep\( \|$\)" || fail "Depends lacks $dep: $depends"
done
dpkg-deb -e "$deb" "$T/control"
grep -qx "/etc/fusesched/fusesched.conf" "$T/control/conffiles" || fail "the config is not a conffile"
for s in postinst prerm postrm; do [ -x "$T/control/$s" ] || fail "no executable $s"; done
install_paths /usr
{
	echo "$BIN"; echo "$ETC/fusesched.conf"; echo "$UNIT"
	if [ -n "$MAN_DIR" ]; then echo "$MAN5"; echo "$MAN8"; fi
} | sort > "$T/expected"
dpkg-deb --fsys-tarfile "$deb" | tar -t | sed -n 's#^\./#/#; /[^/]$/p' | sort > "$T/contents"
diff -u "$T/expected" "$T/contents" >&2 || fail "package contents differ (- expected, + in the package)"
note "$(basename "$deb"): Depends: $depends"

# ---- install -----------------------------------------------------------------------------
INSTALLED=1
dpkg_run --force-confdef --force-confold -i "$deb" > "$T/dpkg.log" || fail "dpkg -i failed"
dpkg-query -W -f='${Status}' fusesched | grep -qx "install ok installed" || fail "not installed after dpkg -i"
! grep -i "error\|warning" "$T/dpkg.log" >&2 || fail "dpkg -i printed the warnings or errors above"
while read -r f; do [ -f "$f" ] || fail "$f missing after dpkg -i"; done < "$T/expected"
dpkg -L fusesched | while read -r f; do [ -d "$f" ] || echo "$f"; done | sort > "$T/listed"
diff -u "$T/expected" "$T/listed" >&2 || fail "dpkg -L differs from the package contents"
/usr/bin/fusesched version | grep -qx "fusesched $VERSION" || fail "/usr/bin/fusesched version"
/usr/bin/fusesched check-config /etc/fusesched/fusesched.conf >/dev/null || fail "the installed config does not pass check-config"
if [ -n "$MAN_DIR" ] && command -v man >/dev/null; then
	[ "$(man -w -M /usr/share/man 8 fusesched)" = "$MAN8" ] || fail "man does not find fusesched(8) at $MAN8"
	[ "$(man -w -M /usr/share/man 5 fusesched.conf)" = "$MAN5" ] || fail "man does not find fusesched.conf(5)"
fi
if command -v systemd-analyze >/dev/null; then
	out=$(MANPATH=/usr/share/man systemd-analyze verify "$UNIT" 2>&1) && [ -z "$out" ] ||
		{ echo "$out" >&2; fail "systemd-analyze verify $UNIT"; }
	note "installed; systemd-analyze verify $UNIT: clean"
else
	note "installed (systemd-analyze not found: unit not verified)"
fi

# ---- mount with the installed binary --------------------------------------------------------
mkdir "$T/backing" "$T/mnt" "$T/mnt2"
/usr/bin/fusesched mount "$T/backing" "$T/mnt" -f -c /etc/fusesched/fusesched.conf 2>"$T/daemon.err" &
DAEMON=$!
n=0; until mounted "$T/mnt"; do
	n=$((n + 1)); kill -0 "$DAEMON" 2>/dev/null || { cat "$T/daemon.err" >&2; fail "the installed daemon exited"; }
	[ $n -lt 200 ] || fail "no mount within 20 s"; sleep 0.1
done
echo data > "$T/mnt/file"
[ "$(cat "$T/backing/file")" = data ] || fail "a write through the mount did not reach the backing directory"
/usr/bin/fusesched stat "$T/mnt" > /dev/null || fail "/usr/bin/fusesched stat"
fusermount3 -u "$T/mnt"
status=0; wait "$DAEMON" || status=$?
DAEMON=
[ $status -eq 0 ] || { cat "$T/daemon.err" >&2; fail "the daemon exited $status after the unmount"; }
note "mounted and unmounted with /usr/bin/fusesched"

# As fstab does: mount(8) runs mount.fuse3, which runs fusesched from PATH (no /usr/local here).
PATH=/usr/sbin:/usr/bin:/sbin:/bin mount -t fuse.fusesched \
	-o nosuid,nodev,config=/etc/fusesched/fusesched.conf "$T/backing" "$T/mnt2" ||
	fail "mount -t fuse.fusesched (mount.fuse3) failed"
[ "$(cat "$T/mnt2/file")" = data ] || fail "reading through the fstab-style mount"
pid=$(/usr/bin/fusesched stat "$T/mnt2" --json | sed -n 's/.*"pid": *\([0-9]*\).*/\1/p' | head -n 1)
[ -n "$pid" ] || fail "no daemon pid from stat --json"
[ "$(readlink "/proc/$pid/exe")" = /usr/bin/fusesched ] || fail "the fstab-style mount runs $(readlink "/proc/$pid/exe")"
umount "$T/mnt2"
n=0; while kill -0 "$pid" 2>/dev/null; do n=$((n + 1)); [ $n -lt 100 ] || fail "daemon $pid still running after umount"; sleep 0.1; done
note "mount -t fuse.fusesched ran /usr/bin/fusesched through mount.fuse3"

# ---- remove, purge -------------------------------------------------------------------------
echo "; edited" >> /etc/fusesched/fusesched.conf
dpkg_run -r fusesched > "$T/dpkg.log" || fail "dpkg -r failed"
dpkg-query -W -f='${Status}' fusesched | grep -qx "deinstall ok config-files" || fail "after dpkg -r: $(dpkg-query -W -f='${Status}' fusesched)"
while read -r f; do
	case $f in /etc/*) [ -f "$f" ] || fail "dpkg -r removed the conffile $f" ;;
	*) [ ! -e "$f" ] || fail "$f still there after dpkg -r" ;; esac
done < "$T/expected"
dpkg_run -P fusesched > "$T/dpkg.log" || fail "dpkg -P failed"
INSTALLED=
! dpkg-query -W -f='${Status}' fusesched 2>/dev/null | grep -qv "not-installed" || fail "still known to dpkg after dpkg -P"
while read -r f; do [ ! -e "$f" ] || fail "$f still there after dpkg -P"; done < "$T/expected"
[ "$etc_before" = yes ] || [ ! -e /etc/fusesched ] || fail "/etc/fusesched still there after dpkg -P: $(ls -A /etc/fusesched)"
local_state > "$T/local.after"
diff -u "$T/local.before" "$T/local.after" >&2 || fail "files under /usr/local changed"
note "dpkg -r kept the edited config only, dpkg -P removed everything; /usr/local untouched"
