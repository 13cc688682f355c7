/* Pure cgroup helpers: /proc/<pid>/cgroup, mountinfo, rules, weight files. */
#include "fusesched/tenant.h"
#include "fusesched/mountinfo.h"

#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tenant_internal.h"

static const char deleted_suffix[] = " (deleted)";

/* True if the comma-separated LIST of LEN bytes holds the token WORD. */
static bool list_has(const char *list, size_t len, const char *word)
{
	size_t wlen = strlen(word);
	const char *end = list + len;

	while (list < end) {
		const char *comma = memchr(list, ',', (size_t)(end - list));
		size_t tlen = (size_t)((comma ? comma : end) - list);

		if (tlen == wlen && memcmp(list, word, wlen) == 0)
			return true;
		list += tlen + 1;
	}
	return false;
}

/* Each line is "ID:CONTROLLERS:PATH"; PATH is the rest of the line and may
 * hold ':' and spaces.  v2 is "0::PATH"; a v1 hierarchy lists its
 * controllers ("blkio", "cpu,cpuacct") or a name ("name=systemd"). */
int tenant_parse_proc_cgroup(const char *text, size_t len,
			     struct tenant_cgroup_paths *out)
{
	const char *p = text, *end = text + len;

	memset(out, 0, sizeof(*out));
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *eol = nl ? nl : end;
		const char *c1, *c2, *path;
		size_t path_len;
		bool deleted = false;

		if (eol == p) {
			p = eol + 1;
			continue;
		}
		c1 = memchr(p, ':', (size_t)(eol - p));
		c2 = c1 ? memchr(c1 + 1, ':', (size_t)(eol - c1 - 1)) : NULL;
		if (!c2)
			return -EINVAL;
		path = c2 + 1;
		path_len = (size_t)(eol - path);
		if (path_len >= sizeof(deleted_suffix) - 1 &&
		    memcmp(eol - (sizeof(deleted_suffix) - 1), deleted_suffix,
			   sizeof(deleted_suffix) - 1) == 0) {
			path_len -= sizeof(deleted_suffix) - 1;
			deleted = true;
		}
		if (c1 - p == 1 && *p == '0' && c2 == c1 + 1) {
			out->v2 = path;
			out->v2_len = path_len;
			out->v2_deleted = deleted;
		} else if (!out->blkio &&
			   list_has(c1 + 1, (size_t)(c2 - c1 - 1), "blkio")) {
			out->blkio = path;
			out->blkio_len = path_len;
			out->blkio_deleted = deleted;
		}
		p = eol + 1;
	}
	return 0;
}

int tenant_select_key(const struct tenant_cgroup_paths *paths,
		      enum config_hierarchy mode, const char **key,
		      size_t *key_len)
{
	bool v2_root = paths->v2 && paths->v2_len == 1 && paths->v2[0] == '/';

	switch (mode) {
	case CONFIG_HIERARCHY_AUTO:
		/* On hybrid hosts most processes sit in the v2 root and only
		 * their v1 blkio path tells containers apart. */
		if (paths->v2 && !v2_root)
			break;
		if (paths->blkio)
			goto blkio;
		if (paths->v2)
			break;
		return -ENOENT;
	case CONFIG_HIERARCHY_V2:
		if (!paths->v2)
			return -ENOENT;
		break;
	case CONFIG_HIERARCHY_BLKIO:
		if (!paths->blkio)
			return -ENOENT;
		goto blkio;
	}
	*key = paths->v2;
	*key_len = paths->v2_len;
	return TENANT_HIER_V2;
blkio:
	*key = paths->blkio;
	*key_len = paths->blkio_len;
	return TENANT_HIER_BLKIO;
}

/* Splits the next blank-separated field of [*p, end). */
static bool next_field(const char **p, const char *end, const char **field,
		       size_t *len)
{
	const char *s = *p;

	while (s < end && *s == ' ')
		s++;
	if (s == end)
		return false;
	*field = s;
	while (s < end && *s != ' ')
		s++;
	*len = (size_t)(s - *field);
	*p = s;
	return true;
}

/* "36 25 0:32 / /sys/fs/cgroup/blkio rw,relatime shared:9 - cgroup cgroup rw,blkio" */
void tenant_parse_mountinfo(const char *text, size_t len,
			    struct tenant_cgroup_roots *out)
{
	const char *p = text, *end = text + len;

	memset(out, 0, sizeof(*out));
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *eol = nl ? nl : end, *q = p;
		const char *f[5], *type = NULL, *src, *opts = NULL, *sep;
		size_t fl[5], type_len = 0, src_len, opts_len = 0;
		bool ok = true;

		for (int i = 0; i < 5 && ok; i++)
			ok = next_field(&q, eol, &f[i], &fl[i]);
		/* The text is not NUL-terminated: search only this line. */
		sep = ok ? memmem(q, (size_t)(eol - q), " - ", 3) : NULL;
		if (sep && sep < eol) {
			q = sep + 3;
			ok = next_field(&q, eol, &type, &type_len) &&
			     next_field(&q, eol, &src, &src_len) &&
			     next_field(&q, eol, &opts, &opts_len);
		} else {
			ok = false;
		}
		/* only mounts of a hierarchy's root map cgroup paths 1:1 */
		if (ok && fl[3] == 1 && f[3][0] == '/') {
			if (type_len == 7 && memcmp(type, "cgroup2", 7) == 0 &&
			    !out->v2[0])
				mountinfo_unescape(out->v2, sizeof(out->v2), f[4],
						   fl[4]);
			else if (type_len == 6 && memcmp(type, "cgroup", 6) == 0 &&
				 !out->blkio[0] && list_has(opts, opts_len, "blkio"))
				mountinfo_unescape(out->blkio, sizeof(out->blkio),
						   f[4], fl[4]);
		}
		p = eol + 1;
	}
}

/* Copies the components of absolute PATH into BUF, each NUL-terminated ("/"
 * has none, "/a/b" is "a\0b\0").  Returns their end, or NULL if PATH is
 * not absolute or BUF too small. */
static char *split_components(const char *path, char *buf, size_t cap)
{
	size_t len;

	if (*path++ != '/' || (len = strlen(path)) >= cap)
		return NULL;
	for (size_t i = 0; i < len; i++)
		buf[i] = path[i] == '/' ? '\0' : path[i];
	buf[len] = '\0';
	return buf + (len ? len + 1 : 0);
}

static const char *next_component(const char *c)
{
	return c + strlen(c) + 1;
}

static bool is_double_star(const char *c)
{
	return strcmp(c, "**") == 0;
}

/* Components [P, P_END) against [S, S_END): wildcard matching with "**" as
 * the star over whole components and fnmatch for each other one.  Only the
 * last "**" seen needs backtracking, as with '*' over characters. */
static bool match_components(const char *p, const char *p_end, const char *s,
			     const char *s_end)
{
	const char *star_p = NULL, *star_s = NULL;

	while (s < s_end) {
		if (p < p_end && is_double_star(p)) {
			if (next_component(p) == p_end)
				return true;	/* trailing: the rest, not nothing */
			star_p = p = next_component(p);
			star_s = s;
		} else if (p < p_end && fnmatch(p, s, 0) == 0) {
			p = next_component(p);
			s = next_component(s);
		} else if (star_p) {
			p = star_p;
			s = star_s = next_component(star_s);
		} else {
			return false;
		}
	}
	/* the path is used up: only inner "**" may be left, matching nothing */
	while (p < p_end && is_double_star(p) && next_component(p) != p_end)
		p = next_component(p);
	return p == p_end;
}

int tenant_match_rule(const struct config_group_rule *rules, size_t count,
		      const char *path)
{
	char comps[TENANT_PATH_MAX], pat[CONFIG_LINE_MAX];
	const char *comps_end = NULL, *pat_end;

	for (size_t i = 0; i < count; i++) {
		if (strcmp(rules[i].pattern, path) == 0)
			return (int)i;
		/* split the path once, and only when a rule needs it */
		if (!comps_end &&
		    !(comps_end = split_components(path, comps, sizeof(comps))))
			return -1;
		pat_end = split_components(rules[i].pattern, pat, sizeof(pat));
		if (pat_end && match_components(pat, pat_end, comps, comps_end))
			return (int)i;
	}
	return -1;
}

/* Kernel defaults of each file: a cgroup nobody configured shows them, and
 * they must not override default_weight (every blkio cgroup here has a
 * blkio.bfq.weight of 100 whether or not anyone set it). */
static const struct {
	const char *name;
	long min, max, kernel_default;
} weight_files[] = {
	[TENANT_WEIGHT_IO_BFQ] = { "io.bfq.weight", 1, 1000, 100 },
	[TENANT_WEIGHT_IO] = { "io.weight", 1, 10000, 100 },
	[TENANT_WEIGHT_BLKIO_BFQ] = { "blkio.bfq.weight", 1, 1000, 100 },
	[TENANT_WEIGHT_BLKIO] = { "blkio.weight", 10, 1000, 500 },
};

/* Parses "N" or "default N"; per-device "MAJ:MIN N" lines are skipped.
 * Returns the raw value or -EINVAL. */
static long parse_weight_value(const char *text, long min, long max)
{
	const char *line = text;

	while (*line) {
		const char *p = line, *nl = strchr(line, '\n');
		char *end;
		long v;

		if (strncmp(p, "default ", 8) == 0)
			p += 8;
		if (*p >= '0' && *p <= '9') {
			v = strtol(p, &end, 10);
			if (*end == '\0' || *end == '\n')
				return v >= min && v <= max ? v : -EINVAL;
		}
		if (!nl)
			break;
		line = nl + 1;
	}
	return -EINVAL;
}

int tenant_parse_weight_file(enum tenant_weight_file kind, const char *text)
{
	long v = parse_weight_value(text, weight_files[kind].min,
				    weight_files[kind].max);

	if (v < 0 || kind != TENANT_WEIGHT_IO)
		return (int)v;
	/* io.weight 1..10000 -> 10..1000, the inverse of runc's blkio-weight
	 * conversion, so `docker run --blkio-weight 300` reads back as 300. */
	return (int)(10 + ((v - 1) * 990 + 4999) / 9999);
}

ssize_t tenant_read_small_file(const char *path, char *buf, size_t cap)
{
	ssize_t total = 0, n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	while ((size_t)total + 1 < cap &&
	       (n = read(fd, buf + total, cap - 1 - (size_t)total)) != 0) {
		if (n < 0) {
			if (errno == EINTR)
				continue;
			total = -errno;
			break;
		}
		total += n;
	}
	close(fd);
	if (total >= 0)
		buf[total] = '\0';
	return total;
}

/* The owner of ROOT's cgroup PATH (of LEN bytes; the root itself for 0),
 * or (uid_t)-1 if it cannot be seen. */
static uid_t dir_owner(const char *root, const char *path, size_t len)
{
	char dir[2 * TENANT_PATH_MAX];
	struct stat st;

	snprintf(dir, sizeof(dir), "%s%.*s", root, (int)len, path);
	return stat(dir, &st) == 0 ? st.st_uid : (uid_t)-1;
}

/* The length of PATH's parent ("/a" -> 0, the root). */
static size_t parent_path_len(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? (size_t)(slash - path) : 0;
}

/*
 * Whose weight a file is to set.  A delegated subtree (systemd's
 * Delegate=, a rootless container's cgroup) is a directory given to a user
 * with its process list; the files of the cgroups the user makes below it
 * are the user's, the delegated cgroup's own weight file stays root's.  A
 * weight file another user owns is honoured only where that user also owns
 * the parent, dividing a share it was given; on the delegated cgroup
 * itself it would let the user raise its own share.
 */
static bool weight_file_trusted(const char *root, const char *cgroup,
				const char *file)
{
	struct stat st;

	if (stat(file, &st) != 0)
		return false;
	if (st.st_uid == 0)
		return true;
	return strcmp(cgroup, "/") != 0 &&
	       dir_owner(root, cgroup, parent_path_len(cgroup)) == st.st_uid;
}

bool tenant_cgroup_delegated(const struct tenant_cgroup_roots *roots,
			     enum tenant_hierarchy_id hier, const char *path)
{
	const char *root = hier == TENANT_HIER_V2 ? roots->v2 : roots->blkio;
	uid_t owner;

	if (!root[0] || strcmp(path, "/") == 0)
		return false;
	owner = dir_owner(root, path, strlen(path));
	return owner != 0 && owner != (uid_t)-1 &&
	       dir_owner(root, path, parent_path_len(path)) != owner;
}

size_t tenant_cgroup_delegation_len(const struct tenant_cgroup_roots *roots,
				    enum tenant_hierarchy_id hier,
				    const char *path)
{
	char ancestor[TENANT_PATH_MAX];
	size_t len = strlen(path);

	if (len >= sizeof(ancestor))
		return 0;
	memcpy(ancestor, path, len + 1);
	while ((len = parent_path_len(ancestor)) > 0) {
		ancestor[len] = '\0';
		if (tenant_cgroup_delegated(roots, hier, ancestor))
			return len;
	}
	return 0;
}

static int read_weight(const char *root, const char *cgroup,
		       enum tenant_weight_file kind)
{
	char path[2 * TENANT_PATH_MAX], text[256];
	int v;

	if (!root[0] || !cgroup)
		return -ENOENT;
	snprintf(path, sizeof(path), "%s%s/%s", root,
		 strcmp(cgroup, "/") == 0 ? "" : cgroup, weight_files[kind].name);
	if (tenant_read_small_file(path, text, sizeof(text)) < 0 ||
	    !weight_file_trusted(root, cgroup, path))
		return -ENOENT;
	v = tenant_parse_weight_file(kind, text);
	if (v < 0 || parse_weight_value(text, weight_files[kind].min,
					weight_files[kind].max) ==
			     weight_files[kind].kernel_default)
		return -ENOENT;
	return v;
}

int tenant_read_cgroup_weight(const struct tenant_cgroup_roots *roots,
			      const char *v2_path, const char *blkio_path)
{
	static const enum tenant_weight_file order[] = {
		TENANT_WEIGHT_IO_BFQ, TENANT_WEIGHT_IO,
		TENANT_WEIGHT_BLKIO_BFQ, TENANT_WEIGHT_BLKIO,
	};

	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
		bool v2 = order[i] <= TENANT_WEIGHT_IO;
		int w = read_weight(v2 ? roots->v2 : roots->blkio,
				    v2 ? v2_path : blkio_path, order[i]);

		if (w > 0)
			return w;
	}
	return -ENOENT;
}

uint32_t tenant_resolve_weight(const struct config *cfg,
			       const struct tenant_cgroup_roots *roots,
			       const char *key, const char *v2_path,
			       const char *blkio_path,
			       enum tenant_weight_source *source)
{
	int rule = tenant_match_rule(cfg->groups, cfg->group_count, key);
	int w;

	if (rule >= 0) {
		*source = TENANT_WEIGHT_FROM_RULE;
		return cfg->groups[rule].weight;
	}
	if (cfg->scheduler.honor_cgroup_weights) {
		w = tenant_read_cgroup_weight(roots, v2_path, blkio_path);
		if (w > 0) {
			*source = TENANT_WEIGHT_FROM_CGROUP;
			return (uint32_t)w;
		}
	}
	*source = TENANT_WEIGHT_FROM_DEFAULT;
	return cfg->scheduler.default_weight;
}
