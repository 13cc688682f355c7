# Shared by the tests/install scripts (sh, sourced). TEST names the test.
skip() { echo "SKIP: $TEST: $*" >&2; exit 77; }
fail() { echo "FAIL: $TEST: $*" >&2; exit 1; }
note() { echo "$TEST: $*"; }

# install_paths PREFIX: sets BIN ETC MAN5 MAN8 UNIT (absolute, without DESTDIR) for an
# install to PREFIX, by the rules of packaging/install-files.cmake and GNUInstallDirs,
# from the configure-time dirs in CFG_BINDIR CFG_MANDIR CFG_SYSCONFDIR CFG_UNITDIR.
install_paths() {
	_p=$1
	abs() { case $1 in /*) echo "$1" ;; *) echo "$_p/$1" ;; esac; }
	BIN=$(abs "$CFG_BINDIR")/fusesched
	MAN5=$(abs "$CFG_MANDIR")/man5/fusesched.conf.5.gz
	MAN8=$(abs "$CFG_MANDIR")/man8/fusesched.8.gz
	case $CFG_SYSCONFDIR:$_p in
	/*) ETC=$CFG_SYSCONFDIR ;;
	etc:/usr | etc:/usr/ | etc:/) ETC=/etc ;;
	etc:/opt/*) ETC=/etc/opt/${_p#/opt/} ;;
	*) ETC=$(abs "$CFG_SYSCONFDIR") ;;
	esac
	ETC=$ETC/fusesched
	if [ -n "$CFG_UNITDIR" ]; then UNIT=$(abs "$CFG_UNITDIR"); else UNIT=$_p/lib/systemd/system; fi
	UNIT=$UNIT/fusesched@.service
}

# mounted PATH: is something mounted on PATH (a dead FUSE mount included)?
mounted() { awk -v m="$1" '$5 == m { found = 1 } END { exit !found }' /proc/self/mountinfo; }
