/* The datapath's answers to FUSE. */
#include "fusesched/datapath.h"

void datapath_reply_fuse(fuse_req_t req, enum datapath_op op, int err, const void *data,
			 uint64_t bytes)
{
	if (err) {
		fuse_reply_err(req, err);
		return;
	}
	switch (op) {
	case DATAPATH_READ:
		fuse_reply_buf(req, data, bytes);
		break;
	case DATAPATH_WRITE:
	case DATAPATH_COPY_RANGE:
		fuse_reply_write(req, bytes);
		break;
	case DATAPATH_FSYNC:
	case DATAPATH_FDATASYNC:
	case DATAPATH_FALLOCATE:
		fuse_reply_err(req, 0);
		break;
	case DATAPATH_META:
		break; /* answered by its own run */
	}
}
