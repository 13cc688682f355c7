/* Directory handles: opendir, readdir, readdirplus, fsyncdir, releasedir. */
#include "fs_internal.h"

#include "fusesched/clock.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/*
 * An open directory is its descriptor, read with getdents64 into each
 * request's own buffer: no stream buffer per open directory (glibc's DIR
 * keeps 32 KiB), so holding directories open costs a tenant descriptors,
 * which its cap bounds, and no memory.
 */
struct fs_dir {
	struct fs_handle handle;
	int fd;
	fuse_ino_t node_id;     /* its descriptor is held while the directory is open */
	uint32_t opener_tenant; /* its open counts against this tenant's and uid's cap */
	uid_t opener_uid;
};

static struct fs_dir *dir_of(const struct fuse_file_info *fi)
{
	return (struct fs_dir *)(uintptr_t)fi->fh;
}

int fs_dir_fd(const struct fuse_file_info *fi)
{
	return dir_of(fi)->fd;
}

static void dir_close(struct fs *fs, struct fs_handle *h)
{
	struct fs_dir *d = (struct fs_dir *)h;
	close(d->fd);
	inode_table_fd_drop(fs->inodes, d->node_id);
	if (fs->datapath->dir_released)
		fs->datapath->dir_released(fs->datapath, d->opener_tenant, d->opener_uid);
	free(d);
}

static int open_dir_at(struct fs *fs, int node_fd)
{
	int fd = openat(node_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 && fs_reclaim_fds(fs, -errno))
		fd = openat(node_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

void fs_op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	uint32_t tenant = 0;
	struct datapath *dp = fs->datapath;
	int r = dp->dir_opened ? dp->dir_opened(dp, ctx->pid, ctx->uid, &tenant) : 0;
	if (r) {
		fuse_reply_err(req, -r);
		return;
	}
	int node_fd = inode_table_fd_hold(fs->inodes, ino);
	int fd = node_fd < 0 ? node_fd : open_dir_at(fs, node_fd);
	struct fs_dir *d = NULL;
	int e = 0;
	if (fd < 0)
		e = -fd;
	else if (!(d = calloc(1, sizeof(*d))))
		e = ENOMEM;
	if (e) {
		free(d);
		if (fd >= 0)
			close(fd);
		if (node_fd >= 0)
			inode_table_fd_drop(fs->inodes, ino);
		if (dp->dir_released)
			dp->dir_released(dp, tenant, ctx->uid);
		fuse_reply_err(req, e);
		return;
	}
	d->fd = fd;
	d->node_id = ino;
	d->opener_tenant = tenant;
	d->opener_uid = ctx->uid;
	d->handle.close = dir_close;
	fs_handle_track(fs, &d->handle);
	fi->fh = (uintptr_t)d;
	if (fuse_reply_open(req, fi) < 0) {
		fs_handle_untrack(fs, &d->handle);
		dir_close(fs, &d->handle);
	}
}

/* Room for the longest record (a 255-byte name), whatever size the kernel asks for. */
#define DIR_READ_MIN_BYTES 4096u

static bool is_dot_or_dotdot(const char *name)
{
	return name[0] == '.' && (name[1] == '\0' || (name[1] == '.' && name[2] == '\0'));
}

/*
 * Fills one reply buffer. In plus mode every entry but "." and ".." is looked
 * up and carries a kernel reference; the references of entries that did not
 * fit, or of a reply the kernel never took, are dropped again.
 *
 * Except an entry the kernel already holds, unchanged (inode_table_entry_held):
 * a full record would make the kernel refresh its attributes and drop the
 * inode's cached ACL, so a listing repeated within the timeouts (`ls -l`
 * asks every file for its ACL) would cost a round trip per file. It gets a
 * record without node id, which the kernel lists and otherwise ignores.
 */
static void read_dir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi, bool plus)
{
	struct fs *fs = fs_of(req);
	struct fs_dir *d = dir_of(fi);
	/* The backing directory's records are no larger than the reply's. */
	size_t raw_bytes = size < DIR_READ_MIN_BYTES ? DIR_READ_MIN_BYTES : size;
	char *buf = malloc(size ? size : 1);
	char *raw = malloc(raw_bytes);
	size_t max_refs = size / 32 + 1; /* a direntplus record is larger than 32 bytes */
	uint64_t *refs = plus ? malloc(max_refs * sizeof(*refs)) : NULL;
	if (!buf || !raw || (plus && !refs)) {
		free(buf);
		free(raw);
		free(refs);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	/* The kernel asks from the offset of the last record it took (0: the start). */
	int err = lseek(d->fd, off, SEEK_SET) < 0 ? errno : 0;
	size_t used = 0, ref_count = 0;
	uint64_t now_ns = clock_now_ns();
	bool full = false;
	while (!err && !full) {
		ssize_t got = getdents64(d->fd, raw, raw_bytes);
		if (got <= 0) {
			err = got < 0 ? errno : 0;
			break;
		}
		for (ssize_t at = 0; at < got && !full;) {
			const struct dirent64 *de = (const void *)(raw + at);
			at += de->d_reclen;
			const char *name = de->d_name;
			off_t next = de->d_off;
			size_t entry_bytes;
			if (plus) {
				struct fuse_entry_param e = {0};
				bool looked_up = false;
				if (is_dot_or_dotdot(name)) {
					e.attr.st_ino = de->d_ino;
					e.attr.st_mode = (mode_t)de->d_type << 12;
				} else {
					int r = fs_lookup_entry(fs, ino, name, &e);
					if (r == -ENOENT) /* removed since it was listed */
						continue;
					if (r) { /* e.g. EMFILE: return what fits, or the error */
						err = -r;
						full = true;
						break;
					}
					looked_up = !inode_table_entry_held(fs->inodes, e.ino, &e.attr, now_ns);
					if (!looked_up) {
						inode_table_forget(fs->inodes, e.ino, 1);
						e = (struct fuse_entry_param){.attr = {.st_ino = e.attr.st_ino,
										       .st_mode = e.attr.st_mode}};
					}
				}
				entry_bytes = fuse_add_direntry_plus(req, buf + used, size - used, name, &e, next);
				if (entry_bytes > size - used) {
					if (looked_up)
						inode_table_forget(fs->inodes, e.ino, 1);
					full = true;
					break;
				}
				if (looked_up) {
					refs[ref_count++] = e.ino;
					fs_entry_given(fs, &e, now_ns);
				}
			} else {
				struct stat st = {
					.st_ino = de->d_ino,
					.st_mode = (mode_t)de->d_type << 12,
				};
				entry_bytes = fuse_add_direntry(req, buf + used, size - used, name, &st, next);
				if (entry_bytes > size - used) {
					full = true;
					break;
				}
			}
			used += entry_bytes;
		}
	}
	int r = (err && used == 0) ? fuse_reply_err(req, err) : fuse_reply_buf(req, buf, used);
	if (r < 0)
		for (size_t i = 0; i < ref_count; i++)
			inode_table_forget(fs->inodes, refs[i], 1);
	free(refs);
	free(raw);
	free(buf);
}

void fs_op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	read_dir(req, ino, size, off, fi, false);
}

void fs_op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	read_dir(req, ino, size, off, fi, true);
}

void fs_op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	struct fs *fs = fs_of(req);
	struct fs_dir *d = dir_of(fi);
	fs_handle_untrack(fs, &d->handle);
	dir_close(fs, &d->handle);
	fuse_reply_err(req, 0);
}

void fs_op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	(void)ino;
	int fd = dir_of(fi)->fd;
	int r = datasync ? fdatasync(fd) : fsync(fd);
	fuse_reply_err(req, r < 0 ? errno : 0);
}
