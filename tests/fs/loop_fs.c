/* Test helper: a real ext4 filesystem on a loop device (loop_fs.h). */
#include "loop_fs.h"

#include "leftovers.h"
#include "mount_helper.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

bool loop_fs_available(char *why, size_t why_bytes)
{
	const char *missing = NULL;
	if (geteuid() != 0)
		missing = "needs root (mount, losetup)";
	else if (test_sh("command -v mkfs.ext4 >/dev/null 2>&1") != 0)
		missing = "no mkfs.ext4 in PATH";
	else if (test_sh("losetup -f >/dev/null 2>&1") != 0)
		missing = "no free loop device (losetup -f failed)";
	if (missing)
		snprintf(why, why_bytes, "%s", missing);
	return missing == NULL;
}

static void die(const char *what)
{
	fprintf(stderr, "loop_fs: %s\n", what);
	exit(99);
}

void loop_fs_make_ext4(struct loop_fs *fs, unsigned size_mib, const char *mkfs_options)
{
	memset(fs, 0, sizeof(*fs));
	/* With the mount helper's directories (scratch.h): /var/tmp first, as /tmp may be a small tmpfs. */
	snprintf(fs->scratch, sizeof(fs->scratch), "%s/loop-XXXXXX", TEST_SCRATCH_DIR);
	if (!mkdtemp(fs->scratch)) {
		fprintf(stderr, "loop_fs: mkdtemp %s: %s\n", fs->scratch, strerror(errno));
		exit(99);
	}
	/* Recorded before the mount: the cleanup unmounts everything first, then removes directories. */
	leftovers_add_dir(fs->scratch);
	chmod(fs->scratch, 0755); /* other users reach the filesystem through it */
	snprintf(fs->image, sizeof(fs->image), "%s/ext4.img", fs->scratch);
	snprintf(fs->mnt, sizeof(fs->mnt), "%s/mnt", fs->scratch);
	if (mkdir(fs->mnt, 0755) < 0)
		die("mkdir mnt");
	if (test_sh("truncate -s %uM '%s'", size_mib, fs->image) != 0)
		die("truncate failed");
	if (test_sh("mkfs.ext4 -q -F %s '%s'", mkfs_options ? mkfs_options : "", fs->image) != 0)
		die("mkfs.ext4 failed");
	leftovers_add_mount(fs->mnt);
	/* mount(8) sets up the loop device with autoclear: it is freed with the last unmount. */
	if (test_sh("mount -o loop '%s' '%s'", fs->image, fs->mnt) != 0)
		die("mount -o loop failed");
}

int loop_fs_remove(struct loop_fs *fs)
{
	int status = test_sh("umount '%s'", fs->mnt);
	if (status != 0)
		test_sh("umount -l '%s'", fs->mnt);
	test_sh("rm -rf '%s'", fs->scratch);
	return status;
}
