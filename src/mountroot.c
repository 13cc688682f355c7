/*
 * Where the volume is mounted from (mountroot.h): staging, publishing,
 * unmounting. mount(2) ignores the source and type of binds, moves and
 * propagation changes; valgrind checks they are strings, so "none".
 */
#include "fusesched/mountroot.h"

#include "fusesched/ctl.h"
#include "fusesched/fs.h"

#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

/* Detaches whatever is mounted on the stage (the volume, its own bind under it). */
static void stage_detach(const char *stage)
{
	while (umount2(stage, MNT_DETACH) == 0)
		;
}

static void stage_remove(const char *stage)
{
	stage_detach(stage);
	(void)rmdir(stage);
}

/*
 * The stages of daemons no longer running (killed while starting), of any
 * mountpoint: each stage is "NAME.root.PID" in dir, and a mountpoint that
 * is never mounted again would keep its stage for good. Also this
 * mountpoint's stage named before stages had pids ("NAME.root", given as
 * unnumbered): another mountpoint's may belong to an older daemon starting.
 */
static void stale_stages_remove(const char *dir, const char *unnumbered)
{
	stage_remove(unnumbered);
	DIR *d = opendir(dir);
	if (!d)
		return;
	for (struct dirent *e; (e = readdir(d));) {
		const char *root = strstr(e->d_name, ".root.");
		for (const char *next; root && (next = strstr(root + 1, ".root."));)
			root = next;
		if (!root)
			continue;
		const char *digits = root + strlen(".root.");
		char *end;
		long pid = strtol(digits, &end, 10);
		if (end == digits || *end || *digits < '0' || *digits > '9' || pid <= 0 ||
		    pid == (long)getpid() || kill((pid_t)pid, 0) == 0 || errno != ESRCH)
			continue;
		char path[PATH_MAX];
		int n = snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		if (n > 0 && (size_t)n < sizeof(path))
			stage_remove(path);
	}
	closedir(d);
}

const char *mountroot_prepare(struct mountroot *m, const char *mountpoint)
{
	snprintf(m->mountpoint, sizeof(m->mountpoint), "%s", mountpoint);
	m->stage[0] = '\0';
	m->published = false;
	if (geteuid() != 0)
		return mountpoint;
	char sock[PATH_MAX];
	size_t len;
	if (ctl_socket_path_for_mount(mountpoint, sock, sizeof(sock)) < 0 ||
	    (len = strlen(sock)) < 5 || strcmp(sock + len - 5, ".sock") != 0)
		return mountpoint;
	/*
	 * Each daemon its own stage: one that is still unmounting its volume
	 * clears its stage while the next daemon of the same mountpoint, started
	 * as soon as the unmount returned, stages its own (`umount; mount`).
	 * A daemon killed while starting leaves its stage to the next one.
	 */
	char prefix[PATH_MAX];
	snprintf(prefix, sizeof(prefix), "%.*s.root.", (int)(len - 5), sock);
	int n = snprintf(m->stage, sizeof(m->stage), "%s%ld", prefix, (long)getpid());
	if (n < 0 || (size_t)n >= sizeof(m->stage))
		goto no_stage;
	(void)mkdir(CTL_SOCKET_DIR, 0755);
	char unnumbered[PATH_MAX];
	snprintf(unnumbered, sizeof(unnumbered), "%.*s.root", (int)(len - 5), sock);
	stale_stages_remove(CTL_SOCKET_DIR, unnumbered);
	struct stat st;
	if ((mkdir(m->stage, 0700) < 0 && errno != EEXIST) || lstat(m->stage, &st) < 0 ||
	    !S_ISDIR(st.st_mode))
		goto no_stage;
	stage_detach(m->stage);
	/* Private: the volume on it must not appear in other mount namespaces (a
	 * copy there would outlive the unmount at the mountpoint). */
	if (mount(m->stage, m->stage, "none", MS_BIND, NULL) < 0)
		goto no_stage;
	if (mount("none", m->stage, "none", MS_PRIVATE, NULL) < 0) {
		stage_remove(m->stage);
		goto no_stage;
	}
	return m->stage;
no_stage:
	m->stage[0] = '\0';
	return mountpoint;
}

int mountroot_publish(struct mountroot *m, struct fs *fs, char *err, size_t err_bytes)
{
	if (!m->stage[0])
		return 0;
	char from[PATH_MAX + sizeof(FS_ROOT_ALIAS_NAME) + 1];
	snprintf(from, sizeof(from), "%s/%s", m->stage, FS_ROOT_ALIAS_NAME);
	fs_root_alias_arm(fs, true);
	int r = 0;
	if (mount(from, m->mountpoint, "none", MS_BIND, NULL) == 0) {
		fs_root_alias_use(fs);
	} else {
		int bind_errno = errno;
		/* The stage is private, so the volume's own mount may move from it. */
		if (mount(m->stage, m->mountpoint, "none", MS_MOVE, NULL) == 0) {
			fuse_log(FUSE_LOG_WARNING,
				 "fusesched: cannot bind the volume's root at '%s' (%s): mounted as it is; "
				 "callers who do not own the root ask for its ACL at every path walk\n",
				 m->mountpoint, strerror(bind_errno));
		} else {
			r = -errno;
			snprintf(err, err_bytes, "cannot bind the volume at '%s' (%s) nor move it there (%s)",
				 m->mountpoint, strerror(bind_errno), strerror(-r));
		}
	}
	fs_root_alias_arm(fs, false);
	if (r == 0) {
		m->published = true;
		stage_remove(m->stage); /* the staging mount, then the stage's own bind */
	}
	return r;
}

void mountroot_unmount(struct mountroot *m, struct fuse_session *se)
{
	if (!m->published) {
		if (se)
			fuse_session_unmount(se);
		if (m->stage[0])
			stage_remove(m->stage);
		return;
	}
	/* Ended by the kernel (unmounted from outside): the mountpoint may be another mount's by now. */
	struct pollfd p = {.fd = fuse_session_fd(se)};
	bool ended = poll(&p, 1, 0) == 1 && (p.revents & POLLERR);
	/* libfuse closes the device, then unmounts where it mounted: the stage, gone since
	 * the volume was published, so a bind of it is put there for libfuse to remove (it
	 * is left when libfuse finds the connection ended, and removed here either way). */
	if (mkdir(m->stage, 0700) == 0)
		(void)mount(m->stage, m->stage, "none", MS_BIND, NULL);
	fuse_session_unmount(se);
	stage_remove(m->stage);
	if (!ended)
		(void)umount2(m->mountpoint, MNT_DETACH);
}
