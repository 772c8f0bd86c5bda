/* Untrusted JSON: parsed in one place (the API), checked field by field
 * against a declarative spec, handed on as validated values. */
#ifndef SBX_JSON_H
#define SBX_JSON_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include "err.h"

static inline void sbx_json_decrefp(json_t **j) { if (*j) json_decref(*j); }
#define cleanup_json __attribute__((cleanup(sbx_json_decrefp)))

/* The inside of a JSON string for d[0..n), valid UTF-8, as jansson's
 * JSON_COMPACT dump writes it ('"', '\\' and the controls escaped, the rest
 * as it is), written to out, which has room for 6 * n bytes: its length.
 * A sandbox's streamed output goes through it (src/api/h_exec.c). */
size_t sbx_json_escape(char *out, const char *d, size_t n);

/* Depth of the deepest nesting in buf (strings skipped), or -1 past `limit`. */
int sbx_json_depth(const char *buf, size_t len, int limit);

/* A request body must be one JSON object, no deeper than max_depth, with no
 * duplicate keys. An empty body is {} when allow_empty. Errors are 400. */
int sbx_json_parse_body(const char *buf, size_t len, int max_depth, bool allow_empty, json_t **out,
			sbx_err *err);

enum sbx_jtype {
	SBX_J_STRING,
	SBX_J_INT,
	SBX_J_BOOL,
	SBX_J_OBJECT,
	SBX_J_ARRAY,
	SBX_J_STRMAP, /* object whose values are all strings */
	SBX_J_ANY,
};

struct sbx_jfield {
	const char *name;
	enum sbx_jtype type;
	bool required;
	long long min, max; /* string length, integer value, array or map size; 0,0 = any */
};

/* Checks obj against the spec: unknown fields, missing required ones, wrong
 * types and out-of-range values are 400s naming the field ("where.name" when
 * where is set). A JSON null counts as absent. */
int sbx_json_check(const json_t *obj, const struct sbx_jfield *spec, size_t n, const char *where,
		   sbx_err *err);

/* Accessors that treat null as absent. */
const char *sbx_json_str(const json_t *obj, const char *key, const char *def);
long long sbx_json_int(const json_t *obj, const char *key, long long def);
bool sbx_json_bool(const json_t *obj, const char *key, bool def);

#endif
