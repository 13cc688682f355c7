/* Shared between the tenant sources; not part of the public face. */
#ifndef FUSESCHED_TENANT_INTERNAL_H
#define FUSESCHED_TENANT_INTERNAL_H

#include <stddef.h>
#include <sys/types.h>

/* Reads up to CAP-1 bytes of PATH and NUL-terminates them.  Returns the
 * length or a negative errno. */
ssize_t tenant_read_small_file(const char *path, char *buf, size_t cap);

#endif
