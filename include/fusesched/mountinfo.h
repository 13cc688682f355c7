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

#endif
