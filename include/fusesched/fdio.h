/* Whole transfers on descriptors that may return less than asked. */
#ifndef FUSESCHED_FDIO_H
#define FUSESCHED_FDIO_H

#include <stddef.h>

/*
 * Reads exactly bytes from fd into buf, retrying short reads and EINTR:
 * 0, -errno, or -EIO when fd ends first. Used for the payloads a worker
 * splices into its pipe, which the pipe hands back in pieces.
 */
int fdio_read_full(int fd, void *buf, size_t bytes);

#endif
