#!/bin/sh
# fusesched@.service's commands run as systemd runs them, without systemd (not
# needed as PID 1): ExecStart from the unit of a DESTDIR install, its variables
# from an instance's env file, with NOTIFY_SOCKET on a socket of the test's
# own. READY=1 (with the daemon's pid) arrives once the volume is mounted and
# serves; ExecReload re-reads the config; KillSignal (SIGTERM) sends STOPPING=1,
# drains, unmounts and exits 0, which systemd counts as a clean stop.
# Environment (tests/install/CMakeLists.txt): BUILD SRC UNIT_TYPE CFG_*.
TEST=install_service
. "$SRC/tests/install/lib.sh"
set -eu
[ "$(id -u)" -eq 0 ] || skip "needs root (mounts)"
[ -c /dev/fuse ] || skip "needs /dev/fuse"
[ "$UNIT_TYPE" = notify ] || skip "built without libsystemd (libsystemd-dev): no sd_notify, the unit is Type=$UNIT_TYPE"
command -v python3 >/dev/null || skip "python3 not found (it listens on the notify socket)"
command -v fusermount3 >/dev/null || skip "fusermount3 not found (package fuse3)"
T=$(mktemp -d /tmp/fusesched-install-service.XXXXXX)
DAEMON= LISTENER=
cleanup() {
	[ -z "$DAEMON" ] || kill -TERM "$DAEMON" 2>/dev/null || true
	[ -z "$LISTENER" ] || kill "$LISTENER" 2>/dev/null || true
	if mounted "$T/mnt"; then
		sleep 1; fusermount3 -u -z "$T/mnt" 2>/dev/null || umount -l "$T/mnt" 2>/dev/null || true
	fi
	rm -rf "$T"
}
trap cleanup EXIT

DESTDIR=$T/root cmake --install "$BUILD" --prefix /usr >"$T/log" 2>&1 || { cat "$T/log" >&2; fail "cmake --install"; }
install_paths /usr
unit=$T/root$UNIT
line() { sed -n "s/^$1=//p" "$unit"; }
[ "$(line Type)" = notify ] || fail "the unit is not Type=notify"
[ "$(line KillSignal)" = SIGTERM ] || fail "the unit does not stop with SIGTERM"

# The instance "vol": its env file, as the unit reads it.
mkdir "$T/backing" "$T/mnt" "$T/etc"
cp "$SRC/conf/fusesched.conf" "$T/etc/vol.conf"
chmod 644 "$T/etc/vol.conf"
cat > "$T/etc/vol.env" <<ENV
BACKING=$T/backing
MOUNTPOINT=$T/mnt
CONFIG=$T/etc/vol.conf
ENV
# The unit's defaults (Environment=), then the env file, as systemd applies them.
CONFIG=$(line Environment | sed -n 's/^CONFIG=//p' | sed 's/%i/vol/g') OPTIONS=
set -a; . "$T/etc/vol.env"; set +a
# ${VAR} and $VAR mean in the unit what they mean to sh for these values (no spaces).
expand() { line "$1" | sed "s#^$BIN #$T/root$BIN #"; }
start=$(expand ExecStart) reload=$(expand ExecReload)
case $start in "$T/root$BIN mount "*) ;; *) fail "ExecStart is not '$BIN mount ...': $start" ;; esac

# The notify socket: a datagram socket, each message written with whether the mount
# was up (in mountinfo and a stat of it answers) when it came.
python3 - "$T/notify.sock" "$T/mnt" > "$T/notify.log" <<'PY' &
import os, socket, sys
path, mnt = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(path)
print("listening", flush=True)
while True:
    msg = s.recv(4096).decode()
    up = any(l.split()[4] == mnt and " fuse.fusesched " in l for l in open("/proc/self/mountinfo"))
    if up and "READY=1" in msg:
        os.stat(mnt)   # answers: the daemon serves
    print(repr(msg), "mounted" if up else "unmounted", flush=True)
    if "STOPPING=1" in msg:
        break
PY
LISTENER=$!
i=0; until grep -q listening "$T/notify.log" 2>/dev/null; do i=$((i+1)); [ $i -lt 100 ] || fail "notify listener did not start"; sleep 0.1; done

(export NOTIFY_SOCKET="$T/notify.sock"; eval "exec $start") 2>"$T/daemon.err" &
DAEMON=$!
i=0; until grep -q READY=1 "$T/notify.log"; do
	i=$((i+1)); kill -0 "$DAEMON" 2>/dev/null || { cat "$T/daemon.err" >&2; fail "the daemon exited before READY=1: $start"; }
	[ $i -lt 300 ] || fail "no READY=1 within 30 s"; sleep 0.1
done
grep "READY=1" "$T/notify.log" | grep -q " mounted$" || { cat "$T/notify.log" >&2; fail "READY=1 came before the mount was up"; }
grep "READY=1" "$T/notify.log" | grep -q "MAINPID=$DAEMON\\\\n" || { cat "$T/notify.log" >&2; fail "READY=1 without MAINPID=$DAEMON"; }
echo data > "$T/mnt/file"
[ "$(cat "$T/backing/file")" = data ] || fail "a write through the mount did not reach the backing directory"
note "ExecStart: READY=1 from pid $DAEMON once $T/mnt was mounted"

# ExecReload, with a changed weight: applied, and a bad file fails the reload.
sed -i 's/^weight = 800$/weight = 700/' "$T/etc/vol.conf"
out=$(eval "$reload" 2>&1) || fail "ExecReload failed: $out"
"$T/root$BIN" stat "$T/mnt" --json >/dev/null || fail "stat after reload"
echo "bogus_key = 1" >> "$T/etc/vol.conf"
if out=$(eval "$reload" 2>&1); then fail "ExecReload of a bad config succeeded: $out"; fi
kill -0 "$DAEMON" || fail "the daemon died on a bad reload"
note "ExecReload: applies a good config, fails on a bad one (the volume keeps running)"

# systemctl stop: KillSignal to the main process.
kill -TERM "$DAEMON"
status=0; wait "$DAEMON" || status=$?
DAEMON=
[ "$status" -eq 0 ] || { cat "$T/daemon.err" >&2; fail "after SIGTERM the daemon exited $status, not 0"; }
wait "$LISTENER" || true
LISTENER=
grep -q "STOPPING=1" "$T/notify.log" || { cat "$T/notify.log" >&2; fail "no STOPPING=1 at SIGTERM"; }
! mounted "$T/mnt" || fail "still mounted after the daemon exited"
[ "$(cat "$T/backing/file")" = data ] || fail "data lost at stop"
# ExecStopPost on a volume already unmounted: quiet, its failure ignored ('-').
post=$(line ExecStopPost | sed "s/^-//; s#\${MOUNTPOINT}#$T/mnt#")
out=$(eval "$post" 2>&1) || true
[ -z "$out" ] || fail "ExecStopPost printed: $out"
note "stop: STOPPING=1, drained, unmounted, exit 0"
