/* libFuzzer target: a control-socket request line, as any local client could send it. */
#include "fusesched/ctl.h"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[256];
	int r = ctl_request_parse((const char *)data, size, err, sizeof(err));
	if (r != CTL_CMD_STAT && r != CTL_CMD_RELOAD && r != CTL_CMD_VERSION && r >= 0)
		abort(); /* a command, or an error: nothing else */
	return 0;
}
