/* Reading /proc/self/mountinfo, whose path fields escape some bytes. */
#ifndef FUSESCHED_MOUNTINFO_H
#define FUSESCHED_MOUNTINFO_H

#include <stddef.h>

/*
 * Copies the LEN bytes of the mountinfo field SRC (not necessarily
 * NUL-terminated) into DST, decoding the kernel's \ooo escapes (space, tab,
 * newline, backslash). A backslash not followed by three octal digits of a
 * byte value is copied as it is. DST holds CAP (> 0) bytes and is always
 * NUL-terminated; a field too long for it is cut short.
 */
void mountinfo_unescape(char *dst, size_t cap, const char *src, size_t len);

/* One line of /proc/self/mountinfo: the mount's device and filesystem type. */
struct mountinfo_entry {
	unsigned int major, minor;
	char fstype[64];
};

/*
 * The topmost mount on path (already resolved, as realpath gives it) in
 * /proc/self/mountinfo, into *out: 0, -ENOENT when nothing is mounted
 * there, or -errno when the file cannot be read.
 */
int mountinfo_find(const char *path, struct mountinfo_entry *out);

#endif
