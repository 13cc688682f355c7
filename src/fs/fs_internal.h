/* Private to src/fs: the state and helpers the operation files share. */
#ifndef FUSESCHED_FS_INTERNAL_H
#define FUSESCHED_FS_INTERNAL_H

#include "fusesched/creds.h"
#include "fusesched/datapath.h"
#include "fusesched/fs.h"
#include "fusesched/inode.h"

#include <pthread.h>
#include <stdatomic.h>
#include <sys/stat.h>

/*
 * Every open file and directory handle is on the fs's list, so handles the
 * kernel never released (the daemon was stopped with files open) are
 * closed at shutdown instead of leaking.
 */
struct fs_handle {
	struct fs_handle *prev, *next;
	void (*close)(struct fs *fs, struct fs_handle *h);
};

struct fs {
	struct fs_options opts;
	pthread_mutex_t handles_lock;
	struct fs_handle handles;            /* list head */
	struct inode_table *inodes;
	struct datapath *datapath;
	struct fuse_session *session; /* for notifications; NULL until attached */
	struct backing_watch *watch;  /* changes beside the mount (watch.h); NULL: not watched */
	dev_t watched_dev;
	bool selinux_active;          /* the host enforces SELinux: it answers security.selinux */
	atomic_uint_fast64_t fd_exhausted_logged_s; /* rate limit for the EMFILE log line */
	/*
	 * Bumped whenever a setattr gives a file setuid/setgid: an open file
	 * whose writes found none rechecks only then (fs_file.privs_checked).
	 */
	atomic_uint_fast64_t privs_epoch;
	atomic_bool root_alias_armed; /* fs_root_alias_arm: the next lookup of its name answers it */
	atomic_bool root_alias_used;  /* the kernel walks the root as FS_ROOT_ALIAS_ID */
	atomic_uint_fast64_t pruned_ns; /* when the kernel was last asked to forget nodes */
	atomic_bool prune_refused;    /* the kernel cannot (before FUSE_NOTIFY_PRUNE, 7.45) */
};

/* An open regular file: fuse_file_info.fh points at one. */
struct fs_file {
	struct fs_handle handle;
	struct datapath_file data;
	fuse_ino_t node_id;      /* its descriptor is held (inode_table_fd_hold) while open */
	uint8_t open_durability; /* what its backing descriptor makes of every write (durability()) */
	/* fs.privs_epoch + 1 when a write last left it without setuid/setgid; 0: never. */
	atomic_uint_fast64_t privs_checked;
};

static inline struct fs *fs_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

static inline struct fs_file *fs_file_of(const struct fuse_file_info *fi)
{
	return (struct fs_file *)(uintptr_t)fi->fh;
}

/*
 * The request this worker is serving is a write, truncation or O_TRUNC open
 * by a caller without CAP_FSETID (the kernel's flag, see channel.c): it must
 * drop setuid and setgid, as a local filesystem does. The daemon changes the
 * backing file as root, which would keep them.
 */
bool fs_request_drops_privs(void);
/* The CREATE this worker is serving is an open with O_TMPFILE (channel.c). */
bool fs_request_is_tmpfile(void);
/*
 * FUSE_STATX (protocol 7.39, kernel 6.6), which the kernel sends for a
 * statx(2) asking for more than the basic fields (the birth time) and
 * libfuse 3.14 answers with ENOSYS, after which the kernel never asks
 * again and shows no birth time. The channel serves it itself: the
 * request's bytes (header and fs_statx_in), its answer written to fd.
 */
#define FS_FUSE_STATX 52u
void fs_serve_statx(struct fs *fs, int fd, const void *request, size_t bytes);
/*
 * The payload of the write this worker just read, when the channel read it
 * into a datapath buffer (see channel.c) and it is bytes long: the caller
 * owns it from now on (submit it as write_owned). NULL: use libfuse's.
 */
const void *fs_channel_take_payload(size_t bytes);
/*
 * The pipe the payload of the write this worker just read waits in, when
 * the channel spliced it (see channel.c) and it is bytes long; -1: none.
 */
int fs_channel_take_piped(size_t bytes);
/*
 * Closes the channel's pipes not in use, and those in use as they come
 * back: descriptors ran out, and splicing is only a saving. How many closed.
 */
unsigned fs_channel_give_up_pipes(void);

/* setgid without group-execute is mandatory locking, which writes keep. */
static inline bool fs_mode_has_privs(mode_t mode)
{
	return (mode & S_ISUID) || ((mode & S_ISGID) && (mode & S_IXGRP));
}

static inline mode_t fs_mode_without_privs(mode_t mode)
{
	return mode & ~(mode_t)(S_ISUID | S_ISGID) & 07777;
}

/* The kernel's cached attributes (and ACLs) of ino are stale: it asks again. */
void fs_invalidate_attr(struct fs *fs, fuse_ino_t ino);

/*
 * fd is on a local filesystem (ext4, xfs, tmpfs): nothing to report at
 * close, and every change to it is made on this host, where fanotify sees
 * it. Network and FUSE filesystems are not.
 */
bool fs_fd_on_local_fs(int fd);

/*
 * How long the kernel may trust a name, the attributes, or a missing name
 * of a file on dev: fs_options' timeouts, or watch_timeout_s on the watched
 * filesystem unless set explicitly (watch.h).
 */
double fs_entry_timeout_s(const struct fs *fs, dev_t dev);
double fs_attr_timeout_s(const struct fs *fs, dev_t dev);
double fs_negative_timeout_s(const struct fs *fs, dev_t dev);

void fs_handle_track(struct fs *fs, struct fs_handle *h);
void fs_handle_untrack(struct fs *fs, struct fs_handle *h);

/* "/proc/self/fd/N": reopens or acts on an O_PATH descriptor's file. */
#define FS_PROC_PATH_BYTES 32
void fs_proc_path(int fd, char out[FS_PROC_PATH_BYTES]);

/*
 * The caller of req: fsuid and fsgid, and with_groups its supplementary
 * groups (a read of /proc/PID/task/TID/status; none for root, whose
 * switch is skipped anyway).
 */
void fs_caller_creds(fuse_req_t req, bool with_groups, struct creds *out);

/* Runs op(arg) as c (0 or -errno from op): for root, with no switch. */
int fs_run_as(const struct creds *c, int (*op)(void *arg), void *arg);

/*
 * Runs op(arg) as the caller of req and returns its result (0 or -errno).
 * Supplementary groups cost a read of /proc, so they are fetched only when
 * the first try is refused (EACCES, EPERM); op must have changed nothing
 * when it fails that way. An operation whose result depends on the groups
 * without failing (setgid inheritance) fetches them first instead
 * (fs_caller_creds with groups, then fs_run_as).
 */
int fs_run_as_caller(fuse_req_t req, int (*op)(void *arg), void *arg);

/*
 * Whether the caller of req holds capability (CAP_*) in its effective set,
 * from /proc/PID/status: for the rare answers the kernel leaves to the
 * filesystem. false when the caller cannot be seen.
 */
bool fs_caller_has_capability(fuse_req_t req, int capability);

/*
 * After an EMFILE/ENFILE (err is -errno): gives cached node descriptors
 * back to the process; true when the caller should retry its open once.
 * Otherwise open files hold every descriptor, and that is logged.
 */
bool fs_reclaim_fds(struct fs *fs, int err);

/*
 * Asks the kernel to forget the least recently used nodes that hold a
 * descriptor for want of a file handle, when there are more of those than
 * the inode table's bound (inode_table_prune_pick), or any when
 * short_of_fds. At most once per FS_PRUNE_INTERVAL_MS unless short_of_fds.
 * The forgets come back as requests, which close the descriptors. Call
 * with no request of one's own unanswered, if it can wait (the kernel may
 * write back what a forgotten inode still held).
 */
#define FS_PRUNE_INTERVAL_MS 10u
void fs_prune_nodes(struct fs *fs, bool short_of_fds);

/* Looks name up below parent and takes one kernel lookup reference. */
int fs_lookup_entry(struct fs *fs, fuse_ino_t parent, const char *name,
		    struct fuse_entry_param *e);
/* The entry of the file file_fd has open (an O_TMPFILE: no name), as fs_lookup_entry. */
int fs_entry_of_open_file(struct fs *fs, int file_fd, struct fuse_entry_param *e);

/* Replies with e, undoing the lookup reference if the kernel did not take it. */
void fs_reply_entry(struct fs *fs, fuse_req_t req, const struct fuse_entry_param *e);

/*
 * The kernel was given e at now_ns: it holds the entry and its attributes
 * for three quarters of the shorter timeout (whoever listed a directory
 * stats its entries a moment later), inode_table_entry_held says.
 */
void fs_entry_given(struct fs *fs, const struct fuse_entry_param *e, uint64_t now_ns);

/* Rejects names the kernel never sends but a hostile peer could: '/' inside. */
int fs_check_name(const char *name);

/* The operations, one file per family. */
void fs_op_init(void *userdata, struct fuse_conn_info *conn);
void fs_op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name);
void fs_op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup);
void fs_op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets);
void fs_op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void fs_op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		   struct fuse_file_info *fi);
void fs_op_readlink(fuse_req_t req, fuse_ino_t ino);
void fs_op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev);
void fs_op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode);
void fs_op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name);
void fs_op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname);
void fs_op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name);
void fs_op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name);
void fs_op_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
		  const char *newname, unsigned int flags);
void fs_op_statfs(fuse_req_t req, fuse_ino_t ino);
void fs_op_access(fuse_req_t req, fuse_ino_t ino, int mask);

void fs_op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void fs_op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		  struct fuse_file_info *fi);
void fs_op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void fs_op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void fs_op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi);
void fs_op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		 struct fuse_file_info *fi);
void fs_op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi);
void fs_op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset, off_t length,
		     struct fuse_file_info *fi);
void fs_op_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence, struct fuse_file_info *fi);
void fs_op_copy_file_range(fuse_req_t req, fuse_ino_t ino_in, off_t off_in,
			   struct fuse_file_info *fi_in, fuse_ino_t ino_out, off_t off_out,
			   struct fuse_file_info *fi_out, size_t len, int flags);
void fs_op_ioctl(fuse_req_t req, fuse_ino_t ino, unsigned int cmd, void *arg,
		 struct fuse_file_info *fi, unsigned flags, const void *in_buf, size_t in_bufsz,
		 size_t out_bufsz);

void fs_op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
/* The backing descriptor of a directory handle opendir made. */
int fs_dir_fd(const struct fuse_file_info *fi);
void fs_op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi);
void fs_op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi);
void fs_op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void fs_op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi);

void fs_op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
		    size_t size, int flags);
void fs_op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size);
void fs_op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size);
void fs_op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name);

#endif
