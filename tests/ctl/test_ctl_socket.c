/*
 * The control socket and the stat output formats through a real mount:
 * hostile input, permissions, socket ownership, JSON fields, Prometheus
 * grammar, --watch under a pseudo-terminal.
 */
#include "ctl_test_util.h"
#include "fusesched/ctl.h"
#include "leftovers.h"

#include <check.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

static int connect_ctl(const char *mnt)
{
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	ck_assert_int_eq(ctl_socket_path_for_mount(mnt, addr.sun_path, sizeof(addr.sun_path)), 0);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(fd, 0);
	ck_assert_msg(connect(fd, (struct sockaddr *)&addr, sizeof(addr)) == 0, "connect %s: %s",
		      addr.sun_path, strerror(errno));
	return fd;
}

/* One reply line (without the newline), or NULL at EOF before one came. */
static char *read_line(int fd)
{
	static char buf[1 << 20];
	size_t used = 0;
	while (used < sizeof(buf) - 1) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		ck_assert_msg(poll(&p, 1, 20000) == 1, "no reply within 20 s");
		ssize_t n = recv(fd, buf + used, sizeof(buf) - 1 - used, 0);
		if (n <= 0)
			return NULL;
		used += (size_t)n;
		buf[used] = '\0';
		char *nl = strchr(buf, '\n');
		if (nl) {
			*nl = '\0';
			return buf;
		}
	}
	return NULL;
}

static void send_all(int fd, const void *data, size_t len)
{
	const char *p = data;
	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
		ck_assert_msg(n > 0, "send: %s", strerror(errno));
		p += n;
		len -= (size_t)n;
	}
}

/* Sends LINE, returns whether the reply says ok; its error text goes to ERR. */
static bool ask(int fd, const char *line, char *err, size_t err_bytes)
{
	send_all(fd, line, strlen(line));
	char *reply = read_line(fd);
	ck_assert_ptr_nonnull(reply);
	struct json_object *o = json_tokener_parse(reply), *ok, *e;
	ck_assert_msg(o != NULL, "reply is not JSON: %s", reply);
	ck_assert(json_object_object_get_ex(o, "ok", &ok));
	bool good = json_object_get_boolean(ok);
	if (err && json_object_object_get_ex(o, "error", &e))
		snprintf(err, err_bytes, "%s", json_object_get_string(e));
	json_object_put(o);
	return good;
}

static void assert_stat_works(const struct test_mount *m)
{
	struct json_object *mount, *doc = ctl_test_stat(m->mnt, &mount), *ok;
	ck_assert(json_object_object_get_ex(mount, "ok", &ok) && json_object_get_boolean(ok));
	json_object_put(doc);
}

START_TEST(garbage_oversized_half_written_and_many_clients_do_not_hurt)
{
	struct test_mount m;
	test_mount_start(&m, NULL);
	char err[512];
	int fd = connect_ctl(m.mnt);
	ck_assert(!ask(fd, "garbage\n", err, sizeof(err)));
	ck_assert_ptr_nonnull(strstr(err, "malformed"));
	ck_assert(!ask(fd, "{\"cmd\":\"format-disk\"}\n", err, sizeof(err)));
	ck_assert_ptr_nonnull(strstr(err, "unknown command"));
	ck_assert(!ask(fd, "[1,2,3]\n", err, sizeof(err)));
	ck_assert(!ask(fd, "{\"cmd\":42}\n", err, sizeof(err)));
	ck_assert(!ask(fd, "{\"cmd\":\"stat\"} trailing\n", err, sizeof(err)));
	ck_assert(!ask(fd, "{\"cmd\":\"stat\"\n", err, sizeof(err)));
	ck_assert(!ask(fd, "\x01\x02\xff\xfe{}}}\n", err, sizeof(err)));
	/* 100 levels deep: refused by the depth limit, not by the stack. */
	char deep[512] = "";
	for (int i = 0; i < 100; i++)
		strcat(deep, "[");
	strcat(deep, "\n");
	ck_assert(!ask(fd, deep, err, sizeof(err)));
	/* Same connection, still serving. */
	ck_assert(ask(fd, "{\"cmd\":\"version\"}\n", NULL, 0));
	close(fd);

	/* A 10 MiB line: an error, then the connection closes. */
	fd = connect_ctl(m.mnt);
	size_t big_len = 10u << 20;
	char *big = malloc(big_len);
	ck_assert_ptr_nonnull(big);
	memset(big, 'a', big_len);
	big[big_len - 1] = '\n';
	send_all(fd, big, big_len);
	free(big);
	char *reply = read_line(fd);
	ck_assert_ptr_nonnull(reply);
	ck_assert_ptr_nonnull(strstr(reply, "\"ok\":false"));
	ck_assert_ptr_nonnull(strstr(reply, "longer than"));
	ck_assert_ptr_null(read_line(fd));
	close(fd);

	/* Half a request, then gone. */
	fd = connect_ctl(m.mnt);
	send_all(fd, "{\"cmd\":\"st", 10);
	close(fd);

	/* More clients than the server keeps: the extra ones are turned away, the rest served. */
	enum { MANY = 100 };
	int fds[MANY];
	for (int i = 0; i < MANY; i++)
		fds[i] = connect_ctl(m.mnt);
	int served = 0;
	for (int i = 0; i < MANY; i++) {
		send(fds[i], "{\"cmd\":\"version\"}\n", 18, MSG_NOSIGNAL);
		char *line = read_line(fds[i]);
		if (line && strstr(line, "\"ok\":true"))
			served++;
		else
			ck_assert_msg(!line || strstr(line, "too many clients"), "unexpected: %s", line);
	}
	ck_assert_int_ge(served, 32);
	for (int i = 0; i < MANY; i++)
		close(fds[i]);

	/* A client that sends stat requests and never reads its replies. */
	fd = connect_ctl(m.mnt);
	for (int i = 0; i < 100; i++)
		send(fd, "{\"cmd\":\"stat\"}\n", 15, MSG_NOSIGNAL | MSG_DONTWAIT);
	assert_stat_works(&m);
	close(fd);

	ctl_test_write_direct(&m, "after", 3);
	assert_stat_works(&m);
	test_mount_require_clean_exit(test_mount_stop(&m));
}
END_TEST

/* Closed by the server: EOF (or a reset) waiting now, without blocking. */
static bool closed_by_server(int fd)
{
	char buf[256];
	for (;;) {
		ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n > 0)
			continue; /* a farewell line, then EOF */
		return n == 0 || (errno != EAGAIN && errno != EINTR);
	}
}

START_TEST(slow_clients_do_not_lock_others_out)
{
	struct test_mount m;
	test_mount_start(&m, NULL);
	/* Every slot taken by a client that starts a request and never ends it. */
	enum { SLOW = 64 };
	int slow[SLOW];
	for (int i = 0; i < SLOW; i++) {
		slow[i] = connect_ctl(m.mnt);
		send_all(slow[i], "{", 1);
	}
	/* One that comes to ask is served: the least recently heard from made room. */
	int fd = connect_ctl(m.mnt);
	ck_assert(ask(fd, "{\"cmd\":\"version\"}\n", NULL, 0));
	close(fd);
	ck_assert(closed_by_server(slow[0]));
	/* One that trickles its request a byte a second is dropped once it is overdue. */
	int trickle = slow[SLOW - 1];
	for (int i = 0; i < 8; i++) {
		usleep(1000 * 1000);
		send(trickle, "\"", 1, MSG_NOSIGNAL | MSG_DONTWAIT); /* fails once dropped */
	}
	ck_assert_msg(closed_by_server(trickle), "a request trickled for 8 s is still being read");
	for (int i = 0; i < SLOW; i++)
		close(slow[i]);
	test_mount_require_clean_exit(test_mount_stop(&m));
}
END_TEST

static int try_connect(void *arg)
{
	const char *path = arg;
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path);
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	if (fd < 0)
		return 100;
	int r = connect(fd, (struct sockaddr *)&addr, sizeof(addr)) == 0 ? 0 : errno;
	close(fd);
	return r;
}

START_TEST(socket_is_0600_and_refuses_other_users)
{
	struct test_mount m;
	test_mount_start(&m, NULL);
	char path[108];
	ck_assert_int_eq(ctl_socket_path_for_mount(m.mnt, path, sizeof(path)), 0);
	struct stat st;
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert(S_ISSOCK(st.st_mode));
	ck_assert_uint_eq(st.st_mode & 07777, 0600);
	ck_assert_uint_eq(st.st_uid, 0);
	ck_assert_int_eq(test_run_as(1000, 1000, try_connect, path), EACCES);
	ck_assert_int_eq(try_connect(path), 0);
	test_mount_require_clean_exit(test_mount_stop(&m));
	ck_assert_int_eq(access(path, F_OK), -1); /* removed at unmount */
}
END_TEST

START_TEST(group_socket_is_0660_and_lets_the_group_in)
{
	char conf[512], sock[108];
	snprintf(conf, sizeof(conf), "%s/ctl-group-%d.conf", TEST_SCRATCH_DIR, (int)getpid());
	snprintf(sock, sizeof(sock), "/run/fusesched/test-group-%d.sock", (int)getpid());
	mkdir(TEST_SCRATCH_DIR, 0755);
	leftovers_add_dir(conf); /* taken down by the runner if the test fails (leftovers.h) */
	char text[256];
	snprintf(text, sizeof(text), "[control]\nsocket = %s\ngroup = 4321\n", sock);
	test_write_file(conf, text);
	struct test_mount m;
	const char *args[] = {"-c", conf, NULL};
	test_mount_start(&m, args);
	struct stat st;
	ck_assert_int_eq(stat(sock, &st), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0660);
	ck_assert_uint_eq(st.st_gid, 4321);
	ck_assert_int_eq(test_run_as(1000, 4321, try_connect, sock), 0);
	ck_assert_int_eq(test_run_as(1000, 1000, try_connect, sock), EACCES);
	/* stat finds a configured socket from the mountpoint alone (through the auto-path link). */
	assert_stat_works(&m);
	char link[108];
	ck_assert_int_eq(ctl_socket_path_for_mount(m.mnt, link, sizeof(link)), 0);

	/* A second daemon configured with the same socket is refused before it mounts. */
	char other[512];
	snprintf(other, sizeof(other), "%s/ctl-second-%d", TEST_SCRATCH_DIR, (int)getpid());
	leftovers_add_dir(other);
	ck_assert_int_eq(test_sh("mkdir -p '%s/b' '%s/m'", other, other), 0);
	int status;
	char *out = ctl_test_capture(&status, "%s mount '%s/b' '%s/m' -f -c '%s' 2>&1", FUSESCHED_BIN,
				     other, other, conf);
	ck_assert_int_eq(status, 2);
	ck_assert_msg(strstr(out, "in use by a running fusesched daemon") != NULL, "%s", out);
	free(out);
	char other_mnt[600];
	snprintf(other_mnt, sizeof(other_mnt), "%s/m", other);
	ck_assert(!test_is_fuse_mount(other_mnt));
	test_mount_require_clean_exit(test_mount_stop(&m));
	ck_assert_int_eq(access(sock, F_OK), -1);
	struct stat lst;
	ck_assert_int_eq(lstat(link, &lst), -1); /* the link went with the socket */

	/* A socket left by a dead daemon is replaced. */
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", sock);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&addr, sizeof(addr)), 0);
	close(fd); /* bound, never listening: what a killed daemon leaves */
	test_mount_start(&m, args);
	ck_assert_int_eq(try_connect(sock), 0);
	test_mount_require_clean_exit(test_mount_stop(&m));
	test_sh("rm -rf '%s'", other);
	unlink(conf);
}
END_TEST

/* The mount's socket's group in stat ("" for null). */
static void assert_stat_group(const struct test_mount *m, const char *want)
{
	struct json_object *mount, *doc = ctl_test_stat(m->mnt, &mount), *group;
	ck_assert(json_object_object_get_ex(mount, "socket_group", &group));
	ck_assert_str_eq(group ? json_object_get_string(group) : "", want);
	json_object_put(doc);
}

/*
 * [control] group follows a reload: given, the socket becomes 0660 of that
 * group; changed, the old group is shut out; an unknown one fails the
 * reload and leaves the socket as it was; taken away, 0600 again.
 */
START_TEST(a_reload_gives_the_socket_to_its_group_and_takes_it_back)
{
	char conf[512], sock[108], *out;
	snprintf(conf, sizeof(conf), "%s/ctl-regroup-%d.conf", TEST_SCRATCH_DIR, (int)getpid());
	mkdir(TEST_SCRATCH_DIR, 0755);
	leftovers_add_dir(conf);
	test_write_file(conf, "[control]\n");
	struct test_mount m;
	const char *args[] = {"-c", conf, NULL};
	test_mount_start(&m, args);
	ck_assert_int_eq(ctl_socket_path_for_mount(m.mnt, sock, sizeof(sock)), 0);
	struct stat st;
	ck_assert_int_eq(stat(sock, &st), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0600);
	ck_assert_int_eq(test_run_as(1000, 4321, try_connect, sock), EACCES);
	assert_stat_group(&m, "");

	ck_assert_msg(ctl_test_reload(m.mnt, conf, "[control]\ngroup = 4321\n", &out) == 0, "%s", out);
	free(out);
	ck_assert_int_eq(stat(sock, &st), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0660);
	ck_assert_uint_eq(st.st_gid, 4321);
	ck_assert_int_eq(test_run_as(1000, 4321, try_connect, sock), 0);
	ck_assert_int_eq(test_run_as(1000, 1000, try_connect, sock), EACCES);
	assert_stat_group(&m, "4321");

	ck_assert_msg(ctl_test_reload(m.mnt, conf, "[control]\ngroup = 4322\n", &out) == 0, "%s", out);
	free(out);
	ck_assert_int_eq(test_run_as(1000, 4322, try_connect, sock), 0);
	ck_assert_int_eq(test_run_as(1000, 4321, try_connect, sock), EACCES);

	ck_assert_msg(ctl_test_reload(m.mnt, conf, "[control]\ngroup = fusesched-no-such-group\n", &out) != 0,
		      "%s", out);
	ck_assert_msg(strstr(out, "unknown group 'fusesched-no-such-group' in [control] group"), "%s",
		      out);
	free(out);
	ck_assert_int_eq(stat(sock, &st), 0);
	ck_assert_uint_eq(st.st_gid, 4322);
	ck_assert_int_eq(test_run_as(1000, 4322, try_connect, sock), 0);
	assert_stat_group(&m, "4322");

	ck_assert_msg(ctl_test_reload(m.mnt, conf, "[control]\n", &out) == 0, "%s", out);
	free(out);
	ck_assert_int_eq(stat(sock, &st), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0600);
	ck_assert_uint_eq(st.st_gid, getegid());
	ck_assert_int_eq(test_run_as(1000, 4322, try_connect, sock), EACCES);
	assert_stat_group(&m, "");
	test_mount_require_clean_exit(test_mount_stop(&m));
	unlink(conf);
}
END_TEST

/* stat's "socket" field. */
static char *stat_socket(const struct test_mount *m)
{
	struct json_object *mount, *doc = ctl_test_stat(m->mnt, &mount), *sock;
	ck_assert(json_object_object_get_ex(mount, "socket", &sock));
	char *path = strdup(json_object_get_string(sock));
	json_object_put(doc);
	return path;
}

/*
 * [control] socket follows a reload: the socket is made at the new path
 * (the auto path then links to it) and the old one removed; a path that
 * cannot be bound fails the reload, the socket in force kept; back to
 * auto, the link gives way to the socket.
 */
START_TEST(a_reload_moves_the_socket)
{
	char conf[512], moved[108], autop[108], text[512], *out;
	snprintf(conf, sizeof(conf), "%s/ctl-move-%d.conf", TEST_SCRATCH_DIR, (int)getpid());
	snprintf(moved, sizeof(moved), "/run/fusesched/test-moved-%d.sock", (int)getpid());
	mkdir(TEST_SCRATCH_DIR, 0755);
	leftovers_add_dir(conf);
	leftovers_add_dir(moved);
	test_write_file(conf, "[control]\n");
	struct test_mount m;
	const char *args[] = {"-c", conf, NULL};
	test_mount_start(&m, args);
	ck_assert_int_eq(ctl_socket_path_for_mount(m.mnt, autop, sizeof(autop)), 0);
	struct stat st;
	ck_assert_int_eq(lstat(autop, &st), 0);
	ck_assert(S_ISSOCK(st.st_mode));

	snprintf(text, sizeof(text), "[control]\nsocket = %s\ngroup = 4321\n", moved);
	ck_assert_msg(ctl_test_reload(m.mnt, conf, text, &out) == 0, "%s", out);
	free(out);
	ck_assert_int_eq(lstat(moved, &st), 0);
	ck_assert(S_ISSOCK(st.st_mode));
	ck_assert_uint_eq(st.st_mode & 07777, 0660);
	ck_assert_uint_eq(st.st_gid, 4321);
	ck_assert_int_eq(try_connect(moved), 0);
	ck_assert_int_eq(test_run_as(1000, 4321, try_connect, moved), 0);
	ck_assert_int_eq(lstat(autop, &st), 0);
	ck_assert_msg(S_ISLNK(st.st_mode), "the auto path is not a link to the moved socket");
	char *where = stat_socket(&m); /* found from the mountpoint, through the link */
	ck_assert_str_eq(where, moved);
	free(where);

	/* A directory that is not there: refused, named, the socket in force kept. */
	const char *nowhere = "/run/fusesched-no-such-dir/x.sock";
	snprintf(text, sizeof(text), "[control]\nsocket = %s\n", nowhere);
	ck_assert_msg(ctl_test_reload(m.mnt, conf, text, &out) != 0, "%s", out);
	ck_assert_msg(strstr(out, "cannot bind /run/fusesched-no-such-dir/x.sock"), "%s", out);
	free(out);
	ck_assert_int_eq(try_connect(moved), 0);
	ck_assert_int_eq(lstat(moved, &st), 0);
	ck_assert_uint_eq(st.st_gid, 4321);
	where = stat_socket(&m);
	ck_assert_str_eq(where, moved);
	free(where);
	assert_stat_group(&m, "4321");

	/* From one configured path to another: the link follows. */
	char again[108], target[108] = "";
	snprintf(again, sizeof(again), "/run/fusesched/test-again-%d.sock", (int)getpid());
	leftovers_add_dir(again);
	snprintf(text, sizeof(text), "[control]\nsocket = %s\n", again);
	ck_assert_msg(ctl_test_reload(m.mnt, conf, text, &out) == 0, "%s", out);
	free(out);
	ck_assert_int_eq(lstat(moved, &st), -1);
	ck_assert_int_gt(readlink(autop, target, sizeof(target) - 1), 0);
	ck_assert_str_eq(target, again);
	ck_assert_int_eq(try_connect(again), 0);
	assert_stat_group(&m, "");

	/* Back to auto: the socket where the link was, the moved one gone. */
	ck_assert_msg(ctl_test_reload(m.mnt, conf, "[control]\nsocket = auto\n", &out) == 0, "%s", out);
	free(out);
	ck_assert_int_eq(lstat(autop, &st), 0);
	ck_assert(S_ISSOCK(st.st_mode));
	ck_assert_uint_eq(st.st_mode & 07777, 0600);
	ck_assert_int_eq(lstat(again, &st), -1);
	where = stat_socket(&m);
	ck_assert_str_eq(where, autop);
	free(where);
	assert_stat_group(&m, "");
	test_mount_require_clean_exit(test_mount_stop(&m));
	ck_assert_int_eq(lstat(autop, &st), -1);
	unlink(conf);
}
END_TEST

/*
 * A daemon whose mount was just unmounted still holds its socket for a
 * moment while it drains. A new daemon for the same socket waits for it
 * instead of refusing: here a stand-in listens for 600 ms, then exits.
 */
START_TEST(a_socket_given_up_while_the_new_daemon_waits_is_taken)
{
	char conf[512], sock[108];
	snprintf(conf, sizeof(conf), "%s/ctl-exiting-%d.conf", TEST_SCRATCH_DIR, (int)getpid());
	snprintf(sock, sizeof(sock), "/run/fusesched/test-exiting-%d.sock", (int)getpid());
	mkdir(TEST_SCRATCH_DIR, 0755);
	leftovers_add_dir(conf);
	leftovers_add_dir(sock);
	char text[256];
	snprintf(text, sizeof(text), "[control]\nsocket = %s\n", sock);
	test_write_file(conf, text);
	mkdir("/run/fusesched", 0755);
	int ready[2];
	ck_assert_int_eq(pipe(ready), 0);
	pid_t stand_in = fork();
	ck_assert_int_ge(stand_in, 0);
	if (stand_in == 0) {
		struct sockaddr_un addr = {.sun_family = AF_UNIX};
		snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", sock);
		int fd = socket(AF_UNIX, SOCK_STREAM, 0);
		if (fd < 0 || bind(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0 || listen(fd, 8) < 0)
			_exit(1);
		if (write(ready[1], "r", 1) != 1)
			_exit(1);
		usleep(600 * 1000);
		_exit(0); /* the socket file stays, refusing connections: the daemon is gone */
	}
	close(ready[1]);
	char c;
	ck_assert_int_eq(read(ready[0], &c, 1), 1);
	close(ready[0]);
	struct test_mount m;
	const char *args[] = {"-c", conf, NULL};
	test_mount_start(&m, args); /* aborts the test if the daemon gave up */
	int status;
	ck_assert_int_eq(waitpid(stand_in, &status, 0), stand_in);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	ck_assert_int_eq(try_connect(sock), 0);
	assert_stat_works(&m);
	test_mount_require_clean_exit(test_mount_stop(&m));
	ck_assert_int_eq(access(sock, F_OK), -1);
	unlink(conf);
}
END_TEST

/* `umount; fusesched mount` at once, as scripts do: the new daemon gets the socket. */
START_TEST(mounting_again_right_after_unmount_works)
{
	struct test_mount d;
	test_mount_dirs(&d);
	const char *mnt = d.mnt;
	for (int i = 0; i < 5; i++) {
		int status;
		char *out = ctl_test_capture(&status, "%s mount '%s' '%s' 2>&1 && umount '%s' && "
					     "%s mount '%s' '%s' 2>&1", FUSESCHED_BIN, d.backing, mnt,
					     mnt, FUSESCHED_BIN, d.backing, mnt);
		ck_assert_msg(status == 0, "round %d: %s", i, out);
		free(out);
		ck_assert(test_is_fuse_mount(mnt));
		ck_assert_int_eq(test_sh("umount '%s'", mnt), 0);
	}
	test_sh("rm -rf '%s'", d.root);
}
END_TEST

START_TEST(not_a_fusesched_mount_is_said_clearly)
{
	int status;
	char *out = ctl_test_capture(&status, "%s stat /proc 2>&1", FUSESCHED_BIN);
	ck_assert_int_ne(status, 0);
	ck_assert_msg(strstr(out, "'/proc' is not a fusesched mount") != NULL, "%s", out);
	free(out);
	out = ctl_test_capture(&status, "%s stat /not/a/fusesched/mount 2>&1", FUSESCHED_BIN);
	ck_assert_int_ne(status, 0);
	ck_assert_ptr_nonnull(strstr(out, "is not a fusesched mount"));
	free(out);
	out = ctl_test_capture(&status, "%s reload /not/a/fusesched/mount 2>&1", FUSESCHED_BIN);
	ck_assert_int_ne(status, 0);
	ck_assert_ptr_nonnull(strstr(out, "is not a fusesched mount"));
	free(out);
	out = ctl_test_capture(&status, "%s stat --sort bogus 2>&1", FUSESCHED_BIN);
	ck_assert_int_eq(status, 2);
	ck_assert_ptr_nonnull(strstr(out, "unknown --sort column"));
	free(out);
}
END_TEST

/* Every field README.md documents, with its JSON type. */
static const struct {
	const char *key;
	enum json_type type;
} MOUNT_FIELDS[] = {
	{"ok", json_type_boolean}, {"version", json_type_string}, {"pid", json_type_int},
	{"mount", json_type_string}, {"backing", json_type_string}, {"config", json_type_null},
	{"socket", json_type_string}, {"socket_group", json_type_null},
	{"metrics_listen", json_type_null}, {"policy", json_type_string},
	{"read_cost", json_type_null}, {"write_cost", json_type_null}, {"dsync_cost", json_type_null},
	{"learn_depth", json_type_boolean}, {"work_conserving", json_type_string},
	{"idle", json_type_string}, {"idle_fixed_us", json_type_null},
	{"budget_timeout_ms", json_type_int}, {"busy_poll_us", json_type_int},
	{"reserve_ms", json_type_int}, {"inflight", json_type_int},
	{"max_inflight", json_type_int}, {"reserved_slots", json_type_int}, {"hung", json_type_int},
	{"executors", json_type_int}, {"max_background", json_type_int},
	{"peak_rate_bytes_per_s", json_type_int},
	{"uptime_s", json_type_double}, {"interval_s", json_type_double}, {"tenants", json_type_array},
}, TENANT_FIELDS[] = {
	{"id", json_type_int}, {"cgroup", json_type_string}, {"weight", json_type_int},
	{"weight_source", json_type_string}, {"active", json_type_boolean},
	{"target_share", json_type_double}, {"share_interval", json_type_double},
	{"share_total", json_type_double}, {"time_share_interval", json_type_double},
	{"time_share_total", json_type_double}, {"read_bytes_per_s", json_type_double},
	{"write_bytes_per_s", json_type_double}, {"iops", json_type_double},
	{"ops.read", json_type_int}, {"ops.write", json_type_int}, {"ops.sync", json_type_int},
	{"ops.other", json_type_int}, {"bytes.read", json_type_int}, {"bytes.write", json_type_int},
	{"bytes.sync", json_type_int}, {"bytes.other", json_type_int}, {"errors", json_type_int},
	{"solo_ops", json_type_int}, {"latency_ns.p50", json_type_int}, {"latency_ns.p99", json_type_int},
	{"latency_ns.max", json_type_int}, {"queued", json_type_int}, {"inflight", json_type_int},
	{"idle_windows", json_type_int}, {"idle_ns", json_type_int},
	{"injected.waker", json_type_int}, {"injected.fsync", json_type_int},
	{"injected.general", json_type_int}, {"expirations.exhausted", json_type_int},
	{"expirations.timeout", json_type_int}, {"expirations.emptied", json_type_int},
	{"expirations.too_idle", json_type_int}, {"expirations.preempted", json_type_int},
	{"budget_bytes", json_type_int}, {"think_ns", json_type_int},
	{"cycle_alone_ns", json_type_int}, {"inject_limit", json_type_int},
	{"door_shut", json_type_boolean},
};

static struct json_object *at(struct json_object *o, const char *path, bool *present)
{
	char key[64];
	*present = true;
	while (*path) {
		size_t len = strcspn(path, ".");
		snprintf(key, sizeof(key), "%.*s", (int)len, path);
		struct json_object *next = NULL;
		if (!json_object_object_get_ex(o, key, &next)) {
			*present = false;
			return NULL;
		}
		o = next;
		path += len + (path[len] == '.');
	}
	return o;
}

START_TEST(json_has_every_documented_field)
{
	struct test_mount m;
	test_mount_start(&m, NULL);
	ctl_test_write_direct(&m, "j", 5);
	struct json_object *mount, *doc = ctl_test_stat(m.mnt, &mount);
	for (size_t i = 0; i < sizeof(MOUNT_FIELDS) / sizeof(MOUNT_FIELDS[0]); i++) {
		bool present;
		struct json_object *v = at(mount, MOUNT_FIELDS[i].key, &present);
		ck_assert_msg(present, "mount field %s missing", MOUNT_FIELDS[i].key);
		ck_assert_msg(json_object_get_type(v) == MOUNT_FIELDS[i].type, "mount field %s: type %s",
			      MOUNT_FIELDS[i].key, json_type_to_name(json_object_get_type(v)));
	}
	struct json_object *tenants;
	ck_assert(json_object_object_get_ex(mount, "tenants", &tenants));
	ck_assert_uint_ge(json_object_array_length(tenants), 1);
	for (size_t t = 0; t < json_object_array_length(tenants); t++) {
		struct json_object *row = json_object_array_get_idx(tenants, t);
		/* The parent's id, or null at the top level: either way the key is there. */
		bool has_parent;
		struct json_object *parent = at(row, "parent", &has_parent);
		ck_assert_msg(has_parent, "tenant field parent missing");
		ck_assert_msg(!parent || json_object_is_type(parent, json_type_int),
			      "tenant field parent: type %s", json_type_to_name(json_object_get_type(parent)));
		bool has_group;
		struct json_object *group = at(row, "queue_group", &has_group);
		ck_assert_msg(has_group, "tenant field queue_group missing");
		ck_assert_msg(!group || json_object_is_type(group, json_type_int),
			      "tenant field queue_group: type %s", json_type_to_name(json_object_get_type(group)));
		for (size_t i = 0; i < sizeof(TENANT_FIELDS) / sizeof(TENANT_FIELDS[0]); i++) {
			bool present;
			struct json_object *v = at(row, TENANT_FIELDS[i].key, &present);
			ck_assert_msg(present, "tenant field %s missing", TENANT_FIELDS[i].key);
			enum json_type ty = json_object_get_type(v);
			/* json-c prints a whole double like 1.0, which parses back as a double. */
			ck_assert_msg(ty == TENANT_FIELDS[i].type, "tenant field %s: type %s",
				      TENANT_FIELDS[i].key, json_type_to_name(ty));
		}
	}
	bool present;
	ck_assert_str_eq(json_object_get_string(at(mount, "mount", &present)), m.mnt);
	ck_assert_str_eq(json_object_get_string(at(mount, "backing", &present)), m.backing);
	json_object_put(doc);
	test_mount_require_clean_exit(test_mount_stop(&m));
}
END_TEST

/* ---- a small Prometheus text-format parser ---- */

static bool is_metric_name(const char *s, size_t len)
{
	if (!len || !(isalpha((unsigned char)s[0]) || s[0] == '_' || s[0] == ':'))
		return false;
	for (size_t i = 1; i < len; i++)
		if (!(isalnum((unsigned char)s[i]) || s[i] == '_' || s[i] == ':'))
			return false;
	return true;
}

struct family {
	char name[128];
	char type[16];
	bool help;
	int samples;
};

static struct family *family_find(struct family *f, int n, const char *name, size_t len)
{
	for (int i = 0; i < n; i++)
		if (strlen(f[i].name) == len && strncmp(f[i].name, name, len) == 0)
			return &f[i];
	return NULL;
}

/* Checks the whole exposition; returns the value of the sample whose line starts with WANT, or -1. */
static double prom_validate(char *text, const char *want)
{
	struct family fam[64];
	int nfam = 0;
	double wanted = -1;
	int lineno = 0;
	for (char *save = NULL, *line = strtok_r(text, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		lineno++;
		if (line[0] == '#') {
			char kind[8], name[128];
			int off = 0;
			ck_assert_msg(sscanf(line, "# %7s %127s %n", kind, name, &off) == 2,
				      "line %d: bad comment: %s", lineno, line);
			ck_assert_msg(is_metric_name(name, strlen(name)), "line %d: bad name", lineno);
			struct family *f = family_find(fam, nfam, name, strlen(name));
			if (!f) {
				ck_assert_int_lt(nfam, 64);
				f = &fam[nfam++];
				memset(f, 0, sizeof(*f));
				snprintf(f->name, sizeof(f->name), "%s", name);
			}
			ck_assert_msg(f->samples == 0, "line %d: %s after samples", lineno, kind);
			if (strcmp(kind, "HELP") == 0) {
				ck_assert_msg(!f->help, "line %d: second HELP", lineno);
				ck_assert_msg(line[off] != '\0', "line %d: empty HELP", lineno);
				f->help = true;
			} else {
				ck_assert_msg(strcmp(kind, "TYPE") == 0, "line %d: %s", lineno, kind);
				ck_assert_msg(!f->type[0], "line %d: second TYPE", lineno);
				const char *t = line + off;
				ck_assert_msg(!strcmp(t, "counter") || !strcmp(t, "gauge"),
					      "line %d: type %s", lineno, t);
				snprintf(f->type, sizeof(f->type), "%s", t);
			}
			continue;
		}
		/* name{label="value",...} number */
		size_t nlen = strcspn(line, "{ ");
		ck_assert_msg(is_metric_name(line, nlen), "line %d: bad name: %s", lineno, line);
		ck_assert_msg(strncmp(line, "fusesched_", 10) == 0, "line %d: not fusesched_*", lineno);
		struct family *f = family_find(fam, nfam, line, nlen);
		ck_assert_msg(f && f->type[0] && f->help, "line %d: no HELP/TYPE before it", lineno);
		if (!strcmp(f->type, "counter"))
			ck_assert_msg(strstr(f->name, "_total"), "line %d: counter without _total", lineno);
		f->samples++;
		const char *p = line + nlen;
		bool has_mount = false;
		ck_assert_msg(*p == '{', "line %d: no labels (mount is required)", lineno);
		p++;
		while (*p != '}') {
			size_t llen = strspn(p, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_0123456789");
			ck_assert_msg(llen && !isdigit((unsigned char)p[0]), "line %d: bad label", lineno);
			has_mount |= llen == 5 && !strncmp(p, "mount", 5);
			p += llen;
			ck_assert_msg(p[0] == '=' && p[1] == '"', "line %d: label needs =\"", lineno);
			p += 2;
			while (*p != '"') {
				ck_assert_msg(*p, "line %d: unterminated label value", lineno);
				if (*p == '\\') {
					ck_assert_msg(p[1] == '\\' || p[1] == '"' || p[1] == 'n',
						      "line %d: bad escape", lineno);
					p++;
				}
				p++;
			}
			p++;
			if (*p == ',')
				p++;
			else
				ck_assert_msg(*p == '}', "line %d: expected , or }", lineno);
		}
		ck_assert(has_mount);
		p++;
		ck_assert_msg(*p == ' ', "line %d: no space before value", lineno);
		char *end;
		double v = strtod(p + 1, &end);
		ck_assert_msg(end != p + 1 && *end == '\0', "line %d: bad value '%s'", lineno, p + 1);
		if (want && strncmp(line, want, strlen(want)) == 0)
			wanted = v;
	}
	for (int i = 0; i < nfam; i++)
		ck_assert_msg(fam[i].type[0] && fam[i].help, "%s lacks HELP or TYPE", fam[i].name);
	ck_assert_int_ge(nfam, 10);
	return wanted;
}

START_TEST(prometheus_output_is_valid_exposition_format)
{
	struct test_mount m;
	test_mount_start(&m, NULL);
	ctl_test_write_direct(&m, "p", 6);
	/* Our own writes, whatever cgroup this runner is in: find the tenant in the JSON. */
	struct json_object *mount, *doc = ctl_test_stat(m.mnt, &mount), *tenants;
	ck_assert(json_object_object_get_ex(mount, "tenants", &tenants));
	ck_assert_uint_eq(json_object_array_length(tenants), 1);
	bool present;
	const char *cg = json_object_get_string(at(json_object_array_get_idx(tenants, 0), "cgroup", &present));
	char want[1024];
	snprintf(want, sizeof(want), "fusesched_tenant_bytes_total{mount=\"%s\",tenant=\"%s\",op=\"write\"}",
		 m.mnt, cg[0] ? cg : "(default)");
	json_object_put(doc);
	int status;
	char *text = ctl_test_capture(&status, "%s stat '%s' --prometheus", FUSESCHED_BIN, m.mnt);
	ck_assert_int_eq(status, 0);
	ck_assert_double_eq(prom_validate(text, want), 6 * 4096);
	free(text);
	test_mount_require_clean_exit(test_mount_stop(&m));
}
END_TEST

START_TEST(watch_redraws_under_a_pty_and_exits_0_on_sigint)
{
	struct test_mount m;
	test_mount_start(&m, NULL);
	int master;
	pid_t pid = forkpty(&master, NULL, NULL, &(struct winsize){.ws_row = 50, .ws_col = 200});
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		execl(FUSESCHED_BIN, FUSESCHED_BIN, "stat", m.mnt, "--watch", "0.2", (char *)NULL);
		_exit(127);
	}
	/* Count frames: each starts with cursor-home and shows the header. */
	char buf[65536];
	size_t used = 0;
	int frames = 0;
	for (int i = 0; i < 200 && frames < 3; i++) {
		struct pollfd p = {.fd = master, .events = POLLIN};
		if (poll(&p, 1, 100) != 1)
			continue;
		ssize_t n = read(master, buf + used, sizeof(buf) - 1 - used);
		if (n <= 0)
			break;
		used += (size_t)n;
		buf[used] = '\0';
		frames = 0;
		for (char *s = buf; (s = strstr(s, "\033[Hmount ")); s++)
			frames++;
		if (used > sizeof(buf) / 2) { /* keep the tail only */
			memmove(buf, buf + used / 2, used - used / 2);
			used -= used / 2;
		}
	}
	ck_assert_int_ge(frames, 2);
	ck_assert_int_eq(kill(pid, SIGINT), 0);
	int status;
	for (int i = 0; i < 1000 && waitpid(pid, &status, WNOHANG) == 0; i++) {
		char drain[4096];
		if (read(master, drain, sizeof(drain)) < 0 && errno != EAGAIN)
			usleep(10000);
	}
	ck_assert(WIFEXITED(status));
	ck_assert_int_eq(WEXITSTATUS(status), 0);
	close(master);
	test_mount_require_clean_exit(test_mount_stop(&m));
}
END_TEST

/*
 * The stage left by a daemon killed while starting (its pid gone, its bind
 * still mounted), of this mountpoint or another never mounted again, and
 * this mountpoint's of the naming before stages had pids are removed by the
 * next daemon; a running daemon's stage stays.
 */
START_TEST(stale_stages_are_removed)
{
	struct test_mount d;
	test_mount_dirs(&d);
	char sock[PATH_MAX], dead[PATH_MAX + 32], unnumbered[PATH_MAX + 32];
	char other_sock[PATH_MAX], other_dead[PATH_MAX + 32], other_live[PATH_MAX + 32];
	char other_mnt[PATH_MAX + 16];
	ck_assert_int_eq(ctl_socket_path_for_mount(d.mnt, sock, sizeof(sock)), 0);
	snprintf(other_mnt, sizeof(other_mnt), "%s.never", d.mnt);
	ck_assert_int_eq(ctl_socket_path_for_mount(other_mnt, other_sock, sizeof(other_sock)), 0);
	int other_base = (int)strlen(other_sock) - (int)strlen(".sock");
	int base = (int)strlen(sock) - (int)strlen(".sock");
	pid_t gone = fork();
	ck_assert_int_ge(gone, 0);
	if (gone == 0)
		_exit(0);
	ck_assert_int_eq(waitpid(gone, NULL, 0), gone);
	snprintf(dead, sizeof(dead), "%.*s.root.%d", base, sock, (int)gone);
	snprintf(unnumbered, sizeof(unnumbered), "%.*s.root", base, sock);
	snprintf(other_dead, sizeof(other_dead), "%.*s.root.%d", other_base, other_sock,
		 (int)gone);
	snprintf(other_live, sizeof(other_live), "%.*s.root.%d", other_base, other_sock,
		 (int)getpid());
	mkdir("/run/fusesched", 0755);
	ck_assert_int_eq(mkdir(dead, 0700), 0);
	ck_assert_int_eq(mkdir(unnumbered, 0700), 0);
	ck_assert_int_eq(mkdir(other_dead, 0700), 0);
	ck_assert_int_eq(mkdir(other_live, 0700), 0);
	leftovers_add_dir(dead);
	leftovers_add_dir(unnumbered);
	leftovers_add_dir(other_dead);
	leftovers_add_dir(other_live);
	leftovers_add_mount(dead);
	ck_assert_int_eq(test_sh("mount --bind '%s' '%s'", dead, dead), 0);
	int status;
	char *out = ctl_test_capture(&status, "%s mount '%s' '%s' 2>&1", FUSESCHED_BIN, d.backing,
				     d.mnt);
	ck_assert_msg(status == 0, "%s", out);
	free(out);
	ck_assert(test_is_fuse_mount(d.mnt));
	ck_assert_int_eq(access(dead, F_OK), -1); /* a directory still mounted on is not removed */
	ck_assert_int_eq(access(unnumbered, F_OK), -1);
	ck_assert_int_eq(access(other_dead, F_OK), -1);
	ck_assert_int_eq(access(other_live, F_OK), 0); /* this test's pid, running */
	ck_assert_int_eq(rmdir(other_live), 0);
	ck_assert_int_eq(test_sh("umount '%s'", d.mnt), 0);
	test_sh("rm -rf '%s'", d.root);
}
END_TEST

int main(void)
{
	test_require_root("ctl_socket", "FUSE mounts, other users' credentials");
	if (access("/dev/fuse", R_OK | W_OK) != 0) {
		fprintf(stderr, "SKIP: ctl_socket: needs /dev/fuse\n");
		return 77;
	}
	Suite *s = suite_create("ctl_socket");
	TCase *tc = tcase_create("socket");
	tcase_add_unchecked_fixture(tc, leftovers_init, leftovers_cleanup);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, garbage_oversized_half_written_and_many_clients_do_not_hurt);
	tcase_add_test(tc, slow_clients_do_not_lock_others_out);
	tcase_add_test(tc, socket_is_0600_and_refuses_other_users);
	tcase_add_test(tc, group_socket_is_0660_and_lets_the_group_in);
	tcase_add_test(tc, a_reload_gives_the_socket_to_its_group_and_takes_it_back);
	tcase_add_test(tc, a_reload_moves_the_socket);
	tcase_add_test(tc, a_socket_given_up_while_the_new_daemon_waits_is_taken);
	tcase_add_test(tc, mounting_again_right_after_unmount_works);
	tcase_add_test(tc, stale_stages_are_removed);
	tcase_add_test(tc, not_a_fusesched_mount_is_said_clearly);
	tcase_add_test(tc, json_has_every_documented_field);
	tcase_add_test(tc, prometheus_output_is_valid_exposition_format);
	tcase_add_test(tc, watch_redraws_under_a_pty_and_exits_0_on_sigint);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_VERBOSE);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
