/* Decoding mountinfo path fields. */
#include "fusesched/mountinfo.h"

#include <stdbool.h>

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
