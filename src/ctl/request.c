/* Parsing one control request line: the part of the server that reads untrusted bytes. */
#include "fusesched/ctl.h"

#include <errno.h>
#include <json-c/json.h>
#include <stdio.h>
#include <string.h>

/* Deep enough for {"cmd":...}; deeper input is refused before it costs stack. */
#define CTL_REQUEST_MAX_DEPTH 8

int ctl_request_parse(const char *line, size_t len, char *err, size_t err_bytes)
{
	if (len > CTL_REQUEST_MAX_BYTES) {
		snprintf(err, err_bytes, "request longer than %u bytes", CTL_REQUEST_MAX_BYTES);
		return -EINVAL;
	}
	if (memchr(line, '\0', len)) {
		snprintf(err, err_bytes, "malformed request: NUL byte");
		return -EINVAL;
	}
	struct json_tokener *tok = json_tokener_new_ex(CTL_REQUEST_MAX_DEPTH);
	if (!tok) {
		snprintf(err, err_bytes, "out of memory");
		return -ENOMEM;
	}
	struct json_object *req = json_tokener_parse_ex(tok, line, (int)len);
	enum json_tokener_error jerr = json_tokener_get_error(tok);
	/* Whatever follows the object must be blank. */
	size_t used = json_tokener_get_parse_end(tok);
	json_tokener_free(tok);
	for (; used < len && (line[used] == ' ' || line[used] == '\t' || line[used] == '\r'); used++)
		;
	int r = -EINVAL;
	struct json_object *cmd;
	if (!req || jerr != json_tokener_success || used != len) {
		snprintf(err, err_bytes, "malformed request: %s",
			 req && jerr == json_tokener_success ? "trailing data"
			 : jerr == json_tokener_continue   ? "incomplete JSON"
							   : json_tokener_error_desc(jerr));
	} else if (!json_object_is_type(req, json_type_object) ||
		   !json_object_object_get_ex(req, "cmd", &cmd) ||
		   !json_object_is_type(cmd, json_type_string)) {
		snprintf(err, err_bytes, "a request is a JSON object with a string \"cmd\"");
	} else if (strcmp(json_object_get_string(cmd), "stat") == 0) {
		r = CTL_CMD_STAT;
	} else if (strcmp(json_object_get_string(cmd), "reload") == 0) {
		r = CTL_CMD_RELOAD;
	} else if (strcmp(json_object_get_string(cmd), "version") == 0) {
		r = CTL_CMD_VERSION;
	} else {
		snprintf(err, err_bytes, "unknown command (known: stat, reload, version)");
	}
	json_object_put(req);
	return r;
}
