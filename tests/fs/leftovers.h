/*
 * What a failed test leaves behind, removed by the test runner.
 *
 * Check ends a failed test (forked, CK_FORK) with _exit: atexit handlers
 * never run there, so mounts, daemons, cgroups and their processes would
 * outlive the run. A test records them here, in memory shared with the
 * runner (mapped before the fork), and the runner's unchecked teardown
 * removes whatever is still there. Every step is a no-op for things the
 * test already cleaned up itself.
 */
#ifndef FUSESCHED_TEST_LEFTOVERS_H
#define FUSESCHED_TEST_LEFTOVERS_H

/* Unchecked setup: maps the shared record (once per process). */
void leftovers_init(void);
/* Unchecked teardown: kills cgroup members, unmounts (last recorded first), removes cgroups and directories. */
void leftovers_cleanup(void);

/* A FUSE mountpoint; its daemon exits once it is unmounted. */
void leftovers_add_mount(const char *path);
/* A cgroup directory: its members are SIGKILLed, then it is removed. */
void leftovers_add_cgroup(const char *path);
/* A scratch directory, removed with everything in it once nothing is mounted there. */
void leftovers_add_dir(const char *path);

#endif
