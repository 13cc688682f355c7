/* Whole transfers on descriptors (fdio.h). */
#include "fusesched/fdio.h"

#include <errno.h>
#include <unistd.h>

int fdio_read_full(int fd, void *buf, size_t bytes)
{
	size_t got = 0;
	while (got < bytes) {
		ssize_t n = read(fd, (char *)buf + got, bytes - got);
		if (n > 0)
			got += (size_t)n;
		else if (n < 0 && errno == EINTR)
			continue;
		else
			return n < 0 ? -errno : -EIO;
	}
	return 0;
}
