/* Changes made beside the mount: fanotify on the backing filesystem, turned into the kernel's invalidations (watch.h). */
#include "fusesched/watch.h"

#include "fs_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/fanotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/*
 * What can make the kernel's names or attributes stale: names made, removed
 * or moved, attributes changed, and a writer's close (its size and mtime).
 * Directories too (FAN_ONDIR), as the names in them. Not each write: a mark
 * on every write would cost every writer on the filesystem an event
 * (buffered 4 KiB writes beside the mount ran 30-45% slower), where one
 * at close costs nothing measurable.
 */
#define WATCHED_EVENTS \
	(FAN_CREATE | FAN_DELETE | FAN_MOVED_FROM | FAN_MOVED_TO | FAN_ATTRIB | FAN_CLOSE_WRITE | FAN_ONDIR)
#define NAME_EVENTS (FAN_CREATE | FAN_DELETE | FAN_MOVED_FROM | FAN_MOVED_TO)
#define EVENT_BUF_BYTES (64u << 10)
/*
 * After each batch the thread waits this long before reading again: the
 * daemon's own changes raise events too (skipped), and a wake-up per event
 * would cost a metadata storm through the mount a context switch per
 * request on a 2-core machine (unlinks ran 18% slower). A change beside
 * the mount is seen at most this much later.
 */
#define BATCH_WAIT_NS (10u * 1000 * 1000)

/*
 * Directories outside the backing directory, by file handle: the mark
 * covers the whole filesystem, and on a busy host most events are there
 * (20,000 files made and removed elsewhere on the filesystem cost the
 * thread 4 us an event, decoding and looking up each). One slot per hash,
 * the newest wins; emptied whenever a directory moves anywhere, since only
 * a move can bring one inside.
 */
#define OUTSIDE_SLOTS 512u

struct outside_slot {
	bool used;
	int type;
	unsigned int bytes;
	unsigned char handle[MAX_HANDLE_SZ];
};

struct backing_watch {
	struct fs *fs;
	int fanotify_fd;
	int stop_fd;  /* eventfd: the thread's signal to return */
	int mount_fd; /* the backing directory, to decode file handles against */
	pid_t self;   /* the daemon's own changes are its callers', the kernel knows them */
	dev_t dev;
	ino_t root_ino;
	pthread_t thread;
	struct outside_slot outside[OUTSIDE_SLOTS]; /* the thread's own */
};

static struct outside_slot *outside_slot_of(struct backing_watch *w, const struct file_handle *h)
{
	uint32_t hash = 2166136261u ^ (uint32_t)h->handle_type;
	for (unsigned int i = 0; i < h->handle_bytes; i++)
		hash = (hash ^ h->f_handle[i]) * 16777619u;
	return &w->outside[hash % OUTSIDE_SLOTS];
}

static bool known_outside(struct backing_watch *w, const struct file_handle *h)
{
	const struct outside_slot *o = outside_slot_of(w, h);
	return o->used && o->type == h->handle_type && o->bytes == h->handle_bytes &&
	       memcmp(o->handle, h->f_handle, h->handle_bytes) == 0;
}

static void remember_outside(struct backing_watch *w, const struct file_handle *h)
{
	struct outside_slot *o = outside_slot_of(w, h);
	o->used = true;
	o->type = h->handle_type;
	o->bytes = h->handle_bytes;
	memcpy(o->handle, h->f_handle, h->handle_bytes);
}

/* Whether the directory dir_fd is the backing directory or below it: a walk up its parents. */
static bool inside_backing(const struct backing_watch *w, int dir_fd)
{
	int fd = dup(dir_fd);
	bool inside = false;
	for (int depth = 0; fd >= 0 && depth < 4096; depth++) {
		struct stat st, up_st;
		if (fstat(fd, &st) < 0)
			break;
		if (st.st_dev == w->dev && st.st_ino == w->root_ino) {
			inside = true;
			break;
		}
		int up = openat(fd, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
		close(fd);
		fd = up;
		if (fd < 0 || fstat(fd, &up_st) < 0 || (up_st.st_dev == st.st_dev && up_st.st_ino == st.st_ino))
			break; /* the filesystem's root: its own parent */
	}
	if (fd >= 0)
		close(fd);
	return inside;
}

static uint64_t node_at(struct backing_watch *w, int dir_fd, const char *name)
{
	struct stat st;
	if (fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW | (name[0] ? 0 : AT_EMPTY_PATH)) < 0)
		return 0;
	return inode_table_find(w->fs->inodes, st.st_dev, st.st_ino);
}

/*
 * mask happened to name in the directory handle names (name NULL or ".":
 * to the directory itself). Only what the kernel holds is invalidated: the
 * name under a directory it knows, the attributes of a node it knows (found
 * by the name now, so a hard link's other names share the news).
 */
static void changed(struct backing_watch *w, struct file_handle *handle, const char *name, uint64_t mask)
{
	if (mask & FAN_ONDIR && mask & (FAN_MOVED_FROM | FAN_MOVED_TO))
		memset(w->outside, 0, sizeof(w->outside));
	if (known_outside(w, handle))
		return;
	int dir_fd = open_by_handle_at(w->mount_fd, handle, O_PATH | O_CLOEXEC);
	if (dir_fd < 0)
		return; /* the directory is gone: so are the kernel's names in it, at its next look */
	uint64_t dir = node_at(w, dir_fd, "");
	if (!dir && !inside_backing(w, dir_fd)) {
		remember_outside(w, handle);
		close(dir_fd);
		return;
	}
	if (!name || strcmp(name, ".") == 0) {
		if (dir)
			fs_invalidate_attr(w->fs, dir);
		close(dir_fd);
		return;
	}
	if (dir && (mask & NAME_EVENTS)) {
		fuse_lowlevel_notify_inval_entry(w->fs->session, dir, name, strlen(name));
		fs_invalidate_attr(w->fs, dir); /* its mtime, and its link count for a directory */
	}
	uint64_t node = node_at(w, dir_fd, name);
	if (node)
		fs_invalidate_attr(w->fs, node);
	close(dir_fd);
}

/*
 * One event of bytes at p. Records are packed, not aligned (names make
 * their lengths odd): every header is copied out before it is read.
 */
static void handle_event(struct backing_watch *w, const char *p, size_t bytes)
{
	struct fanotify_event_metadata m;
	memcpy(&m, p, sizeof(m));
	if (m.pid == w->self)
		return;
	const char *end = p + bytes;
	p += m.metadata_len;
	while (p + sizeof(struct fanotify_event_info_header) <= end) {
		struct fanotify_event_info_header h;
		memcpy(&h, p, sizeof(h));
		if (h.len < sizeof(h) || h.len > (size_t)(end - p))
			return;
		if (h.info_type == FAN_EVENT_INFO_TYPE_DFID_NAME || h.info_type == FAN_EVENT_INFO_TYPE_DFID) {
			const char *raw = p + offsetof(struct fanotify_event_info_fid, handle);
			struct file_handle head;
			if (raw + sizeof(head) > p + h.len)
				return;
			memcpy(&head, raw, sizeof(head));
			size_t handle_bytes = sizeof(head) + head.handle_bytes;
			const char *name = raw + handle_bytes;
			if (head.handle_bytes > MAX_HANDLE_SZ || name > p + h.len)
				return;
			union {
				struct file_handle fh;
				char bytes[sizeof(struct file_handle) + MAX_HANDLE_SZ];
			} copy;
			memcpy(&copy, raw, handle_bytes);
			bool named = h.info_type == FAN_EVENT_INFO_TYPE_DFID_NAME &&
				     memchr(name, '\0', (size_t)(p + h.len - name));
			changed(w, &copy.fh, named ? name : NULL, m.mask);
		}
		p += h.len;
	}
}

static void *watch_thread(void *arg)
{
	struct backing_watch *w = arg;
	char *buf = malloc(EVENT_BUF_BYTES);
	if (!buf)
		return NULL;
	struct pollfd fds[2] = {{.fd = w->fanotify_fd, .events = POLLIN}, {.fd = w->stop_fd, .events = POLLIN}};
	for (;;) {
		if (poll(fds, 2, -1) < 0 && errno != EINTR)
			break;
		if (fds[1].revents)
			break;
		ssize_t n = read(w->fanotify_fd, buf, EVENT_BUF_BYTES);
		if (n <= 0)
			continue; /* EAGAIN, EINTR */
		for (size_t at = 0; at + sizeof(struct fanotify_event_metadata) <= (size_t)n;) {
			struct fanotify_event_metadata m;
			memcpy(&m, buf + at, sizeof(m));
			if (m.vers != FANOTIFY_METADATA_VERSION || m.event_len < sizeof(m) ||
			    m.event_len > (size_t)n - at)
				break;
			handle_event(w, buf + at, m.event_len);
			at += m.event_len;
		}
		nanosleep(&(struct timespec){.tv_nsec = BATCH_WAIT_NS}, NULL);
	}
	free(buf);
	return NULL;
}

/*
 * The checks that decide whether long timeouts are safe: a local
 * filesystem (another client's change would raise no event), fanotify
 * reporting names by file handle, and handles that decode here.
 */
static int watch_open(struct backing_watch *w, const char *path, char *err, size_t err_bytes)
{
	/* The backing root, reopened for reading through the table's descriptor
	 * (the daemon may have changed directory since the path was given). */
	int root = inode_table_fd_get(w->fs->inodes, FUSE_ROOT_ID);
	if (root < 0) {
		snprintf(err, err_bytes, "the backing root '%s' is gone: %s", path, strerror(-root));
		return root;
	}
	char proc[FS_PROC_PATH_BYTES];
	fs_proc_path(root, proc);
	w->mount_fd = open(proc, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int open_errno = errno;
	inode_table_fd_put(w->fs->inodes, FUSE_ROOT_ID);
	if (w->mount_fd < 0) {
		snprintf(err, err_bytes, "cannot open '%s': %s", path, strerror(open_errno));
		return -open_errno;
	}
	struct stat st;
	if (fstat(w->mount_fd, &st) < 0)
		return -errno;
	w->dev = st.st_dev;
	w->root_ino = st.st_ino;
	if (!fs_fd_on_local_fs(w->mount_fd)) {
		snprintf(err, err_bytes, "'%s' is not on a local filesystem (ext4, xfs, tmpfs): changes "
			 "by its other clients cannot be seen", path);
		return -EOPNOTSUPP;
	}
	w->fanotify_fd = fanotify_init(FAN_CLASS_NOTIF | FAN_CLOEXEC | FAN_NONBLOCK | FAN_UNLIMITED_QUEUE |
					       FAN_REPORT_DFID_NAME,
				       O_RDONLY | O_CLOEXEC | O_LARGEFILE);
	if (w->fanotify_fd < 0) {
		int e = errno;
		snprintf(err, err_bytes, "fanotify_init: %s", strerror(e));
		return -e;
	}
	if (fanotify_mark(w->fanotify_fd, FAN_MARK_ADD | FAN_MARK_FILESYSTEM, WATCHED_EVENTS, w->mount_fd,
			  NULL) < 0) {
		int e = errno;
		snprintf(err, err_bytes, "fanotify_mark of the filesystem of '%s': %s", path, strerror(e));
		return -e;
	}
	/* Decoding needs CAP_DAC_READ_SEARCH: tried once on the directory itself. */
	union {
		struct file_handle fh;
		char bytes[sizeof(struct file_handle) + MAX_HANDLE_SZ];
	} h = {.fh.handle_bytes = MAX_HANDLE_SZ};
	int mount_id = 0;
	if (name_to_handle_at(w->mount_fd, "", &h.fh, &mount_id, AT_EMPTY_PATH) < 0) {
		int e = errno;
		snprintf(err, err_bytes, "name_to_handle_at '%s': %s", path, strerror(e));
		return -e;
	}
	int fd = open_by_handle_at(w->mount_fd, &h.fh, O_PATH | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		snprintf(err, err_bytes, "open_by_handle_at in '%s': %s", path, strerror(e));
		return -e;
	}
	close(fd);
	w->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (w->stop_fd < 0) {
		int e = errno;
		snprintf(err, err_bytes, "eventfd: %s", strerror(e));
		return -e;
	}
	return 0;
}

static void watch_close(struct backing_watch *w)
{
	if (w->stop_fd >= 0)
		close(w->stop_fd);
	if (w->fanotify_fd >= 0)
		close(w->fanotify_fd);
	if (w->mount_fd >= 0)
		close(w->mount_fd);
	free(w);
}

int backing_watch_start(struct fs *fs, struct backing_watch **out, char *err, size_t err_bytes)
{
	struct backing_watch *w = calloc(1, sizeof(*w));
	if (!w) {
		snprintf(err, err_bytes, "out of memory");
		return -ENOMEM;
	}
	w->fs = fs;
	w->fanotify_fd = w->stop_fd = w->mount_fd = -1;
	w->self = getpid();
	int r = watch_open(w, fs->opts.backing_path, err, err_bytes);
	if (!r) {
		r = -pthread_create(&w->thread, NULL, watch_thread, w);
		if (r)
			snprintf(err, err_bytes, "cannot start the watch thread: %s", strerror(-r));
	}
	if (r) {
		watch_close(w);
		return r;
	}
	*out = w;
	return 0;
}

dev_t backing_watch_dev(const struct backing_watch *w)
{
	return w->dev;
}

void backing_watch_stop(struct backing_watch *w)
{
	if (!w)
		return;
	uint64_t one = 1;
	(void)!write(w->stop_fd, &one, sizeof(one)); /* an eventfd write of 1 cannot fail */
	pthread_join(w->thread, NULL);
	watch_close(w);
}
