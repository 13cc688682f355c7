/*
 * What a failed test leaves behind, removed by the test runner.
 *
 * Check ends a failed test (forked, CK_FORK) with _exit: atexit handlers
 * never run there, so mounts, daemons, cgroups and their processes would
 * outlive the run. A test records them here, in memory shared with the
 * runner (mapped before the fork), and the runner's unchecked teardown
 * removes whatever is still there. Every step is a no-op for things the
 * test already cleaned up itself.
 *
 * The mount helper (test_mount_start) and the ctl helpers
 * (ctl_test_cgroup_make) record what they make; a suite records only what
 * it makes itself. Every TCase that mounts or makes cgroups adds, before
 * any fixture of its own that mounts (teardowns run in reverse order):
 *
 *	tcase_add_unchecked_fixture(tc, leftovers_init, leftovers_cleanup);
 *
 * Without leftovers_init the leftovers_add_* calls do nothing.
 */
#ifndef FUSESCHED_TEST_LEFTOVERS_H
#define FUSESCHED_TEST_LEFTOVERS_H

/* Unchecked setup: maps the shared record (once per process). */
void leftovers_init(void);
/*
 * Unchecked teardown: kills cgroup members, unmounts (last recorded first),
 * removes cgroups and directories, says on stderr what it found, and
 * empties the record.
 */
void leftovers_cleanup(void);

/*
 * Recording a path again moves it to the end. A full record first forgets
 * the paths that no longer exist (cleaned up by the test), so a TCase may
 * record any number of things as long as few are there at a time. A path
 * too long for the record is refused with a message, never cut short.
 */

/* A mountpoint (FUSE or any other); a FUSE daemon exits once it is unmounted. */
void leftovers_add_mount(const char *path);
/* A cgroup directory: its members are SIGKILLed, then it is removed. */
void leftovers_add_cgroup(const char *path);
/* A scratch directory or file, removed (with everything in it) after the unmounts. */
void leftovers_add_dir(const char *path);

#endif
