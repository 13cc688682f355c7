/*
 * Access as on the backing filesystem: each case runs on a plain directory
 * of the backing ext4 and through the mount, by real unprivileged users,
 * and the answers must be the same (and the ones ext4 is known to give, so
 * that two equal wrong answers fail too).
 */
#include "leftovers.h"
#include "mount_helper.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

static struct test_mount M;
#define ALICE 2001
#define BOB 2002
#define CAROL 2003
#define TEAM 3000 /* a group alice's files belong to; bob is a member */

static char direct_root[400];

static void mount_up(void)
{
	test_mount_start(&M, NULL);
	/* The ext4 answers come from a sibling of the backing directory, on the same filesystem. */
	snprintf(direct_root, sizeof(direct_root), "%s/direct", M.root);
	if (mkdir(direct_root, 0777) < 0 || chmod(direct_root, 0777) < 0)
		abort();
}

static void mount_down(void)
{
	test_mount_require_clean_exit(test_mount_stop(&M));
}

/* A fresh directory for one case: below the direct root or the mount. */
static const char *case_dir(bool through_mount, const char *name)
{
	static char path[2][600];
	char *out = path[through_mount];
	if (through_mount)
		snprintf(out, sizeof(path[1]), "%s", test_mnt_path(&M, name));
	else
		snprintf(out, sizeof(path[0]), "%s/%s", direct_root, name);
	ck_assert_int_eq(mkdir(out, 0777), 0);
	ck_assert_int_eq(chmod(out, 0777), 0);
	return out;
}

static int as_user(uid_t uid, int (*fn)(void *), void *arg)
{
	return test_run_as_groups(uid, uid, NULL, 0, 022, fn, arg);
}

static int as_team_member(uid_t uid, int (*fn)(void *), void *arg)
{
	const gid_t team[] = {TEAM};
	return test_run_as_groups(uid, uid, team, 1, 022, fn, arg);
}

static int read_errno(void *path)
{
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return errno;
	close(fd);
	return 0;
}

static int write_errno(void *path)
{
	int fd = open(path, O_WRONLY | O_APPEND);
	if (fd < 0)
		return errno;
	int r = write(fd, "x", 1) == 1 ? 0 : errno;
	close(fd);
	return r;
}

static int list_errno(void *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY);
	if (fd < 0)
		return errno;
	close(fd);
	return 0;
}

/* A file of alice's in group TEAM, with mode and then setfacl's spec applied. */
static const char *alice_file(const char *dir, const char *name, mode_t mode, const char *acl)
{
	static char path[700];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	int fd = open(path, O_CREAT | O_WRONLY | O_EXCL, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, "data", 4), 4);
	close(fd);
	ck_assert_int_eq(chown(path, ALICE, TEAM), 0);
	ck_assert_int_eq(chmod(path, mode), 0);
	ck_assert_int_eq(test_sh("setfacl -m '%s' '%s'", acl, path), 0);
	return path;
}

/*
 * The answers of one run of the file and directory cases, as text so a
 * failure shows both sides: read/write/list errno per user and case.
 */
static void acl_answers(bool through_mount, char *out, size_t out_bytes)
{
	const char *dir = case_dir(through_mount, "acl");
	char answers[512] = "";
	size_t used = 0;
#define ANSWER(label, value) \
	used += (size_t)snprintf(answers + used, sizeof(answers) - used, "%s=%d ", label, value)
	/* A named user granted read on a 0600 file; a group member with group::--- is not. */
	const char *granted = alice_file(dir, "granted", 0600, "u:2003:r");
	ANSWER("granted.bob", as_team_member(BOB, read_errno, (void *)granted));
	ANSWER("granted.carol", as_user(CAROL, read_errno, (void *)granted));
	ANSWER("granted.carol.write", as_user(CAROL, write_errno, (void *)granted));
	/* A named user denied on a world-readable file. */
	const char *denied = alice_file(dir, "denied", 0644, "u:2002:---");
	ANSWER("denied.bob", as_user(BOB, read_errno, (void *)denied));
	ANSWER("denied.carol", as_user(CAROL, read_errno, (void *)denied));
	/* A named group granted write. */
	const char *group_rw = alice_file(dir, "group_rw", 0640, "g:3000:rw");
	ANSWER("group_rw.bob", as_team_member(BOB, write_errno, (void *)group_rw));
	ANSWER("group_rw.carol", as_user(CAROL, write_errno, (void *)group_rw));
	/* A directory closed to everyone but a named user. */
	char private_dir[700];
	snprintf(private_dir, sizeof(private_dir), "%s/private", dir);
	ck_assert_int_eq(mkdir(private_dir, 0700), 0);
	ck_assert_int_eq(chown(private_dir, ALICE, TEAM), 0);
	ck_assert_int_eq(test_sh("setfacl -m u:2002:rx '%s'", private_dir), 0);
	ANSWER("private.bob", as_user(BOB, list_errno, private_dir));
	ANSWER("private.carol", as_user(CAROL, list_errno, private_dir));
#undef ANSWER
	snprintf(out, out_bytes, "%s", answers);
}

START_TEST(acls_grant_and_deny_as_on_ext4)
{
	char direct[512], mounted[512];
	acl_answers(false, direct, sizeof(direct));
	acl_answers(true, mounted, sizeof(mounted));
	ck_assert_str_eq(mounted, direct);
	/* What ext4 says, so that a backing filesystem without ACLs cannot pass. */
	ck_assert_str_eq(direct, "granted.bob=13 granted.carol=0 granted.carol.write=13 denied.bob=13 "
				 "denied.carol=0 group_rw.bob=0 group_rw.carol=13 private.bob=0 "
				 "private.carol=13 ");
}
END_TEST

struct create_args {
	char path[700];
	mode_t mode;
	bool directory;
};

static int create_errno(void *arg)
{
	const struct create_args *a = arg;
	if (a->directory)
		return mkdir(a->path, a->mode) < 0 ? errno : 0;
	int fd = open(a->path, O_CREAT | O_WRONLY | O_EXCL, a->mode);
	if (fd < 0)
		return errno;
	close(fd);
	return 0;
}

/* Mode and ACL text (getfacl) of what alice creates, with umask 077, below a default ACL. */
static void inherited(bool through_mount, char *out, size_t out_bytes)
{
	const char *dir = case_dir(through_mount, "inherit");
	ck_assert_int_eq(chown(dir, ALICE, TEAM), 0);
	ck_assert_int_eq(chmod(dir, 0770), 0);
	ck_assert_int_eq(test_sh("setfacl -m u:2003:x -m d:u:2003:rw -m d:g:3000:rwx '%s'", dir), 0);
	struct create_args file = {.mode = 0666}, sub = {.mode = 0777, .directory = true};
	snprintf(file.path, sizeof(file.path), "%s/file", dir);
	snprintf(sub.path, sizeof(sub.path), "%s/sub", dir);
	ck_assert_int_eq(test_run_as_groups(ALICE, TEAM, NULL, 0, 077, create_errno, &file), 0);
	ck_assert_int_eq(test_run_as_groups(ALICE, TEAM, NULL, 0, 077, create_errno, &sub), 0);
	struct stat fst, dst;
	ck_assert_int_eq(stat(file.path, &fst), 0);
	ck_assert_int_eq(stat(sub.path, &dst), 0);
	char file_acl[256] = "", sub_acl[256] = "";
	FILE *p = NULL;
	char cmd[800];
	snprintf(cmd, sizeof(cmd), "getfacl -cpE '%s' | tr '\\n' ' '", file.path);
	ck_assert_ptr_nonnull(p = popen(cmd, "r"));
	ck_assert_ptr_nonnull(fgets(file_acl, sizeof(file_acl), p));
	pclose(p);
	snprintf(cmd, sizeof(cmd), "getfacl -cpE '%s' | tr '\\n' ' '", sub.path);
	ck_assert_ptr_nonnull(p = popen(cmd, "r"));
	ck_assert_ptr_nonnull(fgets(sub_acl, sizeof(sub_acl), p));
	pclose(p);
	/* And carol, granted by the inherited entry, may write the file. */
	int carol_write = as_user(CAROL, write_errno, file.path);
	snprintf(out, out_bytes, "file %o [%s] sub %o [%s] carol.write=%d", fst.st_mode & 07777,
		 file_acl, dst.st_mode & 07777, sub_acl, carol_write);
}

START_TEST(default_acls_are_inherited_as_on_ext4)
{
	char direct[700], mounted[700];
	inherited(false, direct, sizeof(direct));
	inherited(true, mounted, sizeof(mounted));
	ck_assert_str_eq(mounted, direct);
	/* The default ACL, not the umask 077, shapes the mode: group bits from its mask. */
	ck_assert_msg(strncmp(direct, "file 660 ", 9) == 0, "ext4 gave: %s", direct);
	ck_assert_msg(strstr(direct, "carol.write=0") != NULL, "ext4 gave: %s", direct);
}
END_TEST

static int list_names(void *path)
{
	char names[1024];
	ssize_t n = listxattr(path, names, sizeof(names));
	if (n < 0)
		return errno;
	for (ssize_t at = 0; at < n; at += (ssize_t)strlen(names + at) + 1)
		if (strncmp(names + at, "trusted.", 8) == 0)
			return 100; /* saw a trusted name */
	ssize_t probe = listxattr(path, NULL, 0);
	return probe == n ? 0 : 101; /* the size probe agrees with the list */
}

START_TEST(trusted_names_are_listed_only_to_privileged_callers)
{
	const char *path = test_mnt_path(&M, "xattrs");
	int fd = open(path, O_CREAT | O_WRONLY, 0644);
	ck_assert_int_ge(fd, 0);
	close(fd);
	ck_assert_int_eq(setxattr(path, "trusted.secret", "1", 1, 0), 0);
	ck_assert_int_eq(setxattr(path, "user.visible", "1", 1, 0), 0);
	ck_assert_int_eq(as_user(BOB, list_names, (void *)path), 0);
	/* Root (CAP_SYS_ADMIN) still sees it, as on ext4. */
	char names[1024];
	ssize_t n = listxattr(path, names, sizeof(names));
	ck_assert_int_gt(n, 0);
	ck_assert_ptr_nonnull(memmem(names, (size_t)n, "trusted.secret", 15));
	ck_assert_ptr_nonnull(memmem(names, (size_t)n, "user.visible", 13));
}
END_TEST

static int append_errno(void *path)
{
	return write_errno(path);
}

/* The mode alone, as `stat -c %A` asks for it: the kernel may answer from its cache. */
static mode_t cached_mode(const char *path)
{
	struct statx stx;
	ck_assert_int_eq(statx(AT_FDCWD, path, 0, STATX_MODE, &stx), 0);
	return stx.stx_mode & 07777;
}

START_TEST(cleared_setuid_is_visible_at_once)
{
	const char *path = test_mnt_path(&M, "setuid");
	int fd = open(path, O_CREAT | O_WRONLY, 0644);
	ck_assert_int_ge(fd, 0);
	close(fd);
	ck_assert_int_eq(chmod(path, 04777), 0);
	ck_assert_int_eq(cached_mode(path), 04777); /* now cached (attr_timeout, 1 s) */
	ck_assert_int_eq(as_user(BOB, append_errno, (void *)path), 0);
	ck_assert_int_eq(cached_mode(path), 0777);
	struct stat st;
	ck_assert_int_eq(stat(test_backing_path(&M, "setuid"), &st), 0);
	ck_assert_int_eq(st.st_mode & 07777, 0777);
}
END_TEST

static int truncate_errno(void *path)
{
	int fd = open(path, O_WRONLY | O_TRUNC);
	if (fd < 0)
		return errno;
	close(fd);
	return 0;
}

START_TEST(setuid_cleared_by_a_truncating_open_is_visible_at_once)
{
	const char *path = test_mnt_path(&M, "setuid-trunc");
	int fd = open(path, O_CREAT | O_WRONLY, 0644);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, "data", 4), 4);
	close(fd);
	ck_assert_int_eq(chmod(path, 04777), 0);
	ck_assert_int_eq(cached_mode(path), 04777);
	ck_assert_int_eq(as_user(BOB, truncate_errno, (void *)path), 0);
	ck_assert_int_eq(cached_mode(path), 0777);
}
END_TEST

static int link_errno(void *arg)
{
	const char *dir = arg;
	char from[700], to[700];
	snprintf(from, sizeof(from), "%s/mine", dir);
	snprintf(to, sizeof(to), "%s/also-mine", dir);
	int fd = open(from, O_CREAT | O_WRONLY | O_EXCL, 0644);
	if (fd < 0)
		return errno;
	close(fd);
	if (link(from, to) < 0)
		return errno;
	struct stat a, b;
	if (stat(from, &a) < 0 || stat(to, &b) < 0)
		return errno;
	return a.st_ino == b.st_ino && b.st_nlink == 2 ? 0 : 100;
}

START_TEST(a_user_makes_hard_links_as_on_ext4)
{
	const char *direct = case_dir(false, "links");
	const char *mounted = case_dir(true, "links");
	ck_assert_int_eq(as_user(BOB, link_errno, (void *)direct), 0);
	ck_assert_int_eq(as_user(BOB, link_errno, (void *)mounted), 0);
}
END_TEST

static int create_setgid(void *arg)
{
	const struct create_args *a = arg;
	int fd = open(a->path, O_CREAT | O_WRONLY | O_EXCL, a->mode);
	if (fd < 0)
		return errno;
	close(fd);
	return 0;
}

/* The mode of a 02775 file bob creates in a setgid directory of a group he is in. */
static mode_t setgid_created_mode(bool through_mount)
{
	const char *dir = case_dir(through_mount, "setgid");
	ck_assert_int_eq(chown(dir, 0, TEAM), 0);
	ck_assert_int_eq(chmod(dir, 02777), 0);
	struct create_args a = {.mode = 02775};
	snprintf(a.path, sizeof(a.path), "%s/file", dir);
	const gid_t team[] = {TEAM};
	ck_assert_int_eq(test_run_as_groups(BOB, BOB, team, 1, 0, create_setgid, &a), 0);
	struct stat st;
	ck_assert_int_eq(stat(a.path, &st), 0);
	ck_assert_int_eq(st.st_gid, TEAM);
	return st.st_mode & 07777;
}

START_TEST(setgid_kept_by_a_group_member_as_on_ext4)
{
	mode_t direct = setgid_created_mode(false);
	ck_assert_int_eq(direct, 02775);
	ck_assert_int_eq(setgid_created_mode(true), direct);
}
END_TEST

static int mknod_errno(void *path)
{
	return mknod(path, S_IFCHR | 0666, makedev(1, 3)) < 0 ? errno : 0;
}

START_TEST(device_nodes_as_on_a_nodev_filesystem)
{
	/* Unprivileged: refused by the kernel (CAP_MKNOD), as anywhere. */
	ck_assert_int_eq(as_user(BOB, mknod_errno, (void *)test_mnt_path(&M, "bobs_null")), EPERM);
	/* Root: created (an unpacked container image needs this), owned as asked, never opened. */
	ck_assert_int_eq(mknod_errno((void *)test_mnt_path(&M, "null")), 0);
	struct stat st;
	ck_assert_int_eq(lstat(test_backing_path(&M, "null"), &st), 0);
	ck_assert(S_ISCHR(st.st_mode));
	ck_assert_uint_eq(st.st_rdev, makedev(1, 3));
	ck_assert_int_eq(open(test_mnt_path(&M, "null"), O_RDWR), -1);
	ck_assert_int_eq(errno, EACCES);
}
END_TEST

START_TEST(unlabelled_files_report_no_selinux_support)
{
	if (access("/sys/fs/selinux/enforce", F_OK) == 0)
		return; /* SELinux answers security.selinux itself: nothing reaches the daemon */
	const char *plain = test_mnt_path(&M, "unlabelled");
	const char *labelled = test_mnt_path(&M, "labelled");
	int fd = open(plain, O_CREAT | O_WRONLY, 0644);
	ck_assert_int_ge(fd, 0);
	close(fd);
	fd = open(labelled, O_CREAT | O_WRONLY, 0644);
	ck_assert_int_ge(fd, 0);
	close(fd);
	const char label[] = "system_u:object_r:container_file_t:s0";
	ck_assert_int_eq(setxattr(labelled, "security.selinux", label, sizeof(label), 0), 0);
	char value[128];
	/* Not supported, so that ls stops asking for this volume (it asks every file otherwise). */
	ck_assert_int_eq(lgetxattr(plain, "security.selinux", value, sizeof(value)), -1);
	ck_assert_int_eq(errno, EOPNOTSUPP);
	ck_assert_int_eq(lgetxattr(labelled, "security.selinux", value, sizeof(value)),
			 (ssize_t)sizeof(label));
	ck_assert_str_eq(value, label);
	/* Other missing attributes are simply missing. */
	ck_assert_int_eq(lgetxattr(plain, "user.none", value, sizeof(value)), -1);
	ck_assert_int_eq(errno, ENODATA);
}
END_TEST

static struct test_mount N;

static void refusing_mount_up(void)
{
	static const char *const args[] = {"-o", "nodevnodes", NULL};
	test_mount_start(&N, args);
}

static void refusing_mount_down(void)
{
	test_mount_require_clean_exit(test_mount_stop(&N));
}

START_TEST(nodevnodes_refuses_device_nodes)
{
	ck_assert_int_eq(mknod_errno((void *)test_mnt_path(&N, "null")), EPERM);
	ck_assert_int_eq(access(test_backing_path(&N, "null"), F_OK), -1);
	/* Other special files are still made. */
	ck_assert_int_eq(mkfifo(test_mnt_path(&N, "fifo"), 0644), 0);
}
END_TEST

/*
 * One FUSE connection's requests of one opcode, counted by a tracefs
 * instance of the test's own (the fuse_request_send event, Linux 6.15+).
 */
struct request_count {
	char dir[300];
};

static bool write_text(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
	if (fd < 0)
		return false;
	bool ok = write(fd, text, strlen(text)) == (ssize_t)strlen(text);
	close(fd);
	return ok;
}

static bool request_count_start(struct request_count *c, const char *mnt, unsigned opcode)
{
	static const char *const bases[] = {"/sys/kernel/tracing", "/sys/kernel/debug/tracing"};
	struct stat st;
	if (stat(mnt, &st) < 0)
		return false;
	for (size_t i = 0; i < sizeof(bases) / sizeof(bases[0]); i++) {
		char path[400], text[96];
		snprintf(path, sizeof(path), "%s/events/fuse/fuse_request_send", bases[i]);
		if (access(path, F_OK) != 0)
			continue;
		snprintf(c->dir, sizeof(c->dir), "%s/instances/fusesched-access-%ld", bases[i],
			 (long)getpid());
		if (mkdir(c->dir, 0700) < 0 && errno != EEXIST)
			return false;
		snprintf(path, sizeof(path), "%s/events/fuse/fuse_request_send/filter", c->dir);
		snprintf(text, sizeof(text), "connection == %u && opcode == %u", minor(st.st_dev), opcode);
		bool ok = write_text(path, text);
		snprintf(path, sizeof(path), "%s/events/fuse/fuse_request_send/enable", c->dir);
		if (ok && write_text(path, "1"))
			return true;
		(void)rmdir(c->dir);
		return false;
	}
	return false;
}

static long request_count_read(const struct request_count *c)
{
	char path[400], line[512];
	snprintf(path, sizeof(path), "%s/trace", c->dir);
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	long n = 0;
	while (fgets(line, sizeof(line), f))
		n += line[0] != '#' && strstr(line, "fuse_request_send") != NULL;
	fclose(f);
	return n;
}

static void request_count_stop(const struct request_count *c)
{
	char path[400];
	snprintf(path, sizeof(path), "%s/events/fuse/fuse_request_send/enable", c->dir);
	(void)write_text(path, "0");
	(void)rmdir(c->dir);
}

#define FUSE_GETXATTR_OPCODE 22u

static int getxattr_20(void *path)
{
	char value[16];
	for (int i = 0; i < 20; i++)
		if (getxattr(path, "user.none", value, sizeof(value)) >= 0 || errno != ENODATA)
			return errno ? errno : EEXIST;
	return 0;
}

static int stat_200(void *path)
{
	struct stat st;
	for (int i = 0; i < 200; i++)
		if (stat(path, &st) < 0)
			return errno;
	return 0;
}

/*
 * The kernel never caches the ACL of a FUSE mount's root inode (it is made
 * before INIT turns ACLs on), so every path walk through it by a caller
 * who does not own it would ask the daemon; the mountpoint shows a second
 * node of the backing root instead (mountroot.h), whose ACL is cached.
 */
START_TEST(a_walk_through_the_mount_root_is_not_a_request_for_its_acl)
{
	const char *dir = case_dir(true, "rootwalk");
	char file[700];
	snprintf(file, sizeof(file), "%s/f", dir);
	int fd = open(file, O_CREAT | O_WRONLY, 0644);
	ck_assert_int_ge(fd, 0);
	close(fd);
	struct stat root;
	ck_assert_int_eq(stat(M.mnt, &root), 0);
	ck_assert_int_ne(root.st_uid, BOB);
	struct request_count c;
	if (!request_count_start(&c, M.mnt, FUSE_GETXATTR_OPCODE)) {
		fprintf(stderr, "SKIP: %s: no tracefs with the fuse events to count requests by\n",
			__func__);
		return;
	}
	/* The count sees this mount's GETXATTRs: xattrs are never cached, each is one. */
	ck_assert_int_eq(as_user(BOB, getxattr_20, file), 0);
	long xattrs = request_count_read(&c);
	/* Then 200 walks to the file: the ACLs on the way are asked for once at most. */
	ck_assert_int_eq(as_user(BOB, stat_200, file), 0);
	long walks = request_count_read(&c) - xattrs;
	request_count_stop(&c);
	ck_assert_int_ge(xattrs, 20);
	ck_assert_msg(walks <= 3, "200 stats through the mount's root asked for %ld ACLs", walks);
}
END_TEST

static struct test_mount A;

static void noacl_mount_up(void)
{
	static const char *const args[] = {"-o", "noacl", NULL};
	test_mount_start(&A, args);
}

static void noacl_mount_down(void)
{
	test_mount_require_clean_exit(test_mount_stop(&A));
}

START_TEST(noacl_reports_no_acls)
{
	/* An ACL already on the backing file is not shown. */
	int fd = open(test_backing_path(&A, "f"), O_CREAT | O_WRONLY, 0644);
	ck_assert_int_ge(fd, 0);
	close(fd);
	ck_assert_int_eq(test_sh("setfacl -m u:2002:--- '%s'", test_backing_path(&A, "f")), 0);
	const char *f = test_mnt_path(&A, "f");
	char value[256];
	ck_assert_int_eq(getxattr(f, "system.posix_acl_access", value, sizeof(value)), -1);
	ck_assert_int_eq(errno, EOPNOTSUPP);
	ck_assert_int_ne(test_sh("setfacl -m u:2003:r '%s' 2>/dev/null", f), 0);
	char names[1024];
	ssize_t n = listxattr(f, names, sizeof(names));
	ck_assert_int_ge(n, 0);
	ck_assert_ptr_null(memmem(names, (size_t)n, "system.posix_acl_access", 23));
	/* Other attributes still work. */
	ck_assert_int_eq(setxattr(f, "user.kept", "1", 1, 0), 0);
	ck_assert_int_eq(getxattr(f, "user.kept", value, sizeof(value)), 1);
}
END_TEST

static Suite *access_suite(void)
{
	Suite *s = suite_create("fs_access");
	TCase *tc = tcase_create("mount");
	tcase_add_unchecked_fixture(tc, leftovers_init, leftovers_cleanup);
	tcase_add_unchecked_fixture(tc, mount_up, mount_down);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, acls_grant_and_deny_as_on_ext4);
	tcase_add_test(tc, default_acls_are_inherited_as_on_ext4);
	tcase_add_test(tc, trusted_names_are_listed_only_to_privileged_callers);
	tcase_add_test(tc, cleared_setuid_is_visible_at_once);
	tcase_add_test(tc, setuid_cleared_by_a_truncating_open_is_visible_at_once);
	tcase_add_test(tc, a_user_makes_hard_links_as_on_ext4);
	tcase_add_test(tc, setgid_kept_by_a_group_member_as_on_ext4);
	tcase_add_test(tc, device_nodes_as_on_a_nodev_filesystem);
	tcase_add_test(tc, unlabelled_files_report_no_selinux_support);
	tcase_add_test(tc, a_walk_through_the_mount_root_is_not_a_request_for_its_acl);
	suite_add_tcase(s, tc);
	TCase *noacl = tcase_create("noacl");
	tcase_add_unchecked_fixture(noacl, leftovers_init, leftovers_cleanup);
	tcase_add_unchecked_fixture(noacl, noacl_mount_up, noacl_mount_down);
	tcase_add_test(noacl, noacl_reports_no_acls);
	suite_add_tcase(s, noacl);
	TCase *refusing = tcase_create("nodevnodes");
	tcase_add_unchecked_fixture(refusing, leftovers_init, leftovers_cleanup);
	tcase_add_unchecked_fixture(refusing, refusing_mount_up, refusing_mount_down);
	tcase_add_test(refusing, nodevnodes_refuses_device_nodes);
	suite_add_tcase(s, refusing);
	return s;
}

int main(void)
{
	test_require_root("fs_access", "FUSE mounts, other users' credentials");
	if (test_sh("command -v setfacl >/dev/null") != 0) {
		fprintf(stderr, "SKIP: fs_access: setfacl is missing (Debian package acl)\n");
		return 77;
	}
	SRunner *sr = srunner_create(access_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
