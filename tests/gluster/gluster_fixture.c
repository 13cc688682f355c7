/* A GlusterFS replicated volume over loopback, run by the test itself: see gluster_fixture.h. */
#include "gluster_fixture.h"

#include "mount_helper.h"
#if __has_include("scratch.h")
#include "scratch.h" /* TEST_SCRATCH_DIR */
#endif

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define GLUSTERD_PORT 24007
#define FUSE_SUPER_MAGIC 0x65735546
/* glusterd's first start in a fresh working directory configures geo-replication: ~20 python runs. */
#define GLUSTERD_READY_S 120
#define REPLICAS_UP_S 30
/* Paths glusterd makes outside its working directory whatever it is told; removed if we made them. */
static const char *const host_paths[] = {
	"/var/lib/glusterd/geo-replication/gsyncd_template.conf",
	"/var/lib/glusterd/geo-replication",
	"/var/lib/glusterd/ss_brick",
	"/run/gluster/snaps",
};
#define HOST_PATHS (sizeof(host_paths) / sizeof(host_paths[0]))
static bool host_path_existed[HOST_PATHS];
/*
 * Removes the host paths glusterd made (those that were not there before
 * it started: created[i]), deepest first, and only as glusterd leaves
 * them: an empty directory, an empty file.
 */
static void remove_host_paths(const bool *created)
{
	for (size_t i = 0; i < HOST_PATHS; i++) {
		struct stat st;
		if (!created[i] || lstat(host_paths[i], &st) != 0)
			continue;
		if (S_ISDIR(st.st_mode))
			rmdir(host_paths[i]);
		else if (S_ISREG(st.st_mode) && st.st_size == 0)
			unlink(host_paths[i]);
	}
}

/* Brick sockets: glusterd puts them in /run/gluster, wherever its run directory is. */
#define MAX_SOCKETS 8
static char brick_socket[MAX_SOCKETS][256];
static int brick_sockets;

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Appends "NAME S.S s" to g->steps for the time since *t, and restarts *t. */
static void step(struct gluster *g, const char *name, double *t)
{
	double now = now_s();
	size_t used = strlen(g->steps);
	snprintf(g->steps + used, sizeof(g->steps) - used, "%s%s %.1f s", used ? ", " : "", name, now - *t);
	*t = now;
}

static void sleep_ms(long ms)
{
	nanosleep(&(struct timespec){.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L}, NULL);
}

static bool in_path(const char *tool)
{
	const char *path = getenv("PATH");
	char dirs[4096];
	snprintf(dirs, sizeof(dirs), "%s", path ? path : "/usr/bin:/bin");
	for (char *save = NULL, *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
		char full[4200];
		snprintf(full, sizeof(full), "%s/%s", d, tool);
		if (access(full, X_OK) == 0)
			return true;
	}
	return false;
}

/* Can glusterd bind its port? A taken port means another glusterd (or anything) is there. */
static bool port_free(void)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return false;
	int one = 1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(GLUSTERD_PORT),
				.sin_addr.s_addr = htonl(INADDR_ANY)};
	bool free_ = bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
	close(fd);
	return free_;
}

static bool host_name(char *out, size_t bytes)
{
	if (gethostname(out, bytes) < 0 || !out[0])
		return false;
	struct addrinfo *ai = NULL;
	if (getaddrinfo(out, NULL, &(struct addrinfo){.ai_socktype = SOCK_STREAM}, &ai) != 0)
		return false;
	freeaddrinfo(ai);
	return true;
}

static void take_down_stale_runs(void);

const char *gluster_skip_reason(void)
{
	if (geteuid() != 0)
		return "needs root (glusterd, mounts)";
	/* glusterd and mount.glusterfs live in /usr/sbin, which a user's PATH (sudo -E) may lack. */
	const char *path = getenv("PATH");
	if (!path || !strstr(path, "/usr/sbin")) {
		char fuller[4096];
		snprintf(fuller, sizeof(fuller), "%s:/usr/sbin:/sbin", path ? path : "/usr/bin:/bin");
		setenv("PATH", fuller, 1);
	}
	if (access("/dev/fuse", R_OK | W_OK) != 0)
		return "/dev/fuse is not available";
	if (!in_path("glusterd"))
		return "glusterd not found (Debian: apt-get install glusterfs-server)";
	if (!in_path("gluster"))
		return "the gluster CLI not found (Debian: apt-get install glusterfs-cli)";
	if (!in_path("mount.glusterfs"))
		return "mount.glusterfs not found (Debian: apt-get install glusterfs-client)";
	char host[256];
	if (!host_name(host, sizeof(host)))
		return "this host's name does not resolve (the bricks are named HOST:/DIR)";
	take_down_stale_runs(); /* a killed run's glusterd still holds the port */
	if (!port_free())
		return "TCP port 24007 is taken (a glusterd of this host's own?): the test runs its own "
		       "glusterd there";
	return NULL;
}

/* Runs a command line through sh, its output appended to OUT (for error messages); returns its status. */
static int run(char *out, size_t out_bytes, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int run(char *out, size_t out_bytes, const char *fmt, ...)
{
	char cmd[4096];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	char full[4200];
	snprintf(full, sizeof(full), "(%s) 2>&1", cmd);
	FILE *p = popen(full, "r");
	if (!p)
		return -1;
	size_t used = out ? strlen(out) : 0;
	char line[512];
	while (fgets(line, sizeof(line), p)) {
		size_t n = strlen(line);
		if (out && used + n + 1 < out_bytes) {
			memcpy(out + used, line, n + 1);
			used += n;
		}
	}
	int st = pclose(p);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

static void cli(const struct gluster *g, char *cmd, size_t bytes)
{
	snprintf(cmd, bytes, "gluster --mode=script --glusterd-sock='%s/glusterd.socket' --log-file='%s/log/cli.log'",
		 g->dir, g->dir);
}

/* The last lines of a log file, appended to out. */
static void append_tail(char *out, size_t bytes, const char *log, int lines)
{
	size_t used = strlen(out);
	snprintf(out + used, bytes - used, "\n--- last lines of %s:\n", log);
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "tail -n %d '%s'", lines, log);
	run(out, bytes, "%s", cmd);
}

static void fail(struct gluster *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(struct gluster *g, const char *fmt, ...)
{
	char head[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(head, sizeof(head), fmt, ap);
	va_end(ap);
	size_t used = strlen(g->error);
	char rest[sizeof(g->error)];
	snprintf(rest, sizeof(rest), "%s", g->error);
	char joined[sizeof(head) + sizeof(rest) + 32];
	snprintf(joined, sizeof(joined), "gluster fixture: %s%s%s", head, used ? "\n" : "", rest);
	snprintf(g->error, sizeof(g->error), "%.*s", (int)sizeof(g->error) - 1, joined);
}

/* Does /proc/PID/cmdline mention dir (its arguments joined by spaces)? Zombies have none. */
static bool cmdline_mentions(pid_t pid, const char *dir, char *joined, size_t bytes)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	ssize_t n = read(fd, joined, bytes - 1);
	close(fd);
	if (n <= 0)
		return false;
	joined[n] = '\0';
	for (ssize_t i = 0; i < n; i++)
		if (joined[i] == '\0')
			joined[i] = ' ';
	return strstr(joined, dir) != NULL;
}

/* Remembers the -S socket of each process running out of dir that has one (the bricks). */
static void note_brick_sockets(const char *dir)
{
	DIR *proc = opendir("/proc");
	struct dirent *e;
	while (proc && (e = readdir(proc))) {
		pid_t pid = (pid_t)atoi(e->d_name);
		char cmd[8192];
		if (pid <= 0 || pid == getpid() || !cmdline_mentions(pid, dir, cmd, sizeof(cmd)))
			continue;
		const char *s = strstr(cmd, " -S ");
		char sock[256];
		if (!s || sscanf(s + 4, "%255s", sock) != 1)
			continue;
		if (strncmp(sock, "/var/run/gluster/", 17) != 0 && strncmp(sock, "/run/gluster/", 13) != 0)
			continue;
		bool known = false;
		for (int i = 0; i < brick_sockets; i++)
			known |= strcmp(brick_socket[i], sock) == 0;
		if (!known && brick_sockets < MAX_SOCKETS)
			snprintf(brick_socket[brick_sockets++], sizeof(brick_socket[0]), "%s", sock);
	}
	if (proc)
		closedir(proc);
}

/* Signals every process (not us) whose command line mentions dir; returns how many. */
static int signal_mentioning(const char *dir, int sig)
{
	int n = 0;
	DIR *proc = opendir("/proc");
	struct dirent *e;
	while (proc && (e = readdir(proc))) {
		pid_t pid = (pid_t)atoi(e->d_name);
		char cmd[8192];
		if (pid > 0 && pid != getpid() && cmdline_mentions(pid, dir, cmd, sizeof(cmd)))
			n += kill(pid, sig) == 0;
	}
	if (proc)
		closedir(proc);
	return n;
}

/*
 * Mount points in /proc/self/mountinfo below dir, or whose source is below
 * dir (a fusesched mount over a node names its backing directory as its
 * source), deepest (last mounted) first.
 */
static int mounts_under(const char *dir, char (*out)[512], int max)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return 0;
	char line[8192];
	int n = 0;
	size_t len = strlen(dir);
	while (fgets(line, sizeof(line), f) && n < max) {
		char mnt[4096], source[4096];
		const char *dash = strstr(line, " - ");
		if (sscanf(line, "%*s %*s %*s %*s %4095s", mnt) != 1 || !dash ||
		    sscanf(dash + 3, "%*s %4095s", source) != 1)
			continue;
		bool below = (strncmp(mnt, dir, len) == 0 && mnt[len] == '/') ||
			     (strncmp(source, dir, len) == 0 && source[len] == '/');
		size_t mnt_len = strlen(mnt);
		if (below && mnt_len < 512)
			memcpy(out[n++], mnt, mnt_len + 1);
	}
	fclose(f);
	/* Later lines are newer mounts, stacked on the older ones: take them down first. */
	for (int i = 0; i < n / 2; i++) {
		char tmp[512];
		memcpy(tmp, out[i], 512);
		memcpy(out[i], out[n - 1 - i], 512);
		memcpy(out[n - 1 - i], tmp, 512);
	}
	return n;
}

/* Unmounts what is mounted over the nodes (not the nodes themselves): a test's fusesched mounts. */
static int unmount_over_nodes(const struct gluster *g)
{
	char mounts[32][512];
	int n = mounts_under(g->dir, mounts, 32), left = 0;
	for (int i = 0; i < n; i++) {
		bool node = false;
		for (int k = 0; k < GLUSTER_NODES; k++)
			node |= strcmp(mounts[i], g->node[k]) == 0;
		if (node)
			continue;
		fprintf(stderr, "gluster fixture: %s still mounted over the volume: unmounting\n", mounts[i]);
		test_sh("fusermount3 -u '%s' 2>/dev/null || umount -l '%s'", mounts[i], mounts[i]);
		left++;
	}
	return left;
}

static bool process_gone(pid_t pid)
{
	char path[64], stat_line[512];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return true;
	bool zombie = fgets(stat_line, sizeof(stat_line), f) && strstr(stat_line, ") Z ");
	fclose(f);
	return zombie;
}

/* Everything of a scratch directory: mounts, processes, sockets, the directory. */
static int take_down_dir(const char *dir)
{
	int problems = 0;
	note_brick_sockets(dir);
	char mounts[32][512];
	int n = mounts_under(dir, mounts, 32);
	for (int i = 0; i < n; i++)
		test_sh("fusermount3 -u '%s' 2>/dev/null || umount '%s' 2>/dev/null || umount -l '%s'",
			mounts[i], mounts[i], mounts[i]);
	if (signal_mentioning(dir, SIGTERM) > 0) {
		for (int i = 0; i < 100 && signal_mentioning(dir, 0) > 0; i++)
			sleep_ms(50);
		if (signal_mentioning(dir, SIGKILL) > 0)
			sleep_ms(200);
	}
	n = mounts_under(dir, mounts, 32);
	for (int i = 0; i < n; i++)
		test_sh("umount -l '%s'", mounts[i]);
	for (int i = 0; i < brick_sockets; i++)
		unlink(brick_socket[i]);
	brick_sockets = 0;
	if (test_sh("rm -rf '%s'", dir) != 0) {
		fprintf(stderr, "gluster fixture: could not remove %s\n", dir);
		problems++;
	}
	return problems;
}

/* Field 22 of /proc/PID/stat, the start time: a pid and it name one process for good. */
static bool proc_start_time(pid_t pid, char *out, size_t bytes)
{
	char path[64], line[1024];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return false;
	const char *rp = fgets(line, sizeof(line), f) ? strrchr(line, ')') : NULL;
	fclose(f);
	if (!rp)
		return false;
	/* After "(comm) ": state is field 3, so 19 fields to skip. */
	const char *p = rp + 2;
	for (int field = 3; field < 22 && p; field++) {
		p = strchr(p, ' ');
		if (p)
			p++;
	}
	if (!p)
		return false;
	snprintf(out, bytes, "%.*s", (int)strcspn(p, " "), p);
	return true;
}

/*
 * Every live fixture is registered as REGISTRY/PID-STARTTIME -> its
 * directory (wherever the scratch space is): an entry whose process is
 * gone is a run killed before its cleanup.
 */
#define REGISTRY "/run/fusesched-test-gluster"
static char registry_entry[128];

static void take_down_stale_runs(void)
{
	DIR *d = opendir(REGISTRY);
	struct dirent *e;
	while (d && (e = readdir(d))) {
		int pid = 0;
		char start[64] = "", now[64] = "";
		if (sscanf(e->d_name, "%d-%63s", &pid, start) != 2)
			continue;
		/* Alive and the same process (start time): another run's, in use. */
		if (proc_start_time(pid, now, sizeof(now)) && strcmp(now, start) == 0)
			continue;
		char entry[400], dir[512];
		snprintf(entry, sizeof(entry), "%s/%s", REGISTRY, e->d_name);
		ssize_t n = readlink(entry, dir, sizeof(dir) - 1);
		if (n > 0) {
			dir[n] = '\0';
			if (strstr(dir, "/gluster-")) {
				fprintf(stderr, "gluster fixture: %s was left by a run that did not clean up "
						"(pid %d): taking it down\n", dir, pid);
				bool created[HOST_PATHS] = {false};
				char list[700], line[300];
				snprintf(list, sizeof(list), "%s/host-paths-created", dir);
				FILE *f = fopen(list, "re");
				while (f && fgets(line, sizeof(line), f)) {
					line[strcspn(line, "\n")] = '\0';
					for (size_t i = 0; i < HOST_PATHS; i++)
						created[i] |= strcmp(line, host_paths[i]) == 0;
				}
				if (f)
					fclose(f);
				take_down_dir(dir);
				remove_host_paths(created);
				/* The dead run's own scratch directory (scratch.h), when it had one. */
				char *slash = strrchr(dir, '/');
				if (slash) {
					*slash = '\0';
					const char *base = strrchr(dir, '/');
					if (base && strncmp(base, "/fusesched-test_gluster-", 24) == 0)
						test_sh("rm -rf --one-file-system '%s'", dir);
				}
			}
		}
		unlink(entry);
	}
	if (d)
		closedir(d);
}

static void register_run(const struct gluster *g)
{
	char start[64] = "0", entry[256];
	proc_start_time(getpid(), start, sizeof(start));
	mkdir(REGISTRY, 0755);
	snprintf(registry_entry, sizeof(registry_entry), "%d-%s", (int)getpid(), start);
	snprintf(entry, sizeof(entry), "%s/%s", REGISTRY, registry_entry);
	if (symlink(g->dir, entry) < 0)
		fprintf(stderr, "gluster fixture: cannot register %s: %s\n", entry, strerror(errno));
}

static void unregister_run(void)
{
	if (!registry_entry[0])
		return;
	char entry[256];
	snprintf(entry, sizeof(entry), "%s/%s", REGISTRY, registry_entry);
	unlink(entry);
	rmdir(REGISTRY); /* when empty */
	registry_entry[0] = '\0';
}

static bool start_glusterd(struct gluster *g)
{
	char vol[400], text[2048];
	snprintf(vol, sizeof(vol), "%s/glusterd.vol", g->dir);
	snprintf(text, sizeof(text),
		 "volume management\n"
		 "    type mgmt/glusterd\n"
		 "    option working-directory %s/state\n"
		 "    option run-directory %s/run\n"
		 "    option logging-directory %s/log\n"
		 "    option glusterd-sockfile %s/glusterd.socket\n"
		 "    option transport-type socket\n"
		 "    option transport.socket.listen-port %d\n"
		 "    option ping-timeout 0\n"
		 "    option event-threads 1\n"
		 "end-volume\n",
		 g->dir, g->dir, g->dir, g->dir, GLUSTERD_PORT);
	test_write_file(vol, text);
	char pidfile[400], log[400], out[400], sock[400];
	snprintf(pidfile, sizeof(pidfile), "%s/run/glusterd.pid", g->dir);
	snprintf(log, sizeof(log), "%s/log/glusterd.log", g->dir);
	snprintf(out, sizeof(out), "%s/log/glusterd.out", g->dir);
	snprintf(sock, sizeof(sock), "%s/run/glusterfsd.socket", g->dir);
	g->glusterd = fork();
	if (g->glusterd < 0) {
		fail(g, "fork: %s", strerror(errno));
		g->glusterd = 0;
		return false;
	}
	if (g->glusterd == 0) {
		int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		setpgid(0, 0); /* a ^C to the test does not race our own shutdown of it */
		execlp("glusterd", "glusterd", "-N", "-f", vol, "-p", pidfile, "-S", sock, "-l", log,
		       (char *)NULL);
		_exit(127);
	}
	char cmd[1024];
	cli(g, cmd, sizeof(cmd));
	for (double t0 = now_s(); now_s() - t0 < GLUSTERD_READY_S;) {
		int status;
		if (waitpid(g->glusterd, &status, WNOHANG) == g->glusterd) {
			g->glusterd = 0;
			fail(g, "glusterd exited (status %d) before it served its CLI", status);
			append_tail(g->error, sizeof(g->error), log, 15);
			append_tail(g->error, sizeof(g->error), out, 5);
			return false;
		}
		if (test_sh("%s volume list >/dev/null 2>&1", cmd) == 0)
			return true;
		sleep_ms(200);
	}
	fail(g, "glusterd did not serve its CLI within %d s", GLUSTERD_READY_S);
	append_tail(g->error, sizeof(g->error), log, 15);
	return false;
}

/* Has the node's client connected to both bricks (the meta xlator's view of its replicate xlator)? */
static bool replicas_up(const struct gluster *g, int node)
{
	char path[600], line[256];
	snprintf(path, sizeof(path), "%s/.meta/graphs/active/%s-replicate-0/private", g->node[node],
		 g->volume);
	FILE *f = fopen(path, "re");
	if (!f)
		return false;
	int up = 0;
	while (fgets(line, sizeof(line), f)) {
		int child, v;
		if (sscanf(line, "child_up[%d] = %d", &child, &v) == 2 && v == 1)
			up++;
	}
	fclose(f);
	return up == 2;
}

static bool make_volume(struct gluster *g, double *t)
{
	char cmd[1024], out[2048] = "";
	cli(g, cmd, sizeof(cmd));
	if (run(out, sizeof(out), "%s volume create %s replica 2 %s:%s/brick1 %s:%s/brick2 force", cmd,
		g->volume, g->host, g->dir, g->host, g->dir) != 0) {
		fail(g, "volume create failed: %s", out);
		return false;
	}
	out[0] = '\0';
	if (run(out, sizeof(out), "%s volume start %s", cmd, g->volume) != 0) {
		fail(g, "volume start failed: %s", out);
		char log[400];
		snprintf(log, sizeof(log), "%s/log/glusterd.log", g->dir);
		append_tail(g->error, sizeof(g->error), log, 10);
		return false;
	}
	note_brick_sockets(g->dir);
	step(g, "volume create+start", t);
	for (int k = 0; k < GLUSTER_NODES; k++) {
		out[0] = '\0';
		if (run(out, sizeof(out), "mount -t glusterfs -o log-file=%s/log/node%d.log %s:/%s '%s'",
			g->dir, k + 1, g->host, g->volume, g->node[k]) != 0) {
			fail(g, "mount -t glusterfs %s:/%s %s failed: %s", g->host, g->volume, g->node[k], out);
			char log[400];
			snprintf(log, sizeof(log), "%s/log/node%d.log", g->dir, k + 1);
			append_tail(g->error, sizeof(g->error), log, 10);
			return false;
		}
		struct statfs sf;
		if (statfs(g->node[k], &sf) != 0 || sf.f_type != FUSE_SUPER_MAGIC) {
			fail(g, "%s is not a FUSE mount after mount -t glusterfs", g->node[k]);
			return false;
		}
	}
	step(g, "2 client mounts", t);
	/* Replicated from the first write on: both clients see both bricks. */
	for (int k = 0; k < GLUSTER_NODES; k++) {
		double t0 = now_s();
		while (!replicas_up(g, k) && now_s() - t0 < REPLICAS_UP_S)
			sleep_ms(100);
		if (!replicas_up(g, k)) {
			fail(g, "the client at %s did not connect to both bricks within %d s", g->node[k],
			     REPLICAS_UP_S);
			return false;
		}
	}
	step(g, "clients connected", t);
	return true;
}

void gluster_start(struct gluster *g)
{
	double t0 = now_s(), t = t0;
	memset(g, 0, sizeof(*g));
	for (size_t i = 0; i < HOST_PATHS; i++)
		host_path_existed[i] = access(host_paths[i], F_OK) == 0;
	if (!host_name(g->host, sizeof(g->host))) {
		fail(g, "host name does not resolve");
		return;
	}
	snprintf(g->volume, sizeof(g->volume), "fusesched-test-%d", (int)getpid());
	mkdir(TEST_SCRATCH_DIR, 0755);
	snprintf(g->dir, sizeof(g->dir), "%s/gluster-XXXXXX", TEST_SCRATCH_DIR);
	if (!mkdtemp(g->dir)) {
		fail(g, "mkdtemp %s: %s", g->dir, strerror(errno));
		g->dir[0] = '\0';
		return;
	}
	chmod(g->dir, 0755);
	register_run(g);
	char list[400], text[1024] = "";
	for (size_t i = 0; i < HOST_PATHS; i++)
		if (!host_path_existed[i])
			snprintf(text + strlen(text), sizeof(text) - strlen(text), "%s\n", host_paths[i]);
	snprintf(list, sizeof(list), "%s/host-paths-created", g->dir);
	test_write_file(list, text);
	static const char *const sub[] = {"state", "run", "log", "brick1", "brick2", "node1", "node2"};
	for (size_t i = 0; i < sizeof(sub) / sizeof(sub[0]); i++) {
		char p[400];
		snprintf(p, sizeof(p), "%s/%s", g->dir, sub[i]);
		if (mkdir(p, 0755) < 0) {
			fail(g, "mkdir %s: %s", p, strerror(errno));
			return;
		}
	}
	for (int k = 0; k < GLUSTER_NODES; k++)
		snprintf(g->node[k], sizeof(g->node[k]), "%s/node%d", g->dir, k + 1);
	if (!start_glusterd(g))
		return;
	step(g, "glusterd", &t);
	if (!make_volume(g, &t))
		return;
	g->up = true;
	g->start_s = now_s() - t0;
}

int gluster_stop(struct gluster *g)
{
	if (!g->dir[0])
		return 0;
	double t0 = now_s(), t = t0;
	int problems = 0;
	g->steps[0] = '\0';
	unmount_over_nodes(g);
	note_brick_sockets(g->dir);
	for (int k = 0; k < GLUSTER_NODES; k++) {
		if (!g->node[k][0] || !test_in_mountinfo(g->node[k]))
			continue;
		if (test_sh("umount '%s' 2>/dev/null", g->node[k]) != 0) {
			fprintf(stderr, "gluster fixture: %s busy: unmounting lazily\n", g->node[k]);
			test_sh("umount -l '%s'", g->node[k]);
		}
	}
	step(g, "unmount", &t);
	if (g->glusterd > 0) {
		char cmd[1024], out[2048] = "";
		cli(g, cmd, sizeof(cmd));
		/* Both, whatever the first says: a volume created but never started is deleted too. */
		run(out, sizeof(out), "%s volume stop %s force", cmd, g->volume);
		if (run(out, sizeof(out), "%s volume delete %s", cmd, g->volume) != 0 &&
		    !strstr(out, "does not exist")) {
			fprintf(stderr, "gluster fixture: volume stop/delete: %s\n", out);
		}
		step(g, "volume stop+delete", &t);
		kill(g->glusterd, SIGTERM);
		int status;
		bool reaped = false;
		for (int i = 0; i < 200 && !reaped; i++) {
			reaped = waitpid(g->glusterd, &status, WNOHANG) == g->glusterd;
			if (!reaped)
				sleep_ms(50);
		}
		if (!reaped) {
			fprintf(stderr, "gluster fixture: glusterd ignored SIGTERM for 10 s: killing it\n");
			kill(g->glusterd, SIGKILL);
			waitpid(g->glusterd, &status, 0);
		}
		g->glusterd = 0;
		step(g, "glusterd", &t);
	}
	/* Bricks, self-heal daemon, clients: anything still running out of our directory. */
	int stragglers = 0;
	for (int i = 0; i < 100; i++) {
		stragglers = 0;
		DIR *proc = opendir("/proc");
		struct dirent *e;
		while (proc && (e = readdir(proc))) {
			pid_t pid = (pid_t)atoi(e->d_name);
			char cmd[8192];
			if (pid > 0 && pid != getpid() && cmdline_mentions(pid, g->dir, cmd, sizeof(cmd)) &&
			    !process_gone(pid))
				stragglers++;
		}
		if (proc)
			closedir(proc);
		if (!stragglers)
			break;
		if (i == 40)
			signal_mentioning(g->dir, SIGTERM);
		if (i == 80)
			signal_mentioning(g->dir, SIGKILL);
		sleep_ms(50);
	}
	if (stragglers) {
		fprintf(stderr, "gluster fixture: %d gluster processes of %s did not exit\n", stragglers, g->dir);
		problems++;
	}
	step(g, "the rest", &t);
	problems += take_down_dir(g->dir);
	unregister_run();
	/* What glusterd made outside its directory, if it was not there before. */
	bool created[HOST_PATHS];
	for (size_t i = 0; i < HOST_PATHS; i++)
		created[i] = !host_path_existed[i];
	remove_host_paths(created);
	step(g, "removing", &t);
	g->dir[0] = '\0';
	g->up = false;
	g->stop_s = now_s() - t0;
	return problems ? -1 : 0;
}

const char *gluster_node_path(const struct gluster *g, int node, const char *rel)
{
	static __thread char buf[4][700];
	static __thread int next;
	char *p = buf[next++ % 4];
	snprintf(p, sizeof(buf[0]), "%s/%s", g->node[node], rel);
	return p;
}

const char *gluster_brick_path(const struct gluster *g, int brick, const char *rel)
{
	static __thread char buf[4][700];
	static __thread int next;
	char *p = buf[next++ % 4];
	snprintf(p, sizeof(buf[0]), "%s/brick%d/%s", g->dir, brick + 1, rel);
	return p;
}
