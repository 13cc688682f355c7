/* Socket path of a mountpoint: readable, injective, bounded. */
#include "fusesched/ctl.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/un.h>

static uint64_t hash_fnv1a64(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
	return h;
}

static bool is_plain(char c, bool first)
{
	if (c == '.')
		return !first;       /* a leading dot would hide the socket */
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '_' || c == ':';
}

int ctl_socket_path_for_mount(const char *mountpoint, char *out, size_t out_bytes)
{
	/* Callers pass canonical paths (realpath, mountinfo), so one mount has one name. */
	if (mountpoint[0] != '/')
		return -EINVAL;
	/* What fits in sun_path after "DIR/" and ".sock" and the NUL. */
	enum { NAME_MAX_BYTES = sizeof(((struct sockaddr_un *)0)->sun_path) - sizeof(CTL_SOCKET_DIR) - 6 };
	/* Cut names end in "~HASH"; '~' is always escaped otherwise, so they never collide with uncut ones. */
	enum { CUT_BYTES = NAME_MAX_BYTES - 17 };
	char name[NAME_MAX_BYTES + 1];
	size_t n = 0;
	bool cut = false;
	const char *p = mountpoint;
	while (*p == '/')
		p++;
	if (!*p)
		name[n++] = '-';
	for (; *p && !cut; p++) {
		char piece[5];
		if (*p == '/')
			snprintf(piece, sizeof(piece), "-");
		else if (is_plain(*p, n == 0))
			snprintf(piece, sizeof(piece), "%c", *p);
		else
			snprintf(piece, sizeof(piece), "\\x%02x", (unsigned char)*p);
		size_t len = strlen(piece);
		if (n + len > NAME_MAX_BYTES) {
			cut = true;
			break;
		}
		memcpy(name + n, piece, len);
		n += len;
	}
	if (cut) {
		if (n > CUT_BYTES)
			n = CUT_BYTES;
		n += (size_t)snprintf(name + n, sizeof(name) - n, "~%016llx",
				      (unsigned long long)hash_fnv1a64(mountpoint));
	}
	name[n] = '\0';
	int len = snprintf(out, out_bytes, "%s/%s.sock", CTL_SOCKET_DIR, name);
	return len < 0 || (size_t)len >= out_bytes ? -ENAMETOOLONG : 0;
}
