/* The command line: errors that name the problem, daemon mode, fstab form, signals. */
#include "leftovers.h"
#include "mount_helper.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <linux/magic.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

static char scratch[512];

static void scratch_up(void)
{
	snprintf(scratch, sizeof(scratch), "%s/cli-XXXXXX", TEST_SCRATCH_DIR);
	mkdir(TEST_SCRATCH_DIR, 0755);
	ck_assert_ptr_nonnull(mkdtemp(scratch));
	/* Taken down by the runner if the test fails (leftovers.h): the tests mount on m. */
	leftovers_add_dir(scratch);
	char m[600];
	snprintf(m, sizeof(m), "%s/m", scratch);
	leftovers_add_mount(m);
	test_sh("mkdir -p '%s/b' '%s/m' && touch '%s/file'", scratch, scratch, scratch);
}

static const char *m_path(void)
{
	static char buf[600];
	snprintf(buf, sizeof(buf), "%s/m", scratch);
	return buf;
}

static void scratch_down(void)
{
	test_sh("fusermount3 -u '%s/m' 2>/dev/null; rm -rf '%s'", scratch, scratch);
}

/* Runs "PREFIX fusesched ARGS"; returns its exit status and leaves its output in out. */
static int run_cli_as(char *out, size_t out_bytes, const char *prefix, const char *args)
{
	char errfile[600];
	snprintf(errfile, sizeof(errfile), "%s/stderr", scratch);
	int status = test_sh("cd '%s' && %s %s %s >'%s' 2>&1", scratch, prefix, FUSESCHED_BIN, args,
			     errfile);
	FILE *f = fopen(errfile, "r");
	size_t n = f ? fread(out, 1, out_bytes - 1, f) : 0;
	out[n] = '\0';
	if (f)
		fclose(f);
	return status;
}

static int run_cli(char *out, size_t out_bytes, const char *args)
{
	return run_cli_as(out, out_bytes, "", args);
}

START_TEST(non_root_is_told_what_stops_the_mount)
{
	char out[4096];
	ck_assert_int_eq(chmod(scratch, 0755), 0);
	/* Only meaningful where /etc/fuse.conf does not already allow it. */
	if (test_sh("grep -qs '^user_allow_other' /etc/fuse.conf") == 0)
		return;
	int status = run_cli_as(out, sizeof(out), "setpriv --reuid 1000 --regid 1000 --clear-groups",
				"mount b m -f");
	ck_assert_int_eq(status, 2);
	/* The first obstacle is named: /dev/fuse itself where it is root-only, else allow_other. */
	struct stat st;
	ck_assert_int_eq(stat("/dev/fuse", &st), 0);
	if ((st.st_mode & 0006) != 0006)
		ck_assert_ptr_nonnull(strstr(out, "cannot open /dev/fuse: Permission denied"));
	else
		ck_assert_ptr_nonnull(strstr(out, "requires root, or 'user_allow_other' in /etc/fuse.conf"));
}
END_TEST

START_TEST(errors_name_the_problem)
{
	char out[4096];
	ck_assert_int_eq(run_cli(out, sizeof(out), "mount nope m -f"), 2);
	ck_assert_ptr_nonnull(strstr(out, "backing directory 'nope'"));
	ck_assert_ptr_nonnull(strstr(out, "No such file"));
	ck_assert_int_eq(run_cli(out, sizeof(out), "mount file m -f"), 2);
	ck_assert_ptr_nonnull(strstr(out, "'file' is not a directory"));
	ck_assert_int_eq(run_cli(out, sizeof(out), "mount b nowhere -f"), 2);
	ck_assert_ptr_nonnull(strstr(out, "mountpoint 'nowhere'"));
	ck_assert_int_eq(run_cli(out, sizeof(out), "mount b file -f"), 2);
	ck_assert_ptr_nonnull(strstr(out, "mountpoint 'file' is not a directory"));
	ck_assert_int_eq(run_cli(out, sizeof(out), "mount b m --bogus"), 2);
	ck_assert_ptr_nonnull(strstr(out, "unknown option '--bogus'"));
	ck_assert_int_eq(run_cli(out, sizeof(out), "mount b"), 2);
	ck_assert_ptr_nonnull(strstr(out, "needs BACKING and MOUNTPOINT"));
	ck_assert_int_eq(run_cli(out, sizeof(out), "mount b m -f -o max_background=0"), 2);
	ck_assert_ptr_nonnull(strstr(out, "mount option 'max_background=0': must be 1..65535"));
	ck_assert_int_eq(run_cli(out, sizeof(out), "mount b m -f -o max_background=lots"), 2);
	ck_assert_ptr_nonnull(strstr(out, "mount option 'max_background=' needs a number"));
	ck_assert_int_eq(run_cli(out, sizeof(out), "mount b m -f -o max_write=1000"), 2);
	ck_assert_ptr_nonnull(strstr(out, "mount option 'max_write=1000': must be a multiple of 4096, 4096..1048576"));
	ck_assert_int_eq(run_cli(out, sizeof(out), "mount b m -f -o max_write=2M"), 2);
	ck_assert_ptr_nonnull(strstr(out, "mount option 'max_write=' needs a number of bytes"));
	ck_assert_int_eq(run_cli(out, sizeof(out), "mount b m -f -o attr_timeout=soon"), 2);
	ck_assert_ptr_nonnull(strstr(out, "mount option 'attr_timeout=' needs a number of seconds"));
	ck_assert_int_eq(run_cli(out, sizeof(out), "mount b m -f -o negative_timeout=1.2.3"), 2);
	ck_assert_ptr_nonnull(strstr(out, "mount option 'negative_timeout=1.2.3': must be seconds, 0..86400"));
	ck_assert_int_eq(run_cli(out, sizeof(out), "mount b m -f -o entry_timeout=100000"), 2);
	ck_assert_ptr_nonnull(strstr(out, "mount option 'entry_timeout=100000': must be seconds, 0..86400"));
	ck_assert_int_eq(run_cli(out, sizeof(out), "frobnicate"), 2);
	ck_assert_ptr_nonnull(strstr(out, "unknown command 'frobnicate'"));
	ck_assert_int_eq(run_cli(out, sizeof(out), "version"), 0);
	ck_assert_ptr_nonnull(strstr(out, "fusesched "));
	ck_assert_int_eq(run_cli(out, sizeof(out), "--help"), 0);
	ck_assert_ptr_nonnull(strstr(out, "fusesched mount BACKING MOUNTPOINT"));
}
END_TEST

static void write_scratch(const char *name, const char *content)
{
	char path[600];
	snprintf(path, sizeof(path), "%s/%s", scratch, name);
	test_write_file(path, content);
}

START_TEST(config_errors_stop_the_mount)
{
	char out[4096];
	write_scratch("bad.conf", "[scheduler]\npolicy = bfq\n\n[group \"/tenants/gold\"]\nwieght = 800\n");
	ck_assert_int_eq(run_cli(out, sizeof(out), "check-config bad.conf"), 2);
	ck_assert_ptr_nonnull(strstr(out, "bad.conf:5:"));
	ck_assert_ptr_nonnull(strstr(out, "wieght"));
	ck_assert_int_eq(run_cli(out, sizeof(out), "mount b m -f -c bad.conf"), 2);
	ck_assert_ptr_nonnull(strstr(out, "bad.conf:5:"));
	ck_assert(!test_is_fuse_mount(m_path()));
	write_scratch("good.conf", "[group \"/tenants/gold\"]\nweight = 800\n");
	ck_assert_int_eq(run_cli(out, sizeof(out), "check-config good.conf"), 0);
	ck_assert_ptr_nonnull(strstr(out, "/tenants/gold"));
	ck_assert_ptr_nonnull(strstr(out, "800"));
	ck_assert_int_eq(run_cli(out, sizeof(out), "check-config missing.conf"), 2);
	ck_assert_ptr_nonnull(strstr(out, "missing.conf"));
}
END_TEST

static char *path_in(const char *rel)
{
	static char buf[4][600];
	static int next;
	char *p = buf[next++ % 4];
	snprintf(p, sizeof(buf[0]), "%s/%s", scratch, rel);
	return p;
}

/* The kernel's limit of the FUSE connection mounted at path, from /sys/fs/fuse/connections. */
static long connection_max_background(const char *path)
{
	struct stat st;
	ck_assert_int_eq(stat(path, &st), 0);
	char file[128];
	snprintf(file, sizeof(file), "/sys/fs/fuse/connections/%u/max_background", minor(st.st_dev));
	FILE *f = fopen(file, "r");
	long n = -1;
	if (f) {
		if (fscanf(f, "%ld", &n) != 1)
			n = -1;
		fclose(f);
	}
	return n;
}

START_TEST(daemonizes_and_refuses_busy_mountpoint)
{
	char out[4096];
	/* Without -f the command returns once mounted, leaving the daemon behind. */
	ck_assert_int_eq(run_cli(out, sizeof(out), "mount b m -o max_background=128"), 0);
	ck_assert(test_is_fuse_mount(path_in("m")));
	/* The kernel's limit is the one asked for (read through the fuse control filesystem). */
	bool fusectl_mounted_here = test_sh("mountpoint -q /sys/fs/fuse/connections") != 0 &&
				    test_sh("mount -t fusectl fusectl /sys/fs/fuse/connections") == 0;
	long max_background = connection_max_background(path_in("m"));
	if (fusectl_mounted_here)
		test_sh("umount /sys/fs/fuse/connections");
	if (max_background == -1)
		fprintf(stderr, "cli: no fuse control filesystem: max_background not read back\n");
	else
		ck_assert_int_eq(max_background, 128);
	ck_assert_int_eq(run_cli(out, sizeof(out), "mount b m -f"), 2);
	ck_assert_ptr_nonnull(strstr(out, "is busy"));
	ck_assert_int_eq(test_sh("fusermount3 -u '%s'", path_in("m")), 0);
	ck_assert(!test_is_fuse_mount(path_in("m")));
}
END_TEST

/*
 * A name found missing is remembered for negative_timeout: where changes
 * beside the mount are not watched (watch_timeout=0 here), a file made in
 * the backing directory under that name stays unseen until then; with 0 it
 * is seen at once. A file made through the mount is seen at once either
 * way.
 */
START_TEST(negative_entries_last_negative_timeout)
{
	char out[4096];
	struct stat st;
	for (int cached = 1; cached >= 0; cached--) {
		ck_assert_int_eq(run_cli(out, sizeof(out), cached ? "mount b m -o negative_timeout=600,watch_timeout=0"
								  : "mount b m -o negative_timeout=0,watch_timeout=0"), 0);
		char beside[64], through[64];
		snprintf(beside, sizeof(beside), "beside-%d", cached);
		snprintf(through, sizeof(through), "through-%d", cached);
		char m_beside[700], m_through[700], b_beside[700];
		snprintf(m_beside, sizeof(m_beside), "%s/%s", path_in("m"), beside);
		snprintf(m_through, sizeof(m_through), "%s/%s", path_in("m"), through);
		snprintf(b_beside, sizeof(b_beside), "%s/%s", path_in("b"), beside);
		ck_assert_int_eq(stat(m_beside, &st), -1);
		ck_assert_int_eq(errno, ENOENT);
		ck_assert_int_eq(stat(m_through, &st), -1);
		int fd = open(b_beside, O_CREAT | O_WRONLY, 0644);
		ck_assert_int_ge(fd, 0);
		close(fd);
		fd = open(m_through, O_CREAT | O_WRONLY, 0644);
		ck_assert_int_ge(fd, 0);
		close(fd);
		ck_assert_int_eq(stat(m_through, &st), 0);
		if (cached) {
			ck_assert_int_eq(stat(m_beside, &st), -1);
			ck_assert_int_eq(errno, ENOENT);
		} else {
			ck_assert_int_eq(stat(m_beside, &st), 0);
		}
		ck_assert_int_eq(test_sh("fusermount3 -u '%s'", path_in("m")), 0);
	}
}
END_TEST

/* Reads served by the daemon so far, summed over the tenants of `fusesched stat m --json`. */
static long daemon_reads(void)
{
	static char out[1 << 20];
	ck_assert_int_eq(run_cli(out, sizeof(out), "stat m --json"), 0);
	long total = 0;
	for (const char *p = out; (p = strstr(p, "\"ops\"")) != NULL;) {
		p = strstr(p, "\"read\"");
		ck_assert_ptr_nonnull(p);
		p += strlen("\"read\"");
		while (*p == ' ' || *p == ':')
			p++;
		total += strtol(p, NULL, 10);
	}
	return total;
}

/* The whole of path (at most 64 KiB) through a fresh open; returns its length. */
static size_t read_whole(const char *path, char *buf, size_t bytes)
{
	int fd = open(path, O_RDONLY);
	ck_assert_msg(fd >= 0, "open %s: %s", path, strerror(errno));
	ssize_t n = read(fd, buf, bytes);
	ck_assert_int_ge(n, 0);
	close(fd);
	return (size_t)n;
}

/*
 * Close-to-open: the kernel keeps its cached pages of a file across opens
 * while the backing file is unchanged, so reading it again through the
 * mount sends no read to the daemon (with -o nokeep_cache each read does);
 * a change beside the mount, even of the same size with its mtime put
 * back, is read at the next open.
 */
START_TEST(page_cache_kept_across_opens_until_the_file_changes)
{
	char out[4096], buf[65536], want[8192];
	/* Made before the mount: made beside it, the watch would tell the kernel
	 * of the new name a moment later and its pages would go with its entry. */
	memset(want, 'a', sizeof(want));
	int fd = open(path_in("b/cto"), O_CREAT | O_WRONLY | O_TRUNC, 0644);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, want, sizeof(want)), (ssize_t)sizeof(want));
	close(fd);
	ck_assert_int_eq(run_cli(out, sizeof(out), "mount b m"), 0);

	ck_assert_uint_eq(read_whole(path_in("m/cto"), buf, sizeof(buf)), sizeof(want));
	ck_assert(memcmp(buf, want, sizeof(want)) == 0);
	long first = daemon_reads();
	ck_assert_int_gt(first, 0);
	for (int i = 0; i < 3; i++) {
		ck_assert_uint_eq(read_whole(path_in("m/cto"), buf, sizeof(buf)), sizeof(want));
		ck_assert(memcmp(buf, want, sizeof(want)) == 0);
	}
	ck_assert_int_eq(daemon_reads(), first);
	/* -o nokeep_cache: every open drops them, every read reaches the daemon */
	ck_assert_int_eq(test_sh("fusermount3 -u '%s'", path_in("m")), 0);
	ck_assert_int_eq(run_cli(out, sizeof(out), "mount b m -o nokeep_cache"), 0);
	for (int i = 0; i < 2; i++)
		ck_assert_uint_eq(read_whole(path_in("m/cto"), buf, sizeof(buf)), sizeof(want));
	long dropped = daemon_reads();
	ck_assert_uint_eq(read_whole(path_in("m/cto"), buf, sizeof(buf)), sizeof(want));
	ck_assert_int_gt(daemon_reads(), dropped);
	ck_assert_int_eq(test_sh("fusermount3 -u '%s'", path_in("m")), 0);
	ck_assert_int_eq(run_cli(out, sizeof(out), "mount b m -o keep_cache"), 0);
	ck_assert_uint_eq(read_whole(path_in("m/cto"), buf, sizeof(buf)), sizeof(want));
	first = daemon_reads(); /* a new daemon counts from 0 */

	struct stat before;
	ck_assert_int_eq(stat(path_in("b/cto"), &before), 0);
	memset(want, 'b', sizeof(want));
	fd = open(path_in("b/cto"), O_WRONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pwrite(fd, want, sizeof(want), 0), (ssize_t)sizeof(want));
	struct timespec times[2] = {before.st_atim, before.st_mtim};
	ck_assert_int_eq(futimens(fd, times), 0);
	close(fd);
	ck_assert_uint_eq(read_whole(path_in("m/cto"), buf, sizeof(buf)), sizeof(want));
	ck_assert_msg(memcmp(buf, want, sizeof(want)) == 0, "a change beside the mount was not read");
	ck_assert_int_gt(daemon_reads(), first);
	ck_assert_int_eq(test_sh("fusermount3 -u '%s'", path_in("m")), 0);
}
END_TEST

/* Whether the scratch backing b is on a local filesystem (ext4, xfs, tmpfs), as the daemon judges it. */
static bool backing_is_local(void)
{
	struct statfs sf;
	ck_assert_int_eq(statfs(path_in("b"), &sf), 0);
	return sf.f_type == EXT4_SUPER_MAGIC || sf.f_type == XFS_SUPER_MAGIC || sf.f_type == TMPFS_MAGIC;
}

/* Mounts backing on m in the foreground with -d and options, its request trace in trace. */
static void mount_traced(char *trace, size_t trace_bytes, const char *backing, const char *options)
{
	snprintf(trace, trace_bytes, "%s/trace", scratch);
	ck_assert_int_eq(test_sh("cd '%s' && %s mount %s m -d %s 2>'%s' &", scratch, FUSESCHED_BIN, backing,
				 options, trace), 0);
	for (int i = 0; i < 1000 && !test_is_fuse_mount(m_path()); i++)
		usleep(10000);
	ck_assert(test_is_fuse_mount(m_path()));
}

/* Requests of one kind in the trace so far. */
static long traced(const char *trace, const char *opcode)
{
	char cmd[800], out[64] = "";
	snprintf(cmd, sizeof(cmd), "grep -c 'opcode: %s ' '%s'", opcode, trace);
	FILE *p = popen(cmd, "r");
	ck_assert_ptr_nonnull(p);
	ck_assert_ptr_nonnull(fgets(out, sizeof(out), p));
	pclose(p);
	return strtol(out, NULL, 10);
}

/* Opens, writes and closes m/f, reads it through 5 read-only opens, opens it for append; unmounts. */
static void writer_readers_writer(void)
{
	char buf[16];
	int fd = open(path_in("m/f"), O_CREAT | O_WRONLY, 0644);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, "data", 4), 4);
	ck_assert_int_eq(close(fd), 0);
	for (int i = 0; i < 5; i++) {
		fd = open(path_in("m/f"), O_RDONLY);
		ck_assert_int_ge(fd, 0);
		ck_assert_int_eq(read(fd, buf, sizeof(buf)), 4);
		ck_assert_int_eq(close(fd), 0);
	}
	fd = open(path_in("m/f"), O_WRONLY | O_APPEND);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(close(fd), 0);
	ck_assert_int_eq(test_sh("umount '%s'", m_path()), 0);
}

/* The FLUSH requests in the finished trace of writer_readers_writer. */
static long flushes_traced(const char *trace)
{
	/* The trace is complete once the last release is in it. */
	ck_assert_int_eq(test_sh("for i in $(seq 500); do test $(grep -c 'opcode: RELEASE' '%s') -ge 7 && "
				 "exit 0; sleep 0.01; done; exit 1", trace), 0);
	ck_assert_int_ge(traced(trace, "OPEN") + traced(trace, "CREATE"), 7);
	return traced(trace, "FLUSH");
}

/*
 * The kernel sends FLUSH at close so that write-back errors can be
 * reported there; only a writer's close on a backing filesystem that
 * reports them at close (network ones, FUSE) still costs that round trip.
 * Counted in the daemon's request trace (-d): on a local backing none; on
 * a backing that is itself a FUSE mount, one per writer's close.
 */
START_TEST(only_closes_that_can_fail_are_flushed)
{
	char trace[600], out[4096], m1[600];
	bool local = backing_is_local();
	mount_traced(trace, sizeof(trace), "b", "");
	writer_readers_writer();
	ck_assert_int_eq(flushes_traced(trace), local ? 0 : 2);

	/* b through a fusesched mount on m1, traced on m */
	snprintf(m1, sizeof(m1), "%s/m1", scratch);
	ck_assert_int_eq(mkdir(m1, 0755), 0);
	leftovers_add_mount(m1);
	ck_assert_int_eq(run_cli(out, sizeof(out), "mount b m1"), 0);
	ck_assert_int_eq(unlink(path_in("b/f")), 0);
	mount_traced(trace, sizeof(trace), "m1", "");
	writer_readers_writer();
	ck_assert_msg(flushes_traced(trace) == 2,
		      "expected a flush from each of the two writers' closes, none from the readers'");
	ck_assert_int_eq(test_sh("fusermount3 -u '%s'", m1), 0);
}
END_TEST

/*
 * `ls -l` asks every file for its ACL, and a readdirplus record makes the
 * kernel drop an inode's cached ACL: a listing repeated while the kernel
 * holds the entries unchanged gets records without node ids, so it costs
 * no request per file. A file changed beside the mount still gets a full
 * record, which refreshes the kernel's attributes (long timeouts here, so
 * nothing else would).
 */
START_TEST(repeated_listing_keeps_the_kernels_entries)
{
	char trace[600];
	ck_assert_int_eq(test_sh("mkdir '%s/b/dir' && cd '%s/b/dir' && for i in $(seq 50); do "
				 "echo x > f$i; chmod 644 f$i; done", scratch, scratch), 0);
	mount_traced(trace, sizeof(trace), "b", "-o entry_timeout=60,attr_timeout=60");
	ck_assert_int_eq(test_sh("ls -l '%s/dir' >/dev/null", m_path()), 0);
	long first = traced(trace, "GETXATTR");
	ck_assert_int_ge(first, 50);
	ck_assert_int_eq(test_sh("ls -l '%s/dir' >/dev/null", m_path()), 0);
	ck_assert_int_le(traced(trace, "GETXATTR") - first, 5);

	struct stat st;
	ck_assert_int_eq(stat(path_in("m/dir/f7"), &st), 0);
	ck_assert_int_eq(st.st_mode & 07777, 0644);
	ck_assert_int_eq(chmod(path_in("b/dir/f7"), 0600), 0);
	ck_assert_int_eq(test_sh("ls -l '%s/dir' >/dev/null", m_path()), 0);
	ck_assert_int_eq(stat(path_in("m/dir/f7"), &st), 0);
	ck_assert_msg((st.st_mode & 07777) == 0600, "a listing left f7's mode at %o", st.st_mode & 07777);
	ck_assert_int_eq(test_sh("fusermount3 -u '%s'", m_path()), 0);
}
END_TEST

/* Whether path, through the mount, has the mode bits and size given (size < 0: is missing). */
static bool shows(const char *path, mode_t mode, off_t size)
{
	struct stat st;
	if (stat(path, &st) != 0)
		return size < 0 && errno == ENOENT;
	return size >= 0 && (st.st_mode & 07777) == mode && st.st_size == size;
}

/*
 * On a local backing filesystem the daemon watches for changes made beside
 * the mount and tells the kernel of each at once, so names, attributes and
 * missing names are trusted for watch_timeout (60 s): a stat past the 1 s
 * default costs no request, and a chmod, an append, a new name, a rename
 * and an unlink made in the backing directory are all seen through the
 * mount within moments, not a minute later. On any other backing the
 * timeouts stay 1 s.
 */
START_TEST(changes_beside_the_mount_are_seen_at_once)
{
	char trace[600];
	bool local = backing_is_local();
	ck_assert_int_eq(test_sh("cd '%s/b' && mkdir dir && echo x > dir/f && chmod 644 dir/f && "
				 "echo g > dir/g && echo h > dir/h && chmod 644 dir/g dir/h", scratch), 0);
	mount_traced(trace, sizeof(trace), "b", "");
	ck_assert(shows(path_in("m/dir/f"), 0644, 2));
	ck_assert(shows(path_in("m/dir/g"), 0644, 2));
	ck_assert(shows(path_in("m/dir/h"), 0644, 2));
	ck_assert(shows(path_in("m/dir/new"), 0, -1));
	static char out[1 << 16];
	ck_assert_int_eq(run_cli(out, sizeof(out), "stat m --json"), 0);
	const char *field = strstr(out, "\"watch_timeout_s\"");
	ck_assert_ptr_nonnull(field);
	ck_assert_int_eq(strtol(strchr(field, ':') + 1, NULL, 10), local ? 60 : 0);
	long asked = traced(trace, "LOOKUP") + traced(trace, "GETATTR");
	usleep(1500 * 1000);
	ck_assert(shows(path_in("m/dir/f"), 0644, 2));
	ck_assert(shows(path_in("m/dir/new"), 0, -1));
	long again = traced(trace, "LOOKUP") + traced(trace, "GETATTR");
	if (!local) {
		ck_assert_msg(again > asked, "past 1 s the kernel should ask again on a backing not watched");
		ck_assert_int_eq(test_sh("fusermount3 -u '%s'", m_path()), 0);
		return;
	}
	ck_assert_msg(again == asked, "past 1 s the kernel asked again (%ld requests, %ld before)", again, asked);

	ck_assert_int_eq(chmod(path_in("b/dir/f"), 0600), 0);
	ck_assert_int_eq(test_sh("cd '%s/b/dir' && echo more >> f && echo n > new && chmod 644 new && mv g g2 && rm h",
				 scratch), 0);
	bool seen = false;
	for (int i = 0; i < 500 && !seen; i++) {
		seen = shows(path_in("m/dir/f"), 0600, 7) && shows(path_in("m/dir/new"), 0644, 2) &&
		       shows(path_in("m/dir/g"), 0, -1) && shows(path_in("m/dir/g2"), 0644, 2) &&
		       shows(path_in("m/dir/h"), 0, -1);
		if (!seen)
			usleep(10000);
	}
	ck_assert_msg(seen, "changes beside the mount not seen through it within 5 s: f %d, new %d, g %d, "
		      "g2 %d, h %d", shows(path_in("m/dir/f"), 0600, 7), shows(path_in("m/dir/new"), 0644, 2),
		      shows(path_in("m/dir/g"), 0, -1), shows(path_in("m/dir/g2"), 0644, 2),
		      shows(path_in("m/dir/h"), 0, -1));

	/* A directory moved in from elsewhere on the filesystem, where the
	 * daemon has seen it (and learned to skip it) first, is watched once
	 * inside. */
	ck_assert_int_eq(test_sh("mkdir -p '%s/outside/d' && echo y > '%s/outside/d/y'", scratch, scratch), 0);
	usleep(200 * 1000);
	ck_assert_int_eq(test_sh("mv '%s/outside/d' '%s/b/dir/d'", scratch, scratch), 0);
	ck_assert(shows(path_in("m/dir/d/z"), 0, -1));
	ck_assert_int_eq(test_sh("echo z > '%s/b/dir/d/z' && chmod 644 '%s/b/dir/d/z'", scratch, scratch), 0);
	seen = false;
	for (int i = 0; i < 500 && !(seen = shows(path_in("m/dir/d/z"), 0644, 2)); i++)
		usleep(10000);
	ck_assert_msg(seen, "a file made beside the mount in a directory moved in was not seen within 5 s");
	ck_assert_int_eq(test_sh("fusermount3 -u '%s'", m_path()), 0);
}
END_TEST

/* The test pattern's byte at file offset off: no two nearby chunks alike. */
static unsigned char pattern_byte(size_t off)
{
	return (unsigned char)((off * 2654435761u) >> 13);
}

/* Compares path's content with the pattern; reads with O_DIRECT when direct. */
static void check_pattern(const char *path, size_t bytes, bool direct)
{
	int fd = open(path, O_RDONLY | (direct ? O_DIRECT : 0));
	ck_assert_msg(fd >= 0, "open %s: %s", path, strerror(errno));
	unsigned char *buf;
	ck_assert_int_eq(posix_memalign((void **)&buf, 4096, bytes), 0);
	ck_assert_int_eq(pread(fd, buf, bytes, 0), (ssize_t)bytes);
	size_t i = 0;
	while (i < bytes && buf[i] == pattern_byte(i)) /* not ck_assert per byte: each is a syscall */
		i++;
	ck_assert_msg(i == bytes, "%s: byte %zu is 0x%02x, written 0x%02x", path, i, buf[i],
		      pattern_byte(i));
	free(buf);
	close(fd);
}

/*
 * The README's mount runs in the background: the daemon is the child of a
 * fork after set-up. Its I/O buffers must be the ones the kernel reads and
 * writes (registered before the fork, the kernel kept the parent's pages:
 * writes stored zeros and reads returned stale bytes).
 */
START_TEST(daemonized_mount_moves_data_intact)
{
	char out[4096];
	ck_assert_int_eq(run_cli(out, sizeof(out), "mount b m"), 0);
	ck_assert(test_is_fuse_mount(path_in("m")));
	const size_t bytes = 4 << 20;
	unsigned char *data;
	ck_assert_int_eq(posix_memalign((void **)&data, 4096, bytes), 0);
	for (size_t i = 0; i < bytes; i++)
		data[i] = pattern_byte(i);
	/* Buffered in 4 KiB, 64 KiB and 1 MiB writes, and direct in 1 MiB. */
	const size_t chunk[] = {4096, 65536, 1 << 20, 1 << 20};
	for (int k = 0; k < 4; k++) {
		char rel[32];
		snprintf(rel, sizeof(rel), "m/f%d", k);
		int fd = open(path_in(rel), O_CREAT | O_WRONLY | O_TRUNC | (k == 3 ? O_DIRECT : 0), 0644);
		ck_assert_msg(fd >= 0, "open %s: %s", rel, strerror(errno));
		for (size_t off = 0; off < bytes; off += chunk[k])
			ck_assert_int_eq(pwrite(fd, data + off, chunk[k], (off_t)off), (ssize_t)chunk[k]);
		ck_assert_int_eq(close(fd), 0);
		snprintf(rel, sizeof(rel), "b/f%d", k);
		check_pattern(path_in(rel), bytes, false);
		/* Direct: served by the daemon, not by the mount's page cache. */
		snprintf(rel, sizeof(rel), "m/f%d", k);
		check_pattern(path_in(rel), bytes, true);
	}
	free(data);
	ck_assert_int_eq(test_sh("fusermount3 -u '%s'", path_in("m")), 0);
}
END_TEST

/*
 * A backing directory mounted over itself (a volume scheduled in place: its
 * users keep their path): the daemon opens the directory before it mounts,
 * so it serves what was there, and what is written through the mount is in
 * the directory once it is unmounted.
 */
START_TEST(mounts_over_its_own_backing_directory)
{
	char out[4096];
	test_write_file(path_in("b/before"), "there before the mount\n");
	leftovers_add_mount(path_in("b"));
	ck_assert_int_eq(run_cli(out, sizeof(out), "mount b b"), 0);
	ck_assert_msg(test_is_fuse_mount(path_in("b")), "not mounted: %s", out);
	char text[64] = "";
	FILE *f = fopen(path_in("b/before"), "r");
	ck_assert_ptr_nonnull(f);
	ck_assert_ptr_nonnull(fgets(text, sizeof(text), f));
	fclose(f);
	ck_assert_str_eq(text, "there before the mount\n");
	const size_t bytes = 1 << 20;
	unsigned char *data;
	ck_assert_int_eq(posix_memalign((void **)&data, 4096, bytes), 0);
	for (size_t i = 0; i < bytes; i++)
		data[i] = pattern_byte(i);
	/* Direct: the write is the daemon's to do, not the page cache's. */
	int fd = open(path_in("b/written"), O_CREAT | O_WRONLY | O_DIRECT, 0644);
	ck_assert_msg(fd >= 0, "open: %s", strerror(errno));
	ck_assert_int_eq(pwrite(fd, data, bytes, 0), (ssize_t)bytes);
	ck_assert_int_eq(close(fd), 0);
	free(data);
	check_pattern(path_in("b/written"), bytes, true);
	ck_assert_int_eq(run_cli(out, sizeof(out), "stat b --json"), 0);
	char backing[700];
	snprintf(backing, sizeof(backing), "\"backing\":\"%s\"", path_in("b"));
	ck_assert_msg(strstr(out, backing), "%s not in: %s", backing, out);
	ck_assert_int_eq(test_sh("fusermount3 -u '%s'", path_in("b")), 0);
	ck_assert(!test_is_fuse_mount(path_in("b")));
	check_pattern(path_in("b/written"), bytes, false);
	ck_assert_int_eq(access(path_in("b/before"), R_OK), 0);
}
END_TEST

/*
 * -o max_write splits large writes, direct and buffered, into requests of
 * that size, and leaves reads whole: a 1 MiB direct read is still one
 * request (libfuse would shrink max_pages with max_write; the channel puts
 * it back). The bytes arrive intact either way.
 */
START_TEST(max_write_splits_writes_not_reads)
{
	char trace[600];
	mount_traced(trace, sizeof(trace), "b", "-o max_write=131072");
	const size_t bytes = 1 << 20;
	unsigned char *data;
	ck_assert_int_eq(posix_memalign((void **)&data, 4096, bytes), 0);
	for (size_t i = 0; i < bytes; i++)
		data[i] = pattern_byte(i);
	const char *rel[] = {"m/direct", "m/buffered"};
	for (int k = 0; k < 2; k++) {
		int fd = open(path_in(rel[k]), O_CREAT | O_WRONLY | O_TRUNC | (k == 0 ? O_DIRECT : 0), 0644);
		ck_assert_msg(fd >= 0, "open %s: %s", rel[k], strerror(errno));
		ck_assert_int_eq(pwrite(fd, data, bytes, 0), (ssize_t)bytes);
		ck_assert_int_eq(close(fd), 0);
	}
	free(data);
	ck_assert_int_eq(traced(trace, "WRITE"), 2 * 8);
	check_pattern(path_in("m/direct"), bytes, true);
	ck_assert_int_eq(traced(trace, "READ"), 1);
	check_pattern(path_in("b/direct"), bytes, false);
	check_pattern(path_in("b/buffered"), bytes, false);
	ck_assert_int_eq(test_sh("fusermount3 -u '%s'", m_path()), 0);
}
END_TEST

START_TEST(fstab_form_through_mount_fuse)
{
	/*
	 * For an fstab line of type fuse.fusesched, mount(8) runs mount.fuse3,
	 * which runs "fusesched BACKING MOUNTPOINT -o OPTS" from PATH. mount(8)
	 * resets PATH, so the helper is called directly with the build directory.
	 */
	char bin[600];
	snprintf(bin, sizeof(bin), "%s", FUSESCHED_BIN);
	ck_assert_int_eq(test_sh("PATH='%s':$PATH mount.fuse3 '%s' '%s' -t fusesched -o rw,dev",
				 dirname(bin), path_in("b"), path_in("m")), 0);
	ck_assert(test_is_fuse_mount(path_in("m")));
	/* -o dev was honoured: device nodes may be created. */
	ck_assert_int_eq(mknod(path_in("m/null"), S_IFCHR | 0666, makedev(1, 3)), 0);
	ck_assert_int_eq(test_sh("grep ' %s ' /proc/self/mountinfo | grep -v nodev | grep -q ' - fuse.fusesched '", path_in("m")), 0);
	ck_assert_int_eq(test_sh("umount '%s'", path_in("m")), 0);
	ck_assert(!test_is_fuse_mount(path_in("m")));
}
END_TEST

START_TEST(sigterm_unmounts_cleanly)
{
	struct test_mount m;
	test_mount_start(&m, NULL);
	int fd = open(test_mnt_path(&m, "kept"), O_CREAT | O_WRONLY, 0644);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, "acknowledged", 12), 12);
	ck_assert_int_eq(close(fd), 0);
	ck_assert_int_eq(kill(m.daemon_pid, SIGTERM), 0);
	int status = 0;
	ck_assert_int_eq(waitpid(m.daemon_pid, &status, 0), m.daemon_pid);
	m.daemon_pid = 0;
	ck_assert(WIFEXITED(status));
	ck_assert_int_eq(WEXITSTATUS(status), 0);
	ck_assert(!test_is_fuse_mount(m.mnt));
	struct stat st;
	ck_assert_int_eq(stat(test_backing_path(&m, "kept"), &st), 0);
	ck_assert_int_eq(st.st_size, 12);
	test_mount_stop(&m);
}
END_TEST

static Suite *cli_suite(void)
{
	Suite *s = suite_create("cli");
	TCase *tc = tcase_create("cli");
	tcase_add_unchecked_fixture(tc, leftovers_init, leftovers_cleanup);
	tcase_add_checked_fixture(tc, scratch_up, scratch_down);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, errors_name_the_problem);
	tcase_add_test(tc, non_root_is_told_what_stops_the_mount);
	tcase_add_test(tc, config_errors_stop_the_mount);
	tcase_add_test(tc, daemonizes_and_refuses_busy_mountpoint);
	tcase_add_test(tc, negative_entries_last_negative_timeout);
	tcase_add_test(tc, page_cache_kept_across_opens_until_the_file_changes);
	tcase_add_test(tc, only_closes_that_can_fail_are_flushed);
	tcase_add_test(tc, repeated_listing_keeps_the_kernels_entries);
	tcase_add_test(tc, changes_beside_the_mount_are_seen_at_once);
	tcase_add_test(tc, daemonized_mount_moves_data_intact);
	tcase_add_test(tc, mounts_over_its_own_backing_directory);
	tcase_add_test(tc, max_write_splits_writes_not_reads);
	tcase_add_test(tc, fstab_form_through_mount_fuse);
	tcase_add_test(tc, sigterm_unmounts_cleanly);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	test_require_root("cli", "FUSE mounts");
	SRunner *sr = srunner_create(cli_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
