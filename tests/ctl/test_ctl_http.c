/*
 * The metrics HTTP listener ([metrics] listen) through a real mount: the
 * exposition over plain HTTP against `fusesched stat --prometheus`, status
 * codes, no listener unless configured, bad addresses refused, and idle
 * connections beyond the limit that neither lock out a fresh scrape nor
 * reach the control socket. Needs root and /dev/fuse; in a build without
 * libmicrohttpd only the refusal and the absence are checked, then it
 * exits 77 saying so.
 */
#include "ctl_test_util.h"
#include "fusesched/ctl.h"
#include "leftovers.h"

#include <arpa/inet.h>
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

/* Only a hang guard: every wait below ends on an event, this long at most. */
#define WAIT_MS 30000

static char conf_path[512];

static void setup(void)
{
	snprintf(conf_path, sizeof(conf_path), "%s/ctl-http-%d.conf", TEST_SCRATCH_DIR,
		 (int)getpid());
	mkdir(TEST_SCRATCH_DIR, 0755);
	leftovers_add_dir(conf_path); /* taken down by the runner if the test fails */
}

static void teardown(void)
{
	unlink(conf_path);
}

static void write_conf(const char *text)
{
	test_write_file(conf_path, text);
}

static socklen_t loopback(int family, unsigned port, struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	if (family == AF_INET6) {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
		in6->sin6_family = AF_INET6;
		in6->sin6_addr = in6addr_loopback;
		in6->sin6_port = htons((uint16_t)port);
		return sizeof(*in6);
	}
	struct sockaddr_in *in = (struct sockaddr_in *)ss;
	in->sin_family = AF_INET;
	in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	in->sin_port = htons((uint16_t)port);
	return sizeof(*in);
}

/* A loopback port nobody listens on now (0 if FAMILY has no loopback here). */
static unsigned free_port(int family)
{
	struct sockaddr_storage ss;
	socklen_t len = loopback(family, 0, &ss);
	int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&ss, len) < 0) {
		if (fd >= 0)
			close(fd);
		return 0;
	}
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&ss, &len), 0);
	close(fd);
	return family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
				  : ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

/* Connected to loopback PORT, or -errno. */
static int tcp_connect(int family, unsigned port)
{
	struct sockaddr_storage ss;
	socklen_t len = loopback(family, port, &ss);
	int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(fd, 0);
	if (connect(fd, (struct sockaddr *)&ss, len) < 0) {
		int e = errno;
		close(fd);
		return -e;
	}
	return fd;
}

static void send_all(int fd, const char *text)
{
	for (size_t len = strlen(text); len;) {
		ssize_t n = send(fd, text, len, MSG_NOSIGNAL);
		ck_assert_msg(n > 0, "send: %s", strerror(errno));
		text += n;
		len -= (size_t)n;
	}
}

/* Everything until the server closes; NUL-terminated, malloc'd. */
static char *read_to_eof(int fd)
{
	char *text = NULL;
	size_t len = 0;
	FILE *mem = open_memstream(&text, &len);
	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		ck_assert_msg(poll(&p, 1, WAIT_MS) == 1, "no answer within %d ms", WAIT_MS);
		char buf[65536];
		ssize_t n = recv(fd, buf, sizeof(buf), 0);
		if (n <= 0)
			break;
		fwrite(buf, 1, (size_t)n, mem);
	}
	fclose(mem);
	return text;
}

struct http_reply {
	int status;
	char *text;             /* the whole response */
	const char *body;       /* in text, after the head */
};

/* Sends REQUEST (raw) to loopback PORT and reads the reply to EOF. */
static struct http_reply http_raw(int family, unsigned port, const char *request)
{
	int fd = tcp_connect(family, port);
	ck_assert_msg(fd >= 0, "connect to port %u: %s", port, strerror(-fd));
	send_all(fd, request);
	struct http_reply r = {.text = read_to_eof(fd)};
	close(fd);
	ck_assert_msg(sscanf(r.text, "HTTP/1.%*d %d ", &r.status) == 1, "not HTTP: '%.200s'",
		      r.text);
	const char *end = strstr(r.text, "\r\n\r\n");
	ck_assert_msg(end, "no end of head: '%.200s'", r.text);
	r.body = end + 4;
	return r;
}

static struct http_reply http_get(int family, unsigned port, const char *method, const char *path)
{
	char req[512];
	snprintf(req, sizeof(req), "%s %s HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
		 method, path);
	return http_raw(family, port, req);
}

/* The value of header NAME in R's head, or NULL; malloc'd. */
static char *header(const struct http_reply *r, const char *name)
{
	size_t len = strlen(name);
	for (const char *line = strstr(r->text, "\r\n"); line && line + 2 < r->body;
	     line = strstr(line + 2, "\r\n")) {
		const char *l = line + 2;
		if (strncasecmp(l, name, len) == 0 && l[len] == ':') {
			const char *v = l + len + 1 + strspn(l + len + 1, " ");
			return strndup(v, strcspn(v, "\r"));
		}
	}
	return NULL;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * Each sample line's series (name and labels, without the value) and each
 * family's "# TYPE" line, sorted, one a line: what two expositions of the
 * same tenants share whatever their values.
 */
static char *shape(const char *exposition)
{
	char *copy = strdup(exposition), *save = NULL;
	char **lines = NULL;
	size_t n = 0;
	for (char *l = strtok_r(copy, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		if (strncmp(l, "# HELP ", 7) == 0)
			continue;
		if (l[0] != '#') {
			char *space = strrchr(l, ' ');
			ck_assert_ptr_nonnull(space);
			*space = '\0';
		}
		lines = realloc(lines, (n + 1) * sizeof(*lines));
		lines[n++] = l;
	}
	qsort(lines, n, sizeof(*lines), cmp_str);
	char *text = NULL;
	size_t len = 0;
	FILE *mem = open_memstream(&text, &len);
	for (size_t i = 0; i < n; i++)
		fprintf(mem, "%s\n", lines[i]);
	fclose(mem);
	free(lines);
	free(copy);
	return text;
}

/* The tenant label of the one tenant that did I/O (this process's cgroup). */
static char *only_tenant(const struct test_mount *m)
{
	struct json_object *mount, *doc = ctl_test_stat(m->mnt, &mount), *tenants, *cg;
	ck_assert(json_object_object_get_ex(mount, "tenants", &tenants));
	ck_assert_uint_eq(json_object_array_length(tenants), 1);
	ck_assert(json_object_object_get_ex(json_object_array_get_idx(tenants, 0), "cgroup", &cg));
	const char *s = json_object_get_string(cg);
	char *name = strdup(s[0] ? s : "(default)");
	json_object_put(doc);
	return name;
}

/*
 * TCP sockets of process PID in STATE (0x0A listening, 0x01 established)
 * whose local port is PORT (0: any), IPv4 and IPv6. From /proc: a
 * connection still in the listen backlog has no descriptor, so it does not
 * count.
 */
static int daemon_tcp_sockets(pid_t pid, unsigned state, unsigned port)
{
	char dir[64];
	snprintf(dir, sizeof(dir), "/proc/%d/fd", (int)pid);
	DIR *d = opendir(dir);
	ck_assert_ptr_nonnull(d);
	unsigned long inodes[1024];
	size_t n = 0;
	for (struct dirent *e; (e = readdir(d)) && n < 1024;) {
		char path[512], target[64];
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		ssize_t len = readlink(path, target, sizeof(target) - 1);
		if (len <= 0)
			continue;
		target[len] = '\0';
		if (sscanf(target, "socket:[%lu]", &inodes[n]) == 1)
			n++;
	}
	closedir(d);
	int found = 0;
	static const char *const tables[] = {"/proc/net/tcp", "/proc/net/tcp6"};
	for (size_t t = 0; t < 2; t++) {
		FILE *f = fopen(tables[t], "re");
		if (!f)
			continue;
		char line[512];
		while (fgets(line, sizeof(line), f)) {
			/* sl local_address rem_address st ... uid timeout inode */
			char local[64];
			unsigned st;
			unsigned long inode;
			if (sscanf(line, " %*s %63s %*s %x %*s %*s %*s %*u %*u %lu", local, &st,
				   &inode) != 3)
				continue; /* the heading */
			const char *colon = strrchr(local, ':');
			if (st != state || !colon || (port && strtoul(colon + 1, NULL, 16) != port))
				continue;
			for (size_t i = 0; i < n; i++)
				found += inodes[i] == inode;
		}
		fclose(f);
	}
	return found;
}

static void mount_listening(struct test_mount *m, const char *listen)
{
	char text[256];
	snprintf(text, sizeof(text), "[metrics]\nlisten = %s\n", listen);
	write_conf(text);
	const char *args[] = {"-c", conf_path, NULL};
	test_mount_start(m, args);
}

START_TEST(metrics_over_http_match_stat_prometheus)
{
	unsigned port = free_port(AF_INET);
	ck_assert_uint_ne(port, 0);
	char listen[64];
	snprintf(listen, sizeof(listen), "127.0.0.1:%u", port);
	struct test_mount m;
	mount_listening(&m, listen);
	ck_assert_int_eq(daemon_tcp_sockets(m.daemon_pid, 0x0A, port), 1);
	ctl_test_write_direct(&m, "h", 6);
	char *tenant = only_tenant(&m);

	struct http_reply r = http_get(AF_INET, port, "GET", "/metrics");
	ck_assert_msg(r.status == 200, "GET /metrics: %.300s", r.text);
	char *type = header(&r, "Content-Type");
	ck_assert_ptr_nonnull(type);
	ck_assert_msg(strncmp(type, "text/plain; version=0.0.4", 25) == 0, "Content-Type: %s", type);
	free(type);
	char row[1024];
	snprintf(row, sizeof(row),
		 "\nfusesched_tenant_bytes_total{mount=\"%s\",tenant=\"%s\",op=\"write\"} %d\n", m.mnt,
		 tenant, 6 * 4096);
	ck_assert_msg(strstr(r.body, row), "no '%s' in:\n%s", row + 1, r.body);

	/* The same families and series as the textfile form, from the same printer. */
	int status;
	char *cli = ctl_test_capture(&status, "%s stat '%s' --prometheus", FUSESCHED_BIN, m.mnt);
	ck_assert_int_eq(status, 0);
	char *want = shape(cli), *got = shape(r.body);
	ck_assert_str_eq(got, want);
	ck_assert_ptr_nonnull(strstr(got, "# TYPE fusesched_tenant_ops_total counter\n"));
	free(want);
	free(got);
	free(cli);
	free(r.text);

	/* HEAD: the same head, no body. */
	r = http_get(AF_INET, port, "HEAD", "/metrics");
	ck_assert_int_eq(r.status, 200);
	ck_assert_str_eq(r.body, "");
	free(r.text);
	/* The query string does not matter (a scraper may add one). */
	r = http_get(AF_INET, port, "GET", "/metrics?x=1");
	ck_assert_int_eq(r.status, 200);
	free(r.text);
	static const char *const not_found[] = {"/", "/metric", "/metrics/", "/metrics.txt",
						"/../metrics", NULL};
	for (const char *const *p = not_found; *p; p++) {
		r = http_get(AF_INET, port, "GET", *p);
		ck_assert_msg(r.status == 404, "GET %s: %d", *p, r.status);
		free(r.text);
	}
	static const char *const methods[] = {"POST", "PUT", "DELETE", "OPTIONS", "PATCH", NULL};
	for (const char *const *p = methods; *p; p++) {
		r = http_get(AF_INET, port, *p, "/metrics");
		ck_assert_msg(r.status == 405, "%s /metrics: %d", *p, r.status);
		char *allow = header(&r, "Allow");
		ck_assert_ptr_nonnull(allow);
		ck_assert_ptr_nonnull(strstr(allow, "GET"));
		free(allow);
		free(r.text);
	}
	/* A GET that comes with a body is refused, the body unread. */
	r = http_raw(AF_INET, port, "GET /metrics HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\n"
				    "Connection: close\r\n\r\nhello");
	ck_assert_int_eq(r.status, 413);
	free(r.text);
	r = http_raw(AF_INET, port, "GET /metrics HTTP/1.1\r\nHost: localhost\r\n"
				    "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n5\r\nhello\r\n0\r\n\r\n");
	ck_assert_int_eq(r.status, 413);
	free(r.text);
	/* Garbage is not a request. */
	r = http_raw(AF_INET, port, "\x01\x02 nonsense\r\n\r\n");
	ck_assert_int_ge(r.status, 400);
	free(r.text);

	test_mount_require_clean_exit(test_mount_stop(&m));
	ck_assert_int_eq(tcp_connect(AF_INET, port), -ECONNREFUSED); /* gone with the mount */
	free(tenant);
}
END_TEST

static int reload_with(const struct test_mount *m, const char *text, char **out)
{
	return ctl_test_reload(m->mnt, conf_path, text, out);
}

/* stat's metrics_listen: "" for null. */
static void assert_stat_listen(const struct test_mount *m, const char *want)
{
	struct json_object *mount, *root = ctl_test_stat(m->mnt, &mount), *where;
	ck_assert(json_object_object_get_ex(mount, "metrics_listen", &where));
	ck_assert_str_eq(where ? json_object_get_string(where) : "", want);
	json_object_put(root);
}

static void assert_serves(unsigned port)
{
	struct http_reply r = http_get(AF_INET, port, "GET", "/metrics");
	ck_assert_msg(r.status == 200, "GET :%u/metrics: %.300s", port, r.text);
	ck_assert_ptr_nonnull(strstr(r.body, "fusesched_tenant_bytes_total{"));
	free(r.text);
}

/* A socket listening on 127.0.0.ADDR:PORT (PORT 0: any), its port in *port. */
static int hold_port(uint8_t last_octet, unsigned *port)
{
	struct sockaddr_in in = {.sin_family = AF_INET, .sin_port = htons((uint16_t)*port),
				 .sin_addr.s_addr = htonl(0x7f000000u | last_octet)};
	socklen_t len = sizeof(in);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&in, len), 0);
	ck_assert_int_eq(listen(fd, 4), 0);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&in, &len), 0);
	*port = ntohs(in.sin_port);
	return fd;
}

/*
 * A reload moves the listener without a new mount: the new address
 * serves and the old is closed; an address that cannot be bound fails the
 * reload, naming it, and the listener in force keeps serving; an empty
 * value closes it. stat says where it is.
 */
START_TEST(a_reload_moves_starts_and_stops_the_listener)
{
	unsigned first = free_port(AF_INET);
	char text[128], *out;
	snprintf(text, sizeof(text), "127.0.0.1:%u", first);
	struct test_mount m;
	mount_listening(&m, text);
	ctl_test_write_direct(&m, "r", 1);
	assert_serves(first);
	assert_stat_listen(&m, text);

	unsigned moved = free_port(AF_INET);
	ck_assert_uint_ne(moved, first);
	snprintf(text, sizeof(text), "[metrics]\nlisten = 127.0.0.1:%u\n", moved);
	ck_assert_msg(reload_with(&m, text, &out) == 0, "reload: %s", out);
	free(out);
	assert_serves(moved);
	ck_assert_int_eq(tcp_connect(AF_INET, first), -ECONNREFUSED);
	ck_assert_int_eq(daemon_tcp_sockets(m.daemon_pid, 0x0A, 0), 1);
	snprintf(text, sizeof(text), "127.0.0.1:%u", moved);
	assert_stat_listen(&m, text);

	/* Someone else listens there: refused, named, and the listener stays. */
	unsigned taken = 0;
	int holder = hold_port(1, &taken);
	snprintf(text, sizeof(text), "[metrics]\nlisten = 127.0.0.1:%u\n", taken);
	ck_assert_msg(reload_with(&m, text, &out) != 0, "reload onto a taken port: %s", out);
	char want[128];
	snprintf(want, sizeof(want), "[metrics] listen = 127.0.0.1:%u): cannot bind", taken);
	ck_assert_msg(strstr(out, want) && strstr(out, "Address already in use"), "%s", out);
	free(out);
	close(holder);
	assert_serves(moved);

	/* The same port on every address: bound only once the old one is closed. */
	snprintf(text, sizeof(text), "[metrics]\nlisten = 0.0.0.0:%u\n", moved);
	ck_assert_msg(reload_with(&m, text, &out) == 0, "reload: %s", out);
	free(out);
	assert_serves(moved);
	ck_assert_int_eq(daemon_tcp_sockets(m.daemon_pid, 0x0A, 0), 1);
	snprintf(text, sizeof(text), "0.0.0.0:%u", moved);
	assert_stat_listen(&m, text);

	/* ... and where another address of that port is taken, the one in force is opened again. */
	unsigned again = moved;
	snprintf(text, sizeof(text), "[metrics]\nlisten = 127.0.0.1:%u\n", moved);
	ck_assert_msg(reload_with(&m, text, &out) == 0, "reload: %s", out);
	free(out);
	holder = hold_port(2, &again);
	snprintf(text, sizeof(text), "[metrics]\nlisten = 0.0.0.0:%u\n", moved);
	ck_assert_msg(reload_with(&m, text, &out) != 0, "reload: %s", out);
	ck_assert_msg(strstr(out, "Address already in use"), "%s", out);
	free(out);
	close(holder);
	assert_serves(moved);
	snprintf(text, sizeof(text), "127.0.0.1:%u", moved);
	assert_stat_listen(&m, text);

	/* Empty: no listener. */
	ck_assert_msg(reload_with(&m, "[metrics]\nlisten =\n", &out) == 0, "reload: %s", out);
	free(out);
	ck_assert_int_eq(daemon_tcp_sockets(m.daemon_pid, 0x0A, 0), 0);
	ck_assert_int_eq(tcp_connect(AF_INET, moved), -ECONNREFUSED);
	assert_stat_listen(&m, "");
	/* And one started on a mount that had none. */
	snprintf(text, sizeof(text), "[metrics]\nlisten = %u\n", first);
	ck_assert_msg(reload_with(&m, text, &out) == 0, "reload: %s", out);
	free(out);
	assert_serves(first);
	test_mount_require_clean_exit(test_mount_stop(&m));
	ck_assert_int_eq(tcp_connect(AF_INET, first), -ECONNREFUSED); /* gone with the mount */
}
END_TEST

START_TEST(ipv6_loopback)
{
	unsigned port = free_port(AF_INET6);
	if (!port) {
		fprintf(stderr, "NOTE: ctl_http: no IPv6 loopback here: [::1] not checked\n");
		return;
	}
	char listen[64];
	snprintf(listen, sizeof(listen), "[::1]:%u", port);
	struct test_mount m;
	mount_listening(&m, listen);
	ctl_test_write_direct(&m, "v6", 2);
	struct http_reply r = http_get(AF_INET6, port, "GET", "/metrics");
	ck_assert_int_eq(r.status, 200);
	ck_assert_ptr_nonnull(strstr(r.body, "fusesched_tenant_bytes_total{"));
	free(r.text);
	/* [::1] only: not on IPv4. */
	ck_assert_int_lt(tcp_connect(AF_INET, port), 0);
	test_mount_require_clean_exit(test_mount_stop(&m));
}
END_TEST

START_TEST(no_listener_unless_configured)
{
	unsigned port = free_port(AF_INET);
	struct test_mount m;
	test_mount_start(&m, NULL);
	ctl_test_write_direct(&m, "n", 1);
	ck_assert_int_eq(daemon_tcp_sockets(m.daemon_pid, 0x0A, 0), 0);
	ck_assert_int_eq(tcp_connect(AF_INET, port), -ECONNREFUSED);
	test_mount_require_clean_exit(test_mount_stop(&m));

	/* An empty value is off too. */
	write_conf("[metrics]\nlisten =\n");
	const char *args[] = {"-c", conf_path, NULL};
	test_mount_start(&m, args);
	ck_assert_int_eq(daemon_tcp_sockets(m.daemon_pid, 0x0A, 0), 0);
	test_mount_require_clean_exit(test_mount_stop(&m));
}
END_TEST

/* `fusesched check-config` and `fusesched mount` on a config that says TEXT: both exit 2 with WANT. */
static void expect_refused(const char *text, const char *want)
{
	write_conf(text);
	int status;
	char *out = ctl_test_capture(&status, "%s check-config '%s' 2>&1", FUSESCHED_BIN, conf_path);
	ck_assert_msg(status == 2, "check-config exited %d: %s", status, out);
	ck_assert_msg(strstr(out, want), "check-config said '%s', not '%s'", out, want);
	free(out);
	struct test_mount d;
	test_mount_dirs(&d);
	out = ctl_test_capture(&status, "%s mount '%s' '%s' -f -c '%s' 2>&1", FUSESCHED_BIN,
			       d.backing, d.mnt, conf_path);
	ck_assert_msg(status == 2, "mount exited %d: %s", status, out);
	ck_assert_msg(strstr(out, want), "mount said '%s', not '%s'", out, want);
	free(out);
	ck_assert(!test_in_mountinfo(d.mnt));
	test_sh("rm -rf '%s'", d.root);
}

START_TEST(a_bad_listen_value_is_refused_at_its_line)
{
	char want[1024];
	snprintf(want, sizeof(want), "%s:4: listen: port must be 1..65535, got '70000'", conf_path);
	expect_refused("[scheduler]\npolicy = bfq\n[metrics]\nlisten = 127.0.0.1:70000\n", want);
	snprintf(want, sizeof(want), "%s:2: listen: 'metrics.example' is not a numeric IPv4 address",
		 conf_path);
	expect_refused("[metrics]\nlisten = metrics.example:9101\n", want);
	snprintf(want, sizeof(want), "%s:3: listen must be empty (no listener), PORT", conf_path);
	expect_refused("[metrics]\n; the port is missing\nlisten = [::1]\n", want);
}
END_TEST

START_TEST(an_address_in_use_stops_the_mount)
{
	/* Someone else listens there: the daemon says so and does not mount. */
	struct sockaddr_storage ss;
	socklen_t len = loopback(AF_INET, 0, &ss);
	int holder = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_eq(bind(holder, (struct sockaddr *)&ss, len), 0);
	ck_assert_int_eq(listen(holder, 4), 0);
	ck_assert_int_eq(getsockname(holder, (struct sockaddr *)&ss, &len), 0);
	unsigned port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
	char text[128], want[128];
	snprintf(text, sizeof(text), "[metrics]\nlisten = %u\n", port);
	snprintf(want, sizeof(want), "[metrics] listen = 127.0.0.1:%u): cannot bind", port);
	write_conf(text);
	struct test_mount d;
	test_mount_dirs(&d);
	int status;
	char *out = ctl_test_capture(&status, "%s mount '%s' '%s' -f -c '%s' 2>&1", FUSESCHED_BIN,
				     d.backing, d.mnt, conf_path);
	ck_assert_msg(status == 2, "mount exited %d: %s", status, out);
	ck_assert_msg(strstr(out, want) && strstr(out, "Address already in use"), "%s", out);
	free(out);
	ck_assert(!test_in_mountinfo(d.mnt));
	close(holder);
	test_sh("rm -rf '%s'", d.root);
}
END_TEST

/* Closed by the server (EOF or reset) within WAIT_MS, whatever it sent first. */
static bool closed_by_server(int fd)
{
	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (poll(&p, 1, WAIT_MS) != 1)
			return false;
		char buf[4096];
		ssize_t n = recv(fd, buf, sizeof(buf), 0);
		if (n <= 0)
			return true;
	}
}

START_TEST(idle_connections_beyond_the_limit_do_not_lock_out_a_scrape)
{
	unsigned port = free_port(AF_INET);
	char listen[64];
	snprintf(listen, sizeof(listen), "127.0.0.1:%u", port);
	struct test_mount m;
	mount_listening(&m, listen);
	/* More than the listener takes: half say nothing, half stop mid-request. */
	enum { IDLE = CTL_HTTP_MAX_CONNECTIONS + 8 };
	int idle[IDLE];
	for (int i = 0; i < IDLE; i++) {
		idle[i] = tcp_connect(AF_INET, port);
		ck_assert_msg(idle[i] >= 0, "connect %d: %s", i, strerror(-idle[i]));
		if (i % 2)
			send_all(idle[i], "GET /metrics HTTP/1.1\r\nHost: loc");
	}
	/* The listener holds its limit of them, no more: the rest wait in the backlog. */
	CTL_TEST_POLL(daemon_tcp_sockets(m.daemon_pid, 0x01, port) >= (int)CTL_HTTP_MAX_CONNECTIONS);
	ck_assert_int_eq(daemon_tcp_sockets(m.daemon_pid, 0x01, port), CTL_HTTP_MAX_CONNECTIONS);
	/* Meanwhile the mount and its control socket serve as ever. */
	ctl_test_write_direct(&m, "busy", 4);
	struct json_object *mount, *doc = ctl_test_stat(m.mnt, &mount);
	json_object_put(doc);
	int status;
	char *out = ctl_test_capture(&status, "%s stat '%s' --prometheus", FUSESCHED_BIN, m.mnt);
	ck_assert_int_eq(status, 0);
	free(out);

	/* A fresh scrape is answered once the idle ones time out. */
	struct http_reply r = http_get(AF_INET, port, "GET", "/metrics");
	ck_assert_int_eq(r.status, 200);
	ck_assert_ptr_nonnull(strstr(r.body, "fusesched_tenant_bytes_total{"));
	free(r.text);
	/* And the idle ones were dropped: none holds a slot for good. */
	for (int i = 0; i < IDLE; i++) {
		ck_assert_msg(closed_by_server(idle[i]), "idle connection %d still open", i);
		close(idle[i]);
	}
	r = http_get(AF_INET, port, "GET", "/metrics");
	ck_assert_int_eq(r.status, 200);
	free(r.text);
	test_mount_require_clean_exit(test_mount_stop(&m));
}
END_TEST

/* A build without libmicrohttpd: a config enabling the listener is refused, naming it. */
START_TEST(a_build_without_the_listener_refuses_to_enable_it)
{
	char want[1024];
	snprintf(want, sizeof(want),
		 "%s:3: [metrics] listen = 127.0.0.1:9101: this fusesched was built without the "
		 "metrics HTTP listener", conf_path);
	expect_refused("[metrics]\n\nlisten = 127.0.0.1:9101\n", want);
}
END_TEST

int main(void)
{
	test_require_root("ctl_http", "FUSE mounts");
	if (access("/dev/fuse", R_OK | W_OK) != 0) {
		fprintf(stderr, "SKIP: ctl_http: needs /dev/fuse\n");
		return 77;
	}
	Suite *s = suite_create("ctl_http");
	TCase *tc = tcase_create("http");
	tcase_add_unchecked_fixture(tc, leftovers_init, leftovers_cleanup);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, no_listener_unless_configured);
	if (ctl_http_available()) {
		tcase_add_test(tc, metrics_over_http_match_stat_prometheus);
		tcase_add_test(tc, a_reload_moves_starts_and_stops_the_listener);
		tcase_add_test(tc, ipv6_loopback);
		tcase_add_test(tc, a_bad_listen_value_is_refused_at_its_line);
		tcase_add_test(tc, an_address_in_use_stops_the_mount);
		tcase_add_test(tc, idle_connections_beyond_the_limit_do_not_lock_out_a_scrape);
	} else {
		tcase_add_test(tc, a_build_without_the_listener_refuses_to_enable_it);
	}
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_VERBOSE);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	if (failed)
		return 1;
	if (!ctl_http_available()) {
		fprintf(stderr, "SKIP: ctl_http: built without libmicrohttpd (the metrics HTTP listener "
			"is compiled out): only checked that enabling it is refused and that no "
			"listener runs\n");
		return 77;
	}
	return 0;
}
