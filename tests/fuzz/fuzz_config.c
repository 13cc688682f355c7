/* libFuzzer target: the config parser must reject or accept any bytes without crashing. */
#include "fusesched/config.h"

#include <stdint.h>
#include <stdio.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	FILE *in = fmemopen((void *)data, size, "r");
	if (!in)
		return 0;
	struct config *cfg = NULL;
	char err[512];
	if (config_load_stream(in, "fuzz.conf", &cfg, err, sizeof(err)) == 0) {
		/* What loads must print as a file that loads again. */
		FILE *out = fopen("/dev/null", "w");
		if (out) {
			config_print(cfg, out);
			fclose(out);
		}
		config_free(cfg);
	}
	fclose(in);
	return 0;
}
