/* Decoding mountinfo path fields; finding a mount in /proc/self/mountinfo. */
#include "fusesched/mountinfo.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool is_octal(char c, char highest)
{
	return c >= '0' && c <= highest;
}

void mountinfo_unescape(char *dst, size_t cap, const char *src, size_t len)
{
	size_t o = 0;

	for (size_t i = 0; i < len && o + 1 < cap; i++) {
		if (src[i] == '\\' && i + 3 < len && is_octal(src[i + 1], '3') &&
		    is_octal(src[i + 2], '7') && is_octal(src[i + 3], '7')) {
			dst[o++] = (char)((src[i + 1] - '0') * 64 + (src[i + 2] - '0') * 8 +
					  (src[i + 3] - '0'));
			i += 3;
		} else {
			dst[o++] = src[i];
		}
	}
	dst[o] = '\0';
}

int mountinfo_find(const char *path, struct mountinfo_entry *out)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return -errno;
	int found = -ENOENT;
	char *line = NULL;
	size_t cap = 0;
	/* "ID PARENT MAJOR:MINOR ROOT MOUNTPOINT OPTIONS [TAGS...] - FSTYPE SOURCE ...":
	 * mounts stack in order, so the last match is the one on top. */
	while (getline(&line, &cap, f) > 0) {
		struct mountinfo_entry e = {0};
		int point_start = 0, point_end = 0;
		if (sscanf(line, "%*u %*u %u:%u %*s %n%*s%n", &e.major, &e.minor, &point_start,
			   &point_end) < 2 || point_end <= point_start)
			continue;
		char point[PATH_MAX];
		mountinfo_unescape(point, sizeof(point), line + point_start, (size_t)(point_end - point_start));
		const char *sep = strstr(line, " - ");
		if (strcmp(point, path) != 0 || !sep || sscanf(sep + 3, "%63s", e.fstype) != 1)
			continue;
		*out = e;
		found = 0;
	}
	free(line);
	fclose(f);
	return found;
}
