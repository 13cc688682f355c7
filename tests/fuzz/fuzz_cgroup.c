/* libFuzzer target: the /proc/<pid>/cgroup, mountinfo and weight-file parsers. */
#include "fusesched/tenant.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *text = (const char *)data;
	struct tenant_cgroup_paths paths;
	if (tenant_parse_proc_cgroup(text, size, &paths) == 0) {
		const char *key;
		size_t key_len;
		for (int mode = CONFIG_HIERARCHY_AUTO; mode <= CONFIG_HIERARCHY_BLKIO; mode++)
			if (tenant_select_key(&paths, (enum config_hierarchy)mode, &key, &key_len) >= 0 &&
			    key_len > 0 && (key < text || key + key_len > text + size))
				abort(); /* a key must point into the parsed text */
	}
	struct tenant_cgroup_roots *roots = malloc(sizeof(*roots));
	if (roots) {
		tenant_parse_mountinfo(text, size, roots);
		free(roots);
	}
	/* Weight files are read as NUL-terminated strings. */
	char *z = malloc(size + 1);
	if (z) {
		memcpy(z, data, size);
		z[size] = '\0';
		for (int kind = TENANT_WEIGHT_IO_BFQ; kind <= TENANT_WEIGHT_BLKIO; kind++) {
			int w = tenant_parse_weight_file((enum tenant_weight_file)kind, z);
			if (w != -22 && (w < 1 || w > 1000))
				abort(); /* -EINVAL or a weight in range, nothing else */
		}
		free(z);
	}
	return 0;
}
