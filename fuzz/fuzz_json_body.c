/* libFuzzer target: an untrusted request body through sbx_json_parse_body and
 * sbx_json_check against the API's own body tables (src/api/bodies.c): the
 * POST /sandboxes body with its specs and egress, and the exec and code
 * bodies. Besides crashes, leaks and UB it checks that an accepted body
 * really obeys its table (so a check that silently lets bad input through
 * is a finding too). */
#include "config.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "bodies.h"
#include "json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_DEPTH 32
#define require(c) do { if (!(c)) __builtin_trap(); } while (0)

static size_t chars(const char *s)
{
	size_t c = 0;

	for (; *s; s++)
		if (((unsigned char)*s & 0xC0) != 0x80)
			c++;
	return c;
}

/* nesting of the parsed tree: the pre-parse depth scan must bound it */
static int tree_depth(const json_t *j)
{
	int max = 0;

	if (json_is_object(j)) {
		const char *k;
		json_t *v;
		json_object_foreach((json_t *)j, k, v) {
			int d = tree_depth(v);
			if (d > max)
				max = d;
		}
		return max + 1;
	}
	if (json_is_array(j)) {
		size_t i;
		json_t *v;
		json_array_foreach(j, i, v) {
			int d = tree_depth(v);
			if (d > max)
				max = d;
		}
		return max + 1;
	}
	return 0;
}

static void check_error(const sbx_err *err)
{
	require(err->http == 400);
	require(err->msg[0] != 0);
	require(memchr(err->msg, 0, sizeof(err->msg)) != NULL);
}

/* an accepted object obeys its table: every key is known, every value is in range */
static void verify(const json_t *o, const struct api_body *b)
{
	const struct sbx_jfield *spec = b->fields;
	size_t n = b->n;
	const char *key;
	json_t *v;

	json_object_foreach((json_t *)o, key, v) {
		size_t i;
		for (i = 0; i < n && strcmp(spec[i].name, key); i++)
			;
		require(i < n);
		if (json_is_null(v))
			continue;
		switch (spec[i].type) {
		case SBX_J_STRING:
			require(json_is_string(v));
			require(strlen(json_string_value(v)) == json_string_length(v));
			/* lengths are in characters (UTF-8), as API.md counts them */
			if (spec[i].min || spec[i].max)
				require((long long)chars(json_string_value(v)) >= spec[i].min &&
					(long long)chars(json_string_value(v)) <= spec[i].max);
			break;
		case SBX_J_INT:
			require(json_is_integer(v));
			require(json_integer_value(v) >= spec[i].min && json_integer_value(v) <= spec[i].max);
			break;
		case SBX_J_BOOL:
			require(json_is_boolean(v));
			break;
		case SBX_J_OBJECT:
			require(json_is_object(v));
			break;
		case SBX_J_ARRAY:
			require(json_is_array(v));
			break;
		case SBX_J_STRMAP: {
			const char *k;
			json_t *mv;
			require(json_is_object(v));
			require((long long)json_object_size(v) <= spec[i].max);
			json_object_foreach(v, k, mv) {
				require(k[0] && json_is_string(mv));
				require(strlen(json_string_value(mv)) == json_string_length(mv));
			}
			break;
		}
		case SBX_J_ANY:
			break;
		}
	}
}

static const struct sbx_jfield *field_of(const struct api_body *b, const char *name)
{
	for (size_t i = 0; i < b->n; i++)
		if (!strcmp(b->fields[i].name, name))
			return &b->fields[i];
	__builtin_trap();
}

/* obj against b: rejected with a proper 400, or accepted and obeying b.
 * Returns whether it was accepted. */
static int check(const json_t *obj, const struct api_body *b)
{
	sbx_err err = SBX_ERR_INIT;

	if (api_body_check(obj, b, &err) < 0) {
		check_error(&err);
		return 0;
	}
	verify(obj, b);
	return 1;
}

/* A member the table says is an object, when present, against its own table. */
static int check_member(const json_t *obj, const struct api_body *sub)
{
	json_t *m = json_object_get(obj, sub->where);

	return json_is_object(m) ? check(m, sub) : 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	sbx_err err = SBX_ERR_INIT;
	const char *buf = (const char *)data;
	json_t *j = NULL;

	if (sbx_json_parse_body(buf, size, MAX_DEPTH, true, &j, &err) < 0) {
		check_error(&err);
		require(j == NULL);
		return 0;
	}
	require(json_is_object(j));
	require(tree_depth(j) <= MAX_DEPTH);
	/* the same body as each of the API's bodies */
	(void)check(j, &api_exec_body);
	(void)check(j, &api_code_body);
	if (check(j, &api_create_body)) {
		const struct sbx_jfield *timeout = field_of(&api_create_body, "timeout");
		const struct sbx_jfield *name = field_of(&api_create_body, "name");
		long long t;
		const char *nm;

		(void)check_member(j, &api_create_specs);
		if (json_is_object(json_object_get(j, "egress")) && check_member(j, &api_create_egress))
			require(sbx_json_str(json_object_get(j, "egress"), "mode", NULL) != NULL);
		/* the accessors agree with the check */
		t = sbx_json_int(j, "timeout", timeout->min);
		nm = sbx_json_str(j, "name", "default");
		require(t >= timeout->min && t <= timeout->max);
		require((long long)chars(nm) >= name->min && (long long)chars(nm) <= name->max);
		(void)sbx_json_bool(j, "autoDestroy", false);
	}
	json_decref(j);
	return 0;
}
