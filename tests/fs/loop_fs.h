/*
 * Test helper: a real ext4 filesystem on a loop device, made from an image
 * file in a scratch directory under the build tree.
 *
 * What it makes is recorded for the runner's cleanup (leftovers.h): the
 * scratch directory first, then the mount, so a failed test's mounts come
 * down (a fusesched mount over it, recorded later, before this one) and
 * then the image goes. Needs root, mkfs.ext4 and a free loop device;
 * loop_fs_available says whether they are there.
 */
#ifndef FUSESCHED_TEST_LOOP_FS_H
#define FUSESCHED_TEST_LOOP_FS_H

#include <stdbool.h>
#include <stddef.h>

struct loop_fs {
	char scratch[256]; /* holds the image and the mountpoint */
	char image[300];
	char mnt[300];     /* the ext4's root */
};

/* Root, mkfs.ext4 in PATH and a free loop device? If not, why (for a SKIP line). */
bool loop_fs_available(char *why, size_t why_bytes);

/*
 * Makes a size_mib MiB image, runs `mkfs.ext4 -q -F` with mkfs_options
 * (words for the shell, e.g. "-m 20 -b 4096"; may be NULL) on it and
 * mounts it (-o loop) on fs->mnt. Exits 99 saying what failed.
 */
void loop_fs_make_ext4(struct loop_fs *fs, unsigned size_mib, const char *mkfs_options);

/*
 * Unmounts (the loop device goes with it) and removes the scratch
 * directory. Returns umount's exit status: nonzero means something still
 * held the filesystem (unmounted lazily then, and removed all the same).
 */
int loop_fs_remove(struct loop_fs *fs);

#endif
