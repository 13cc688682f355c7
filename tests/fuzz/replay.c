/*
 * Runs a fuzz target's entry point over files, without libFuzzer: every
 * normal and sanitizer build replays the regression inputs this way.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int main(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		FILE *f = fopen(argv[i], "rb");
		if (!f) {
			perror(argv[i]);
			return 1;
		}
		uint8_t *buf = malloc(1 << 20);
		size_t n = buf ? fread(buf, 1, 1 << 20, f) : 0;
		fclose(f);
		if (!buf)
			return 1;
		LLVMFuzzerTestOneInput(buf, n);
		free(buf);
		printf("replayed %s (%zu bytes)\n", argv[i], n);
	}
	return 0;
}
