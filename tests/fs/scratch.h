/*
 * Where the tests put their scratch: backing directories, mountpoints,
 * loop images, configs, and the files the unprivileged test users (uids
 * 1000, 2000-2003 and others) create and open.
 *
 * Not the build tree: a clone under a 0700 directory (root's home on
 * Debian) keeps those users out of it. The first call makes a fresh
 * directory for this test process, BASE/fusesched-PROGRAM-XXXXXX (mode
 * 0755), in the first suitable BASE of:
 *
 *	$FUSESCHED_TEST_SCRATCH (when set, only it), /var/tmp, /tmp, BUILD/test-scratch
 *
 * Suitable: a user with no privileges reaches it (every directory above
 * it searchable), and its filesystem has user xattrs, POSIX ACLs and
 * O_DIRECT (the backing directories need them). When none is, the calling
 * process exits 99 after saying on stderr what each candidate lacks.
 *
 * The choice is shared with the forked test processes (memory mapped at
 * start), and the process that started the program removes the directory
 * (rm -rf --one-file-system: never through a mount left in it) when it
 * exits, so two builds, or two suites, test at once without meeting.
 */
#ifndef FUSESCHED_TEST_SCRATCH_H
#define FUSESCHED_TEST_SCRATCH_H

/* The directory, made and probed on the first call; exits 99 when no place is suitable. */
const char *test_scratch_dir(void);

#define TEST_SCRATCH_DIR test_scratch_dir()

#endif
