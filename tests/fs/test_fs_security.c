/* Permissions and containment through a real mount: what a root daemon must not give away. */
#include "leftovers.h"
#include "mount_helper.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <grp.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static struct test_mount M;
#define USER_UID 1000
#define USER_GID 1000
#define OTHER_UID 2000

static void mount_up(void)
{
	test_mount_start(&M, NULL);
}

/* Every data request through the ring (the personalities' path). */
static void mount_up_uring_only(void)
{
	static const char *const args[] = {"-o", "uring_only", NULL};
	test_mount_start(&M, args);
}

static void mount_down(void)
{
	test_mount_require_clean_exit(test_mount_stop(&M));
}

static int create_as_user(void *arg)
{
	const char *path = arg;
	int fd = open(path, O_CREAT | O_WRONLY | O_EXCL, 0640);
	if (fd < 0)
		return errno;
	if (write(fd, "mine", 4) != 4)
		return EIO;
	close(fd);
	char dir[600];
	snprintf(dir, sizeof(dir), "%s.d", path);
	if (mkdir(dir, 0700) < 0)
		return errno;
	char link[600];
	snprintf(link, sizeof(link), "%s.l", path);
	if (symlink("x", link) < 0)
		return errno;
	return 0;
}

START_TEST(created_objects_belong_to_the_caller)
{
	ck_assert_int_eq(test_run_as(USER_UID, USER_GID, create_as_user,
				     (void *)test_mnt_path(&M, "owned")), 0);
	const char *suffixes[] = {"", ".d", ".l"};
	for (int i = 0; i < 3; i++) {
		char rel[64];
		snprintf(rel, sizeof(rel), "owned%s", suffixes[i]);
		struct stat st;
		ck_assert_int_eq(lstat(test_backing_path(&M, rel), &st), 0);
		ck_assert_int_eq(st.st_uid, USER_UID);
		ck_assert_int_eq(st.st_gid, USER_GID);
	}
	struct stat st;
	ck_assert_int_eq(stat(test_backing_path(&M, "owned"), &st), 0);
	ck_assert_int_eq(st.st_mode & 07777, 0640 & ~022 & 0777); /* the caller's umask applied once */
}
END_TEST

static int read_file_errno(void *arg)
{
	int fd = open(arg, O_RDONLY);
	if (fd < 0)
		return errno;
	close(fd);
	return 0;
}

static int write_file_errno(void *arg)
{
	int fd = open(arg, O_WRONLY);
	if (fd < 0)
		return errno;
	int r = write(fd, "intruder", 8) == 8 ? 0 : errno;
	close(fd);
	return r;
}

/* The errno of adding FLAG to the inode flags of arg (0: set). */
static int add_inode_flag(void *arg, int flag)
{
	int fd = open(arg, O_RDONLY | O_NONBLOCK);
	if (fd < 0)
		return errno;
	int flags = 0, r = 0;
	if (ioctl(fd, FS_IOC_GETFLAGS, &flags) < 0)
		r = errno;
	flags |= flag;
	if (!r && ioctl(fd, FS_IOC_SETFLAGS, &flags) < 0)
		r = errno;
	close(fd);
	return r;
}

static int add_immutable_errno(void *arg)
{
	return add_inode_flag(arg, FS_IMMUTABLE_FL);
}

static int add_nodump_errno(void *arg)
{
	return add_inode_flag(arg, FS_NODUMP_FL);
}

/* Inode flags pass to the backing file as root, so the caller is checked
 * first (by the kernel): an owner may set no-dump on its file but not
 * immutable (CAP_LINUX_IMMUTABLE), and nobody else may set either. */
START_TEST(inode_flags_are_checked_for_the_caller)
{
	int fd = open(test_mnt_path(&M, "flagged"), O_CREAT | O_WRONLY, 0644);
	ck_assert_int_ge(fd, 0);
	close(fd);
	ck_assert_int_eq(chown(test_mnt_path(&M, "flagged"), USER_UID, USER_GID), 0);
	int flags;
	fd = open(test_backing_path(&M, "flagged"), O_RDONLY);
	ck_assert_int_ge(fd, 0);
	int backing_has_flags = ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0;
	close(fd);
	if (!backing_has_flags) {
		fprintf(stderr, "skipped: the backing filesystem has no inode flags\n");
		return;
	}
	ck_assert_int_eq(test_run_as(USER_UID, USER_GID, add_immutable_errno,
				     (void *)test_mnt_path(&M, "flagged")), EPERM);
	ck_assert_int_eq(test_run_as(OTHER_UID, OTHER_UID, add_nodump_errno,
				     (void *)test_mnt_path(&M, "flagged")), EPERM);
	ck_assert_int_eq(test_run_as(USER_UID, USER_GID, add_nodump_errno,
				     (void *)test_mnt_path(&M, "flagged")), 0);
	fd = open(test_backing_path(&M, "flagged"), O_RDONLY);
	ck_assert_int_eq(ioctl(fd, FS_IOC_GETFLAGS, &flags), 0);
	close(fd);
	ck_assert(flags & FS_NODUMP_FL);
	ck_assert(!(flags & FS_IMMUTABLE_FL));
}
END_TEST

START_TEST(other_user_cannot_read_private_file)
{
	int fd = open(test_mnt_path(&M, "private"), O_CREAT | O_WRONLY, 0600);
	ck_assert_int_ge(fd, 0);
	close(fd);
	ck_assert_int_eq(chown(test_mnt_path(&M, "private"), OTHER_UID, OTHER_UID), 0);
	ck_assert_int_eq(test_run_as(USER_UID, USER_GID, read_file_errno,
				     (void *)test_mnt_path(&M, "private")), EACCES);
	ck_assert_int_eq(test_run_as(USER_UID, USER_GID, write_file_errno,
				     (void *)test_mnt_path(&M, "private")), EACCES);
	/* The owner can. */
	ck_assert_int_eq(test_run_as(OTHER_UID, OTHER_UID, read_file_errno,
				     (void *)test_mnt_path(&M, "private")), 0);
}
END_TEST

static int create_in_dir_errno(void *arg)
{
	int fd = open(arg, O_CREAT | O_WRONLY, 0644);
	if (fd < 0)
		return errno;
	close(fd);
	return 0;
}

START_TEST(caller_cannot_create_in_foreign_directory)
{
	ck_assert_int_eq(mkdir(test_mnt_path(&M, "rootonly"), 0755), 0);
	ck_assert_int_eq(test_run_as(USER_UID, USER_GID, create_in_dir_errno,
				     (void *)test_mnt_path(&M, "rootonly/x")), EACCES);
	ck_assert_int_eq(access(test_backing_path(&M, "rootonly/x"), F_OK), -1);
}
END_TEST

/* The permission bits (setuid/setgid included) of PATH. */
static mode_t mode_of(const char *path)
{
	struct stat st;
	ck_assert_int_eq(stat(path, &st), 0);
	return st.st_mode & 07777;
}

/* The permission bits of NAME as the backing sees it. */
static mode_t backing_mode(const char *name)
{
	return mode_of(test_backing_path(&M, name));
}

/* NAME below the mount, owned by OWNER:GROUP with MODE (setuid/setgid included), as the backing sees it. */
static void make_file_with_privs(const char *name, uid_t owner, gid_t group, mode_t mode)
{
	int fd = open(test_mnt_path(&M, name), O_CREAT | O_WRONLY, 0644);
	ck_assert_int_ge(fd, 0);
	close(fd);
	ck_assert_int_eq(chown(test_mnt_path(&M, name), owner, group), 0);
	ck_assert_int_eq(chmod(test_mnt_path(&M, name), mode), 0);
	ck_assert_int_eq(backing_mode(name), mode);
}

START_TEST(setuid_cleared_after_foreign_write)
{
	make_file_with_privs("suid", OTHER_UID, OTHER_UID, 06777);
	struct stat st;
	ck_assert_int_eq(test_run_as(USER_UID, USER_GID, write_file_errno,
				     (void *)test_mnt_path(&M, "suid")), 0);
	ck_assert_int_eq(stat(test_backing_path(&M, "suid"), &st), 0);
	ck_assert_int_eq(st.st_mode & (S_ISUID | S_ISGID), 0);
	ck_assert_int_eq(st.st_mode & 0777, 0777);
}
END_TEST

static int truncate_errno(void *arg)
{
	return truncate(arg, 3) == 0 ? 0 : errno;
}

static int ftruncate_errno(void *arg)
{
	int fd = open(arg, O_WRONLY);
	if (fd < 0)
		return errno;
	int r = ftruncate(fd, 2) == 0 ? 0 : errno;
	close(fd);
	return r;
}

static int open_trunc_errno(void *arg)
{
	int fd = open(arg, O_WRONLY | O_TRUNC);
	if (fd < 0)
		return errno;
	close(fd);
	return 0;
}

/* Truncation by a non-owner drops setuid/setgid as a write does, in each of its three ways
 * (truncate and ftruncate the kernel clears itself; open with O_TRUNC the daemon does). */
START_TEST(setuid_cleared_after_foreign_truncate)
{
	int (*const truncations[])(void *) = {truncate_errno, ftruncate_errno, open_trunc_errno};
	for (size_t i = 0; i < sizeof(truncations) / sizeof(truncations[0]); i++) {
		char name[32];
		snprintf(name, sizeof(name), "suid-trunc-%zu", i);
		int fd = open(test_mnt_path(&M, name), O_CREAT | O_WRONLY, 0644);
		ck_assert_int_ge(fd, 0);
		ck_assert_int_eq(write(fd, "content", 7), 7);
		close(fd);
		make_file_with_privs(name, OTHER_UID, OTHER_UID, 06777);
		struct stat st;
		ck_assert_int_eq(test_run_as(USER_UID, USER_GID, truncations[i],
					     (void *)test_mnt_path(&M, name)), 0);
		ck_assert_int_eq(stat(test_backing_path(&M, name), &st), 0);
		ck_assert_int_lt(st.st_size, 7);
		ck_assert_msg((st.st_mode & (S_ISUID | S_ISGID)) == 0, "way %zu left mode %o", i,
			      st.st_mode & 07777);
		ck_assert_int_eq(st.st_mode & 0777, 0777);
	}
	/* Root's truncation keeps them, as on a local filesystem (CAP_FSETID). */
	int fd = open(test_mnt_path(&M, "suid-own"), O_CREAT | O_WRONLY, 06777);
	ck_assert_int_ge(fd, 0);
	close(fd);
	ck_assert_int_eq(chmod(test_mnt_path(&M, "suid-own"), 06777), 0);
	ck_assert_int_eq(truncate(test_mnt_path(&M, "suid-own"), 5), 0);
	ck_assert_int_eq(backing_mode("suid-own"), 06777);
}
END_TEST

/* As on a local filesystem, the owner's own write drops them too (no CAP_FSETID). */
START_TEST(setuid_cleared_after_owner_write)
{
	make_file_with_privs("suid-owner", USER_UID, USER_GID, 06750);
	ck_assert_int_eq(test_run_as(USER_UID, USER_GID, write_file_errno,
				     (void *)test_mnt_path(&M, "suid-owner")), 0);
	ck_assert_int_eq(backing_mode("suid-owner"), 0750);
	/* Root's write keeps them (CAP_FSETID). */
	ck_assert_int_eq(chmod(test_mnt_path(&M, "suid-owner"), 06750), 0);
	ck_assert_int_eq(write_file_errno((void *)test_mnt_path(&M, "suid-owner")), 0);
	ck_assert_int_eq(backing_mode("suid-owner"), 06750);
}
END_TEST

/* As the owner: write, give the open file setuid, write again through the same descriptor. */
static int write_chmod_write(void *arg)
{
	int fd = open(arg, O_WRONLY);
	if (fd < 0)
		return errno;
	int r = write(fd, "a", 1) == 1 && fchmod(fd, 04750) == 0 && write(fd, "b", 1) == 1 ? 0 : errno;
	close(fd);
	return r;
}

/* A file already open when it gets setuid loses it on the next write (the daemon's check is per file, not per write). */
START_TEST(setuid_given_while_open_cleared_by_next_write)
{
	make_file_with_privs("suid-later", USER_UID, USER_GID, 0750);
	ck_assert_int_eq(test_run_as(USER_UID, USER_GID, write_chmod_write,
				     (void *)test_mnt_path(&M, "suid-later")), 0);
	ck_assert_int_eq(backing_mode("suid-later"), 0750);
}
END_TEST

/* As the owner: a byte stored through a shared mapping of the file, written back by msync. */
static int store_through_mapping(void *arg)
{
	int fd = open(arg, O_RDWR);
	if (fd < 0)
		return errno;
	char *map = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	int r = map == MAP_FAILED ? errno : 0;
	if (!r) {
		map[1] = 'x';
		r = msync(map, 4096, MS_SYNC) == 0 ? 0 : errno;
		munmap(map, 4096);
	}
	close(fd);
	return r;
}

/* Root writing through a descriptor the user opened (opened with the user's
 * effective ids, written with root's again): 0, or where it failed. */
static int root_writes_through_users_descriptor(const char *path)
{
	pid_t pid = fork();
	if (pid == 0) {
		if (setegid(USER_GID) != 0 || seteuid(USER_UID) != 0)
			_exit(100);
		int fd = open(path, O_WRONLY);
		if (fd < 0)
			_exit(101);
		if (seteuid(0) != 0 || setegid(0) != 0)
			_exit(102);
		_exit(write(fd, "root", 4) == 4 ? 0 : 103);
	}
	int status = 0;
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 99;
}

/* PATH made with some bytes, owned by the user, setuid and setgid with group execute. */
static void make_users_file_with_privs(const char *path)
{
	int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, "content", 7), 7);
	close(fd);
	ck_assert_int_eq(chown(path, USER_UID, USER_GID), 0);
	ck_assert_int_eq(chmod(path, 06750), 0);
}

/*
 * Writes the kernel does not ask to drop setuid/setgid for keep them, as on
 * the backing filesystem itself: the owner's stores through a shared
 * mapping (written back with no caller) and root's write through a
 * descriptor the user opened. The daemon writes as the opener, who lacks
 * CAP_FSETID, so the backing filesystem would drop them; it keeps that one
 * capability for such writes (on the ring too: a mount with uring_only).
 */
START_TEST(setuid_kept_where_the_kernel_keeps_it)
{
	char reference[600];
	snprintf(reference, sizeof(reference), "%s/keep-reference", M.root);
	const char *through = test_mnt_path(&M, "keep");
	make_users_file_with_privs(reference);
	ck_assert_int_eq(test_run_as(USER_UID, USER_GID, store_through_mapping, reference), 0);
	mode_t expected = mode_of(reference);
	make_users_file_with_privs(through);
	ck_assert_int_eq(test_run_as(USER_UID, USER_GID, store_through_mapping, (void *)through), 0);
	ck_assert_msg(backing_mode("keep") == expected, "stored through a mapping: %o, on the backing filesystem %o",
		      backing_mode("keep"), expected);

	make_users_file_with_privs(reference);
	ck_assert_int_eq(root_writes_through_users_descriptor(reference), 0);
	expected = mode_of(reference);
	make_users_file_with_privs(through);
	ck_assert_int_eq(root_writes_through_users_descriptor(through), 0);
	ck_assert_msg(backing_mode("keep") == expected, "written by root: %o, on the backing filesystem %o",
		      backing_mode("keep"), expected);
	/* And the user's own write still drops them. */
	ck_assert_int_eq(test_run_as(USER_UID, USER_GID, write_file_errno, (void *)through), 0);
	ck_assert_int_eq(backing_mode("keep"), 0750);
	unlink(reference);
}
END_TEST

/*
 * The daemon drops setuid/setgid itself (FUSE_HANDLE_KILLPRIV_V2), so the
 * kernel asks for security.capability once per file, not before every
 * write: counted in the daemon's request trace (-d).
 */
START_TEST(writes_do_not_ask_for_security_capability)
{
	struct test_mount d;
	test_mount_dirs(&d);
	const char *root = d.root, *mnt = d.mnt;
	ck_assert_int_eq(test_sh("%s mount '%s' '%s' -d 2>'%s/trace' &", FUSESCHED_BIN, d.backing,
				 mnt, root), 0);
	for (int i = 0; i < 1000 && !test_is_fuse_mount(mnt); i++)
		usleep(10000);
	ck_assert(test_is_fuse_mount(mnt));
	char path[700];
	snprintf(path, sizeof(path), "%s/f", mnt);
	int fd = open(path, O_CREAT | O_WRONLY, 0644);
	ck_assert_int_ge(fd, 0);
	for (int i = 0; i < 50; i++)
		ck_assert_int_eq(write(fd, "0123456789", 10), 10);
	close(fd);
	ck_assert_int_eq(test_sh("umount '%s'", mnt), 0);
	ck_assert_int_eq(test_sh("for i in $(seq 500); do grep -q 'opcode: RELEASE' '%s/trace' && "
				 "exit 0; sleep 0.01; done; exit 1", root), 0);
	ck_assert_int_eq(test_sh("test $(grep -c 'opcode: WRITE' '%s/trace') -ge 50", root), 0);
	ck_assert_msg(test_sh("test $(grep -c 'opcode: GETXATTR' '%s/trace') -le 2", root) == 0,
		      "the kernel asked for xattrs on most writes");
	test_sh("rm -rf '%s'", root);
}
END_TEST

START_TEST(dotdot_and_symlinks_stay_inside)
{
	/* A secret beside the backing directory, which nothing under the mount may reach. */
	char secret[600];
	snprintf(secret, sizeof(secret), "%s/secret", M.root);
	FILE *f = fopen(secret, "w");
	ck_assert_ptr_nonnull(f);
	fputs("secret", f);
	fclose(f);
	struct stat root_st, dotdot_st, mnt_parent;
	ck_assert_int_eq(stat(M.mnt, &root_st), 0);
	/* ".." of the mount root is the mount's parent in the caller's tree, not the backing's. */
	ck_assert_int_eq(stat(test_mnt_path(&M, ".."), &dotdot_st), 0);
	ck_assert_int_eq(stat(M.root, &mnt_parent), 0);
	ck_assert_int_eq(dotdot_st.st_ino, mnt_parent.st_ino);
	/* A relative symlink climbing out resolves in the caller's view: no "secret" beside mnt/. */
	ck_assert_int_eq(symlink("../../secret", test_backing_path(&M, "escape")), 0);
	ck_assert_int_eq(mkdir(test_backing_path(&M, "deep"), 0755), 0);
	ck_assert_int_eq(symlink("../../../secret", test_backing_path(&M, "deep/escape")), 0);
	int fd = open(test_mnt_path(&M, "deep/escape"), O_RDONLY);
	/* mnt/deep/../../../secret is ROOT/../secret, which does not exist. */
	ck_assert_int_eq(fd, -1);
	ck_assert_int_eq(errno, ENOENT);
	/* Names with ".." components walk the caller's tree, never above the backing root. */
	ck_assert_int_eq(access(test_mnt_path(&M, "deep/../../secret"), F_OK), 0); /* ROOT/secret via mnt/.. */
	ck_assert_int_eq(access(test_mnt_path(&M, "deep/../secret"), F_OK), -1);
	/* Hard links can only name what is already inside. */
	ck_assert_int_eq(link(secret, test_mnt_path(&M, "stolen")), -1);
	ck_assert_int_eq(errno, EXDEV);
}
END_TEST

/* Creates a file as uid 1000 whose only way into the directory is supplementary group 5000. */
static int create_via_group(const char *path, bool with_group)
{
	const gid_t groups[] = {5000};
	return test_run_as_groups(USER_UID, USER_GID, groups, with_group ? 1 : 0, -1,
				  create_in_dir_errno, (void *)path);
}

START_TEST(supplementary_groups_count)
{
	ck_assert_int_eq(mkdir(test_mnt_path(&M, "team"), 0770), 0);
	ck_assert_int_eq(chown(test_mnt_path(&M, "team"), 0, 5000), 0);
	ck_assert_int_eq(chmod(test_mnt_path(&M, "team"), 0770), 0); /* past the umask */
	ck_assert_int_eq(create_via_group(test_mnt_path(&M, "team/outsider"), false), EACCES);
	ck_assert_int_eq(create_via_group(test_mnt_path(&M, "team/member"), true), 0);
	struct stat st;
	ck_assert_int_eq(stat(test_backing_path(&M, "team/member"), &st), 0);
	ck_assert_int_eq(st.st_uid, USER_UID);
	ck_assert_int_eq(st.st_gid, USER_GID);
	ck_assert_int_eq(access(test_backing_path(&M, "team/outsider"), F_OK), -1);
}
END_TEST

static Suite *security_suite(void)
{
	Suite *s = suite_create("fs_security");
	TCase *tc = tcase_create("mount");
	/* First: its teardown runs last, after mount_down. */
	tcase_add_unchecked_fixture(tc, leftovers_init, leftovers_cleanup);
	tcase_add_unchecked_fixture(tc, mount_up, mount_down);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, created_objects_belong_to_the_caller);
	tcase_add_test(tc, other_user_cannot_read_private_file);
	tcase_add_test(tc, caller_cannot_create_in_foreign_directory);
	tcase_add_test(tc, supplementary_groups_count);
	tcase_add_test(tc, setuid_cleared_after_foreign_write);
	tcase_add_test(tc, setuid_cleared_after_foreign_truncate);
	tcase_add_test(tc, setuid_cleared_after_owner_write);
	tcase_add_test(tc, setuid_given_while_open_cleared_by_next_write);
	tcase_add_test(tc, writes_do_not_ask_for_security_capability);
	tcase_add_test(tc, dotdot_and_symlinks_stay_inside);
	tcase_add_test(tc, inode_flags_are_checked_for_the_caller);
	tcase_add_test(tc, setuid_kept_where_the_kernel_keeps_it);
	suite_add_tcase(s, tc);
	TCase *ring = tcase_create("uring_only");
	tcase_add_unchecked_fixture(ring, leftovers_init, leftovers_cleanup);
	tcase_add_unchecked_fixture(ring, mount_up_uring_only, mount_down);
	tcase_set_timeout(ring, 60);
	tcase_add_test(ring, setuid_kept_where_the_kernel_keeps_it);
	suite_add_tcase(s, ring);
	return s;
}

int main(void)
{
	test_require_root("fs_security", "FUSE mounts, other users' credentials");
	SRunner *sr = srunner_create(security_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
