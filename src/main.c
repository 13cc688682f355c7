/* Command line: mount | stat | reload | check-config | calibrate | version | help. */
#include "fusesched/calibrate.h"
#include "fusesched/config.h"
#include "fusesched/ctl.h"
#include "fusesched/daemon.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The daemon's own -o options, from the table their parser reads. */
static void print_mount_opts(FILE *out)
{
	for (const struct daemon_mount_opt *m = daemon_mount_opts; m->name; m++) {
		char usage[64];
		snprintf(usage, sizeof(usage), "%s%s-o %s%s%s", m->alias ? m->alias : "",
			 m->alias ? ", " : "", m->name, m->arg ? "=" : "", m->arg ? m->arg : "");
		fprintf(out, "  %-24s %s\n", usage, m->help);
	}
}

static void print_usage(FILE *out)
{
	fprintf(out,
		"usage:\n"
		"  fusesched mount BACKING MOUNTPOINT [-c FILE] [-o OPTS] [-f] [-d]\n"
		"  fusesched BACKING MOUNTPOINT [-o OPTS]     (mount.fuse / fstab form)\n"
		"  fusesched stat [MOUNTPOINT] [--json|--prometheus] [--watch SECONDS] [--sort COLUMN]\n"
		"  fusesched reload [MOUNTPOINT]               (re-read the config file; also SIGHUP)\n"
		"  fusesched check-config FILE                 (validate, print effective settings)\n"
		"  fusesched calibrate BACKING [--seconds S]   (measure the store: read_cost, write_cost)\n"
		"  fusesched version\n"
		"  fusesched --help\n"
		"\n"
		"mount options:\n");
	print_mount_opts(out);
	fprintf(out,
		"  -d                       trace every FUSE request (implies -f)\n"
		"  -o OPT                   other options go to FUSE (e.g. ro)\n"
		"\n"
		"stat options (no MOUNTPOINT: every fusesched mount):\n"
		"  --json                   JSON document (schema in README.md)\n"
		"  --prometheus             text exposition format (node_exporter textfile collector)\n"
		"  --watch SECONDS          redraw every SECONDS until Ctrl-C\n"
		"  --sort COLUMN            tenant (default), weight, target, share, share-total,\n"
		"                           read, write, iops, p50, p99, max, queued, inflight,\n"
		"                           idle, idle-time, injected, expired\n"
		"\n"
		"Always mounted allow_other,default_permissions: the kernel checks\n"
		"permissions and POSIX ACLs; objects are created as the calling user,\n"
		"and data is written as the user who opened the file.\n"
		"Unmount with 'fusermount3 -u MOUNTPOINT' or 'umount MOUNTPOINT'.\n");
}

static int usage_error(const char *what)
{
	fprintf(stderr, "fusesched: %s\n", what);
	fprintf(stderr, "Try 'fusesched --help'.\n");
	return 2;
}

/* Parses "BACKING MOUNTPOINT" and options in any order. */
static int cmd_mount(int argc, char **argv)
{
	struct daemon_options o;
	memset(&o, 0, sizeof(o));
	const char *positional[2];
	int npos = 0;
	char err[256];
	for (int i = 0; i < argc; i++) {
		const char *a = argv[i];
		if (strcmp(a, "-f") == 0) {
			o.foreground = true;
		} else if (strcmp(a, "-d") == 0) {
			o.debug = true;
			o.foreground = true;
		} else if (strcmp(a, "-c") == 0 || strcmp(a, "-o") == 0) {
			if (i + 1 >= argc) {
				snprintf(err, sizeof(err), "option '%s' needs an argument", a);
				return usage_error(err);
			}
			const char *v = argv[++i];
			if (a[1] == 'c') {
				if (strlen(v) >= sizeof(o.config_path))
					return usage_error("config file name too long");
				strcpy(o.config_path, v);
			} else if (daemon_parse_mount_opts(&o, v, err, sizeof(err)) < 0) {
				return usage_error(err);
			}
		} else if (strncmp(a, "-o", 2) == 0 && a[2]) {
			if (daemon_parse_mount_opts(&o, a + 2, err, sizeof(err)) < 0)
				return usage_error(err);
		} else if (a[0] == '-' && a[1]) {
			snprintf(err, sizeof(err), "unknown option '%s'", a);
			return usage_error(err);
		} else if (npos < 2) {
			positional[npos++] = a;
		} else {
			snprintf(err, sizeof(err), "unexpected argument '%s'", a);
			return usage_error(err);
		}
	}
	if (npos < 2)
		return usage_error("mount needs BACKING and MOUNTPOINT");
	o.backing_path = positional[0];
	o.mountpoint = positional[1];
	return daemon_run(&o);
}

/* Exit 0 and the effective settings, or 2 and FILE:LINE: what is wrong. */
static int cmd_check_config(int argc, char **argv)
{
	if (argc != 1)
		return usage_error("check-config needs exactly one FILE");
	struct config *cfg = NULL;
	char err[512];
	if (config_load_file(argv[0], &cfg, err, sizeof(err)) < 0) {
		fprintf(stderr, "fusesched: %s\n", err);
		return 2;
	}
	int r = config_print(cfg, stdout);
	config_free(cfg);
	return r < 0 ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		print_usage(stderr);
		return 2;
	}
	const char *cmd = argv[1];
	if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
		print_usage(stdout);
		return 0;
	}
	if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0 || strcmp(cmd, "-V") == 0) {
		printf("fusesched %s\n", FUSESCHED_VERSION);
		return 0;
	}
	if (strcmp(cmd, "check-config") == 0)
		return cmd_check_config(argc - 2, argv + 2);
	if (strcmp(cmd, "calibrate") == 0)
		return calibrate_run(argc - 2, argv + 2);
	if (strcmp(cmd, "stat") == 0)
		return ctl_run_stat(argc - 2, argv + 2);
	if (strcmp(cmd, "reload") == 0)
		return ctl_run_reload(argc - 2, argv + 2);
	if (strcmp(cmd, "mount") == 0)
		return cmd_mount(argc - 2, argv + 2);
	/* mount.fuse calls "fusesched BACKING MOUNTPOINT -o OPTS". */
	if (cmd[0] == '/' || cmd[0] == '.' || strchr(cmd, '/'))
		return cmd_mount(argc - 1, argv + 1);
	char err[256];
	snprintf(err, sizeof(err), "unknown command '%s'", cmd);
	return usage_error(err);
}
