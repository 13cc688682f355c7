/*
 * The metrics HTTP listener: libmicrohttpd in its own thread, serving
 * GET /metrics from the control server's stat reply through the one
 * Prometheus printer (client.c). Compiled out without libmicrohttpd.
 */
#include "fusesched/ctl.h"
#include "ctl_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef FUSESCHED_HAVE_MICROHTTPD

#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <unistd.h>

/* The text exposition format's media type, as Prometheus asks for it. */
#define CTL_HTTP_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"
/* Per connection: the request line and headers; a longer head gets 431 from libmicrohttpd. */
#define CTL_HTTP_MEMORY_LIMIT (16u * 1024u)
#define CTL_HTTP_BACKLOG 64

struct ctl_http {
	struct ctl_server *server;
	int listen_fd;              /* ours until the daemon starts, then libmicrohttpd closes it */
	struct MHD_Daemon *daemon;
	char where[NI_MAXHOST + NI_MAXSERV + 4];  /* 127.0.0.1:9101, [::1]:9101 */
};

bool ctl_http_available(void)
{
	return true;
}

static void format_addr(const struct sockaddr *addr, socklen_t len, char *out, size_t out_bytes)
{
	char host[NI_MAXHOST], port[NI_MAXSERV];
	if (getnameinfo(addr, len, host, sizeof(host), port, sizeof(port),
			NI_NUMERICHOST | NI_NUMERICSERV) != 0)
		snprintf(out, out_bytes, "?");
	else
		snprintf(out, out_bytes, addr->sa_family == AF_INET6 ? "[%s]:%s" : "%s:%s", host, port);
}

static enum MHD_Result reply_text(struct MHD_Connection *c, unsigned status, const char *text,
				  const char *allow)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(strlen(text), (void *)text,
								 MHD_RESPMEM_PERSISTENT);
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
	if (allow)
		MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, allow);
	enum MHD_Result res = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return res;
}

/* A Content-Length above 0 or any Transfer-Encoding: the client means to send a body. */
static bool announces_body(struct MHD_Connection *c)
{
	const char *len = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
						      MHD_HTTP_HEADER_CONTENT_LENGTH);
	return MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING) ||
	       (len && strspn(len, "0") != strlen(len));
}

/* The exposition of this mount, as `fusesched stat MOUNTPOINT --prometheus` prints it. */
static enum MHD_Result reply_metrics(struct ctl_http *h, struct MHD_Connection *c)
{
	struct json_object *reply = ctl_server_stat_reply(h->server), *ok;
	char *text = NULL;
	size_t len = 0;
	FILE *out = NULL;
	if (reply && json_object_object_get_ex(reply, "ok", &ok) && json_object_get_boolean(ok))
		out = open_memstream(&text, &len);
	if (out) {
		ctl_print_prometheus(out, &reply, 1);
		if (fclose(out) != 0) {
			free(text);
			text = NULL;
		}
	}
	json_object_put(reply);
	if (!text)
		return reply_text(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n", NULL);
	/* libmicrohttpd frees TEXT with free() once it is sent. */
	struct MHD_Response *r = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(text);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, CTL_HTTP_CONTENT_TYPE);
	MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	enum MHD_Result res = MHD_queue_response(c, MHD_HTTP_OK, r);
	MHD_destroy_response(r);
	return res;
}

/*
 * Called once the request's head is in, before any body: every request is
 * answered on this first call, so a body is never read (libmicrohttpd
 * closes the connection after answering one that announced a body).
 */
static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
				  const char *method, const char *version, const char *upload_data,
				  size_t *upload_data_size, void **req_cls)
{
	(void)version;
	(void)upload_data;
	(void)req_cls;
	if (strcmp(url, "/metrics") != 0)
		return reply_text(c, MHD_HTTP_NOT_FOUND, "not found: the metrics are at /metrics\n",
				  NULL);
	if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
		return reply_text(c, MHD_HTTP_METHOD_NOT_ALLOWED,
				  "method not allowed: GET /metrics\n", "GET, HEAD");
	if (*upload_data_size || announces_body(c))
		return reply_text(c, MHD_HTTP_CONTENT_TOO_LARGE, "GET /metrics takes no body\n", NULL);
	return reply_metrics(cls, c);
}

static int fail(char *err, size_t err_bytes, const struct ctl_http *h, int rc, const char *what)
{
	const char *hint = rc == -EADDRINUSE	? " (another process listens there?)"
			   : rc == -EADDRNOTAVAIL ? " (not an address of this host)"
			   : rc == -EAFNOSUPPORT ? " (no IPv6 on this host?)"
						 : "";
	snprintf(err, err_bytes, "metrics listener ([metrics] listen = %s): %s: %s%s", h->where, what,
		 strerror(-rc), hint);
	return rc;
}

int ctl_http_new(struct ctl_server *server, const struct sockaddr *addr, socklen_t addr_len,
		 struct ctl_http **out, char *err, size_t err_bytes)
{
	*out = NULL;
	struct ctl_http *h = calloc(1, sizeof(*h));
	if (!h) {
		snprintf(err, err_bytes, "metrics listener: out of memory");
		return -ENOMEM;
	}
	h->server = server;
	format_addr(addr, addr_len, h->where, sizeof(h->where));
	int r = 0, one = 1;
	h->listen_fd = socket(addr->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (h->listen_fd < 0) {
		r = fail(err, err_bytes, h, -errno, "socket");
		goto out_free;
	}
	/* A mount right after an unmount binds despite the old connections in TIME_WAIT. */
	setsockopt(h->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	/* [::]:PORT means IPv6 only: what the file says, whatever the sysctl. */
	if (addr->sa_family == AF_INET6)
		setsockopt(h->listen_fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	if (bind(h->listen_fd, addr, addr_len) < 0) {
		r = fail(err, err_bytes, h, -errno, "cannot bind");
		goto out_close;
	}
	if (listen(h->listen_fd, CTL_HTTP_BACKLOG) < 0) {
		r = fail(err, err_bytes, h, -errno, "cannot listen");
		goto out_close;
	}
	*out = h;
	return 0;

out_close:
	close(h->listen_fd);
out_free:
	free(h);
	return r;
}

int ctl_http_start(struct ctl_http *h, char *err, size_t err_bytes)
{
	/*
	 * One thread polls every connection (none blocks it); at the connection
	 * limit it stops accepting (the inter-thread channel tells it when a
	 * connection closed), so extra clients wait in the backlog, not in memory.
	 */
	h->daemon = MHD_start_daemon(
		MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ITC, 0, NULL, NULL,
		on_request, h,
		MHD_OPTION_LISTEN_SOCKET, (MHD_socket)h->listen_fd,
		MHD_OPTION_CONNECTION_LIMIT, (unsigned int)CTL_HTTP_MAX_CONNECTIONS,
		MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)CTL_HTTP_TIMEOUT_S,
		MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)CTL_HTTP_MEMORY_LIMIT,
		MHD_OPTION_STRICT_FOR_CLIENT, (int)1,
		MHD_OPTION_END);
	if (!h->daemon)
		return fail(err, err_bytes, h, -EIO, "libmicrohttpd would not start");
	h->listen_fd = -1; /* the daemon's now: MHD_stop_daemon closes it */
	return 0;
}

const char *ctl_http_where(const struct ctl_http *h)
{
	return h->where;
}

void ctl_http_free(struct ctl_http *h)
{
	if (!h)
		return;
	if (h->daemon)
		MHD_stop_daemon(h->daemon);
	if (h->listen_fd >= 0)
		close(h->listen_fd);
	free(h);
}

#else /* !FUSESCHED_HAVE_MICROHTTPD */

bool ctl_http_available(void)
{
	return false;
}

int ctl_http_new(struct ctl_server *server, const struct sockaddr *addr, socklen_t addr_len,
		 struct ctl_http **out, char *err, size_t err_bytes)
{
	(void)server;
	(void)addr;
	(void)addr_len;
	*out = NULL;
	snprintf(err, err_bytes,
		 "[metrics] listen: this fusesched was built without the metrics HTTP listener "
		 "(libmicrohttpd was missing)");
	return -ENOTSUP;
}

int ctl_http_start(struct ctl_http *h, char *err, size_t err_bytes)
{
	(void)h;
	snprintf(err, err_bytes, "metrics listener: not built");
	return -ENOTSUP;
}

const char *ctl_http_where(const struct ctl_http *h)
{
	(void)h;
	return "";
}

void ctl_http_free(struct ctl_http *h)
{
	(void)h;
}

#endif
