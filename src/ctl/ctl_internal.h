/* Shared between the control server and client; not part of the public face. */
#ifndef FUSESCHED_CTL_INTERNAL_H
#define FUSESCHED_CTL_INTERNAL_H

#include <json-c/json.h>

#define CTL_NS_PER_S 1000000000ull

/* One line, no newlines inside, '/' unescaped (paths stay readable). */
#define CTL_JSON_FLAGS (JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE)

#endif
