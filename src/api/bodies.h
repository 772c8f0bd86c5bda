/* The request bodies' field tables, in one place: the handlers check bodies
 * with them and fuzz/fuzz_json_body checks its inputs against the very same
 * tables, so the fuzzer exercises exactly the rules the API applies. */
#ifndef SBX_API_BODIES_H
#define SBX_API_BODIES_H

#include "json.h"

/* One JSON object's fields. */
struct api_body {
	const struct sbx_jfield *fields;
	size_t n;
	const char *where; /* NULL: the body itself; else the member it checks ("specs") */
};

extern const struct api_body api_create_body;   /* POST /sandboxes */
extern const struct api_body api_create_specs;  /* ... its "specs" */
extern const struct api_body api_create_egress; /* ... its "egress" */
extern const struct api_body api_exec_body;     /* POST /sandboxes/{id}/exec */
extern const struct api_body api_exec_pty;      /* ... its "pty" */
extern const struct api_body api_code_body;     /* POST /sandboxes/{id}/code */
extern const struct api_body api_volume_body;   /* POST /volumes */
extern const struct api_body api_timeout_body;  /* POST /sandboxes/{id}/timeout */
extern const struct api_body api_snapshot_body; /* POST /sandboxes/{id}/snapshots */

/* sbx_json_check of obj against b (400s naming the field). */
int api_body_check(const json_t *obj, const struct api_body *b, sbx_err *err);

#endif
