/* What a failed test leaves behind, removed by the test runner: see leftovers.h. */
#include "leftovers.h"

#include "mount_helper.h"
#include "fusesched/ctl.h"

#include <errno.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define LEFTOVERS_MAX 128
#define LEFTOVER_PATH_BYTES 512
/* A killed process leaves its cgroup a moment later. */
#define CGROUP_EMPTY_WAIT_MS 10000

struct leftovers {
	int mounts, cgroups, dirs;
	char mount[LEFTOVERS_MAX][LEFTOVER_PATH_BYTES];
	char cgroup[LEFTOVERS_MAX][LEFTOVER_PATH_BYTES];
	char dir[LEFTOVERS_MAX][LEFTOVER_PATH_BYTES];
};

static struct leftovers *shared;

void leftovers_init(void)
{
	if (shared)
		return;
	void *p = mmap(NULL, sizeof(*shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		perror("leftovers: mmap");
		return;
	}
	shared = p;
}

/* Gone: not a mountpoint and not there (a dead FUSE mount's root gives ENOTCONN, not ENOENT). */
static bool gone(const char *path)
{
	struct stat st;
	return !test_in_mountinfo(path) && lstat(path, &st) < 0 && errno == ENOENT;
}

static void add(char (*list)[LEFTOVER_PATH_BYTES], int *count, const char *path)
{
	if (strlen(path) >= LEFTOVER_PATH_BYTES) {
		fprintf(stderr, "leftovers: path too long, not recorded: %s\n", path);
		return;
	}
	/* Recorded again: moved to the end, where the cleanup starts. */
	for (int i = 0; i < *count; i++) {
		if (strcmp(list[i], path) == 0) {
			memmove(list[i], list[i + 1], (size_t)(*count - i - 1) * LEFTOVER_PATH_BYTES);
			(*count)--;
			break;
		}
	}
	if (*count == LEFTOVERS_MAX) {
		int kept = 0;
		for (int i = 0; i < *count; i++)
			if (!gone(list[i]))
				memmove(list[kept++], list[i], LEFTOVER_PATH_BYTES);
		*count = kept;
	}
	if (*count == LEFTOVERS_MAX) {
		fprintf(stderr, "leftovers: %d recorded paths still there, not recorded: %s\n", LEFTOVERS_MAX,
			path);
		return;
	}
	snprintf(list[*count], LEFTOVER_PATH_BYTES, "%s", path);
	(*count)++;
}

void leftovers_add_mount(const char *path)
{
	if (shared)
		add(shared->mount, &shared->mounts, path);
}

void leftovers_add_cgroup(const char *path)
{
	if (shared)
		add(shared->cgroup, &shared->cgroups, path);
}

void leftovers_add_dir(const char *path)
{
	if (shared)
		add(shared->dir, &shared->dirs, path);
}

static int kill_cgroup_members(const char *cgroup)
{
	char procs[LEFTOVER_PATH_BYTES + 16];
	snprintf(procs, sizeof(procs), "%s/cgroup.procs", cgroup);
	FILE *f = fopen(procs, "re");
	if (!f)
		return 0;
	int pid, killed = 0;
	while (fscanf(f, "%d", &pid) == 1)
		killed += kill(pid, SIGKILL) == 0;
	fclose(f);
	return killed;
}

void leftovers_cleanup(void)
{
	if (!shared)
		return;
	int killed = 0, unmounted = 0, cgroups = 0, paths = 0, sockets = 0;
	for (int i = 0; i < shared->cgroups; i++)
		killed += kill_cgroup_members(shared->cgroup[i]);
	for (int i = shared->mounts - 1; i >= 0; i--) {
		if (!test_in_mountinfo(shared->mount[i]))
			continue;
		test_sh("fusermount3 -u '%s' 2>/dev/null || umount -l '%s'", shared->mount[i], shared->mount[i]);
		unmounted++;
	}
	/* A daemon killed with its mount leaves its control socket behind. */
	for (int i = 0; i < shared->mounts; i++) {
		char sock[256];
		if (ctl_socket_path_for_mount(shared->mount[i], sock, sizeof(sock)) == 0 && unlink(sock) == 0)
			sockets++;
	}
	for (int i = shared->cgroups - 1; i >= 0; i--) {
		for (int waited_ms = 0; waited_ms < CGROUP_EMPTY_WAIT_MS; waited_ms += 10) {
			if (rmdir(shared->cgroup[i]) == 0) {
				cgroups++;
				break;
			}
			if (errno != EBUSY)
				break;
			kill_cgroup_members(shared->cgroup[i]);
			nanosleep(&(struct timespec){.tv_nsec = 10 * 1000 * 1000}, NULL);
		}
	}
	for (int i = shared->dirs - 1; i >= 0; i--) {
		struct stat st;
		if (lstat(shared->dir[i], &st) == 0) {
			test_sh("rm -rf '%s'", shared->dir[i]);
			paths++;
		}
	}
	if (killed || unmounted || cgroups || paths || sockets)
		fprintf(stderr,
			"leftovers: a failed test left %d processes, %d mounts, %d cgroups, %d scratch paths and "
			"%d control sockets; removed\n",
			killed, unmounted, cgroups, paths, sockets);
	memset(shared, 0, sizeof(*shared));
}
