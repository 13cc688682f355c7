/*
 * The control socket: one server thread per mount answers `fusesched stat`,
 * `fusesched reload` and `version` over a Unix socket, and the client side
 * of those commands.
 *
 * Protocol: newline-delimited JSON, one request per line, one reply line
 * per request, in order.
 *   {"cmd":"stat"}     -> {"ok":true, "mount":..., "tenants":[...], ...}
 *   {"cmd":"reload"}   -> {"ok":true, "config":..., "message":...}
 *   {"cmd":"version"}  -> {"ok":true, "version":..., "pid":...}
 *   anything else      -> {"ok":false, "error":"..."}
 * README.md documents the stat schema.
 *
 * The server only reads stats and tenant descriptions; it never waits for
 * the engine.
 */
#ifndef FUSESCHED_CTL_H
#define FUSESCHED_CTL_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>
#include <sys/socket.h>

struct stats;
struct tenant_table;

/* Longest request line; a longer one gets an error and the connection is closed. */
#define CTL_REQUEST_MAX_BYTES (64u * 1024u)
/* Directory of the derived ("auto") socket paths. */
#define CTL_SOCKET_DIR "/run/fusesched"

/*
 * The auto socket path of MOUNTPOINT (absolute, as in /proc/self/mountinfo):
 * CTL_SOCKET_DIR/NAME.sock where NAME escapes the path like systemd-escape
 * --path ('/' -> '-', other bytes outside [A-Za-z0-9_.:] -> \xNN), so
 * distinct mountpoints get distinct names; a name too long for a socket
 * address is cut and suffixed with a hash of the whole path.
 * Returns 0, or -EINVAL for a relative path, -ENAMETOOLONG if OUT is too small.
 */
int ctl_socket_path_for_mount(const char *mountpoint, char *out, size_t out_bytes);

enum ctl_command {
	CTL_CMD_STAT,
	CTL_CMD_RELOAD,
	CTL_CMD_VERSION,
};

/*
 * Parses one request line (without its newline): the enum ctl_command it
 * asks for, or -EINVAL/-ENOMEM with the message for the client in err.
 */
int ctl_request_parse(const char *line, size_t len, char *err, size_t err_bytes);

/* What a reload did, filled by the daemon's callback. */
struct ctl_reload_result {
	char config_path[4096];
	char error[1024];       /* when the callback fails: FILE:LINE: message */
};

/* Returns 0, or a negative errno with res->error set; the running config then stays. */
typedef int (*ctl_reload_fn)(void *ctx, struct ctl_reload_result *res);

struct ctl_server_params {
	const char *mountpoint;       /* absolute */
	const char *backing;          /* absolute */
	const char *socket_path;      /* NULL: ctl_socket_path_for_mount(mountpoint) */
	const char *group;            /* NULL: mode 0600; else 0660 owned by this group (name or gid) */
	const char *config_path;      /* "" or NULL: built-in defaults */
	struct stats *stats;          /* borrowed: outlive the server */
	struct tenant_table *tenants;
	ctl_reload_fn reload;         /* also run on reload_signal */
	void *reload_ctx;
	/*
	 * 0, or a signal (SIGHUP) that triggers a reload. The caller blocks it in
	 * every thread before starting any; the server reads it from a signalfd.
	 */
	int reload_signal;
};

struct ctl_server;

/*
 * Creates the socket (and CTL_SOCKET_DIR for an auto path) and listens.
 * A socket left by a dead daemon is replaced; one a live daemon answers on
 * is not: -EADDRINUSE. Call before any thread starts (the socket is created
 * under a temporary umask). Returns 0 or a negative errno with a message.
 */
int ctl_server_new(const struct ctl_server_params *p, struct ctl_server **out, char *err,
		   size_t err_bytes);
/* Starts the server thread (after daemonizing: threads do not survive fork). */
int ctl_server_start(struct ctl_server *s);
/*
 * Stops and joins the thread; clients still connected are dropped. The
 * socket is closed and removed (if still ours) at once, so a daemon mounted
 * again while this one drains can take it.
 */
void ctl_server_stop(struct ctl_server *s);
/*
 * Removes the socket's name (and its link) if still ours, stopping
 * nothing: for a daemon that ends at once without its stop's steps
 * (stop_guard.h). Any thread.
 */
void ctl_server_unlink_socket(struct ctl_server *s);
/* Stops the server if it runs, removes the socket if still ours, frees. */
void ctl_server_free(struct ctl_server *s);
const char *ctl_server_socket_path(const struct ctl_server *s);
/*
 * A reload's [control] group (NULL: none): the socket becomes 0660 owned
 * by that group, or 0600 owned by the daemon's group again. Connections
 * already open stay. Returns 0, or a negative errno with a message: an
 * unknown group, or a socket that is no longer this server's.
 */
int ctl_server_set_group(struct ctl_server *s, const char *group, char *err, size_t err_bytes);
/*
 * A reload's [control] socket (NULL: auto) and group, from the server's
 * own thread (the reload callback): at a new path a socket is made as at
 * mount (ctl_server_new) and listened on before the old one is closed and
 * removed, and the auto path links to a configured one; the same path
 * only takes the group (ctl_server_set_group). Connections already open
 * stay. Returns 0, or a negative errno with a message, the old socket
 * kept as it was.
 */
int ctl_server_set_socket(struct ctl_server *s, const char *socket_path, const char *group,
			  char *err, size_t err_bytes);
/* Where the metrics listener serves (ctl_http_where; NULL: none), for stat. */
void ctl_server_set_metrics_listen(struct ctl_server *s, const char *where);

/*
 * The metrics HTTP listener ([metrics] listen), libmicrohttpd's: GET (or
 * HEAD) /metrics answers this mount's Prometheus text exposition, printed
 * by ctl_print_prometheus from the same stat reply the control socket
 * gives `fusesched stat --prometheus`. Any other path: 404; another method
 * on /metrics: 405; a request with a body: 413. It runs in its own thread,
 * takes at most CTL_HTTP_MAX_CONNECTIONS connections (more wait in the
 * listen backlog until one closes) and drops one idle for
 * CTL_HTTP_TIMEOUT_S; its clients never reach the control thread or the
 * engine (a reply only takes the samples' lock for a moment).
 */
#define CTL_HTTP_MAX_CONNECTIONS 16u
#define CTL_HTTP_TIMEOUT_S 5u

struct ctl_http;

/* Whether this build has the listener (libmicrohttpd at build time). */
bool ctl_http_available(void);
/*
 * Binds and listens on ADDR (a sockaddr_in or sockaddr_in6), before
 * daemonizing, like ctl_server_new: a bind error stops the mount. It serves
 * SERVER's stat replies once started. Returns 0, or a negative errno with a
 * message naming the address: -ENOTSUP in a build without the listener.
 */
int ctl_http_new(struct ctl_server *server, const struct sockaddr *addr, socklen_t addr_len,
		 struct ctl_http **out, char *err, size_t err_bytes);
/* Starts its thread (after daemonizing). Returns 0 or a negative errno with a message. */
int ctl_http_start(struct ctl_http *h, char *err, size_t err_bytes);
/* The address it listens on, as 127.0.0.1:9101 or [::1]:9101. */
const char *ctl_http_where(const struct ctl_http *h);
/* Stops serving, closes the socket (connections are dropped) and frees; NULL is fine. */
void ctl_http_free(struct ctl_http *h);

/* `fusesched stat ...` and `fusesched reload ...` (arguments after the command). */
int ctl_run_stat(int argc, char **argv);
int ctl_run_reload(int argc, char **argv);

#endif
