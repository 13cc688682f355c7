#include "fake_tree.h"

#include <check.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

char *fake_tree_new(void)
{
	char tmpl[] = "/tmp/fusesched-tenant-XXXXXX";

	ck_assert_ptr_nonnull(mkdtemp(tmpl));
	return strdup(tmpl);
}

void fake_tree_write(const char *root, const char *rel, const char *text)
{
	char path[8192];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	for (char *p = path + strlen(root) + 1; (p = strchr(p, '/')); p++) {
		*p = '\0';
		mkdir(path, 0755);
		*p = '/';
	}
	f = fopen(path, "w");
	ck_assert_msg(f != NULL, "cannot write %s", path);
	fputs(text, f);
	fclose(f);
}

void fake_tree_remove(const char *root, const char *rel)
{
	char path[8192];

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	ck_assert_int_eq(unlink(path), 0);
}

static int remove_one(const char *path, const struct stat *st, int flag,
		      struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

void fake_tree_free(char *root)
{
	nftw(root, remove_one, 16, FTW_DEPTH | FTW_PHYS);
	free(root);
}

char *fixture_read(const char *name, size_t *len)
{
	char path[4096], *buf;
	FILE *f;
	long n;

	snprintf(path, sizeof(path), "%s/%s", FIXTURES_DIR, name);
	f = fopen(path, "r");
	ck_assert_msg(f != NULL, "missing fixture %s", path);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	buf = malloc((size_t)n + 1);
	ck_assert_int_eq(fread(buf, 1, (size_t)n, f), n);
	buf[n] = '\0';
	fclose(f);
	*len = (size_t)n;
	return buf;
}
