# Sourced by bench/run and bench/flood.
# check_data_path LABEL MOUNT BACKING: 4 MiB of random bytes written through
# the mount must be in the backing directory and read back the same (direct,
# so the daemon serves it): a mount that moves the wrong bytes measures
# nothing. Says so on stderr and fails if not.
check_data_path() {
	local label=$1 mnt=$2 back=$3 ref ok=0
	ref=$(mktemp)
	head -c 4M /dev/urandom >"$ref"
	if dd if="$ref" of="$mnt/.bench-data-check" bs=1M status=none conv=fsync &&
		cmp -s "$ref" "$back/.bench-data-check" &&
		dd if="$mnt/.bench-data-check" bs=1M iflag=direct status=none | cmp -s "$ref" -; then
		ok=1
	fi
	rm -f "$mnt/.bench-data-check" "$back/.bench-data-check" "$ref"
	[ $ok = 1 ] && return 0
	echo "bench: $label moved the wrong bytes (a 4 MiB check through $mnt)" >&2
	return 1
}
