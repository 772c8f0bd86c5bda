/* libFuzzer target: an untrusted request body through sbx_json_parse_body and
 * sbx_json_check against a representative POST /sandboxes spec. Besides
 * crashes, leaks and UB it checks that an accepted body really obeys the spec
 * (so a check that silently lets bad input through is a finding too). */
#include "config.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_DEPTH 32
#define N(a) (sizeof(a) / sizeof((a)[0]))
#define require(c) do { if (!(c)) __builtin_trap(); } while (0)

static size_t chars(const char *s)
{
	size_t c = 0;

	for (; *s; s++)
		if (((unsigned char)*s & 0xC0) != 0x80)
			c++;
	return c;
}

static const struct sbx_jfield create_spec[] = {
	{ "name", SBX_J_STRING, false, 1, 64 },
	{ "template", SBX_J_STRING, false, 1, 64 },
	{ "region", SBX_J_STRING, false, 1, 64 },
	{ "specs", SBX_J_OBJECT, false, 0, 0 },
	{ "env", SBX_J_STRMAP, false, 0, 256 },
	{ "metadata", SBX_J_STRMAP, false, 0, 64 },
	{ "timeout", SBX_J_INT, false, 60, 86400 },
	{ "egress", SBX_J_OBJECT, false, 0, 0 },
	{ "autoDestroy", SBX_J_BOOL, false, 0, 0 },
};

static const struct sbx_jfield specs_spec[] = {
	{ "cpu", SBX_J_INT, false, 1, 2000 },
	{ "memory", SBX_J_INT, false, 1, 2048 },
	{ "disk", SBX_J_INT, false, 1, 5 },
};

static const struct sbx_jfield egress_spec[] = {
	{ "mode", SBX_J_STRING, true, 1, 16 },
	{ "allow", SBX_J_ARRAY, false, 0, 50 },
};

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

/* an accepted object obeys spec: every key is known, every value is in range */
static void verify(const json_t *o, const struct sbx_jfield *spec, size_t n)
{
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	sbx_err err = SBX_ERR_INIT;
	const char *buf = (const char *)data;
	json_t *j = NULL;
	json_t *sub;

	if (sbx_json_parse_body(buf, size, MAX_DEPTH, true, &j, &err) < 0) {
		check_error(&err);
		require(j == NULL);
		return 0;
	}
	require(json_is_object(j));
	require(tree_depth(j) <= MAX_DEPTH);
	if (sbx_json_check(j, create_spec, N(create_spec), NULL, &err) < 0) {
		check_error(&err);
		json_decref(j);
		return 0;
	}
	verify(j, create_spec, N(create_spec));
	sub = json_object_get(j, "specs");
	if (json_is_object(sub)) {
		if (sbx_json_check(sub, specs_spec, N(specs_spec), "specs", &err) < 0)
			check_error(&err);
		else
			verify(sub, specs_spec, N(specs_spec));
	}
	sub = json_object_get(j, "egress");
	if (json_is_object(sub)) {
		if (sbx_json_check(sub, egress_spec, N(egress_spec), "egress", &err) < 0) {
			check_error(&err);
		} else {
			verify(sub, egress_spec, N(egress_spec));
			require(sbx_json_str(sub, "mode", NULL) != NULL);
		}
	}
	/* the accessors agree with the check */
	{
		long long t = sbx_json_int(j, "timeout", 1800);
		const char *name = sbx_json_str(j, "name", "default");
		require(t >= 60 && t <= 86400);
		require(chars(name) >= 1 && chars(name) <= 64);
		(void)sbx_json_bool(j, "autoDestroy", false);
	}
	json_decref(j);
	return 0;
}
