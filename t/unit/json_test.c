/* Proves: a request body is accepted only as one JSON object no deeper than
 * the limit and without duplicate keys (malformed input gets a message that
 * says where; a 100000-deep input is refused quickly without recursion);
 * empty bodies follow allow_empty; sbx_json_check refuses unknown fields,
 * missing required ones, wrong types, out-of-range lengths and integers,
 * non-string map values and NUL inside strings, and treats null as absent. */
#include "config.h"
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "json.h"
#include "../tap.h"

#ifndef SBX_ARRAY_LEN
#define SBX_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#endif

static sbx_err err;

static int parse(const char *s, int depth, bool allow_empty)
{
	json_t *j = NULL;
	int r;

	sbx_err_clear(&err);
	r = sbx_json_parse_body(s, strlen(s), depth, allow_empty, &j, &err);
	if (r == 0 && !json_is_object(j))
		r = -2;
	if (j)
		json_decref(j);
	return r;
}

static const struct sbx_jfield egress_spec[] = {
	{ "mode", SBX_J_STRING, true, 1, 16 },
	{ "allow", SBX_J_ARRAY, false, 0, 50 },
};

static const struct sbx_jfield create_spec[] = {
	{ "name", SBX_J_STRING, false, 1, 64 },
	{ "template", SBX_J_STRING, false, 1, 64 },
	{ "specs", SBX_J_OBJECT, false, 0, 0 },
	{ "env", SBX_J_STRMAP, false, 0, 3 },
	{ "metadata", SBX_J_STRMAP, false, 0, 0 },
	{ "timeout", SBX_J_INT, false, 60, 86400 },
	{ "egress", SBX_J_OBJECT, false, 0, 0 },
	{ "autoDestroy", SBX_J_BOOL, false, 0, 0 },
	{ "extra", SBX_J_ANY, false, 0, 0 },
};

static const struct sbx_jfield req_spec[] = {
	{ "cmd", SBX_J_STRING, true, 1, 10 },
	{ "n", SBX_J_INT, false, -5, 5 },
};

static int check_str(const char *s, const struct sbx_jfield *spec, size_t n, const char *where)
{
	json_error_t je;
	json_t *j = json_loads(s, 0, &je);
	int r;

	if (!j)
		bail_out("test JSON does not parse");
	sbx_err_clear(&err);
	r = sbx_json_check(j, spec, n, where, &err);
	json_decref(j);
	return r;
}

#define CHECK(s) check_str((s), create_spec, SBX_ARRAY_LEN(create_spec), NULL)

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(void)
{
	char *deep;
	size_t n;
	double t0;

	/* bodies */
	is_int(parse("{}", 32, false), 0, "{} is accepted");
	is_int(parse(" {\"a\": [1, {\"b\": null}]} \n", 32, false), 0, "a nested object is accepted");
	is_int(parse("[]", 32, false), -1, "an array body is refused");
	like(err.msg, "must be an object", "... with 'must be an object'");
	is_int(err.http, 400, "... as a 400");
	is_int(parse("1", 32, false), -1, "a number body is refused");
	is_int(parse("\"s\"", 32, false), -1, "a string body is refused");
	is_int(parse("null", 32, false), -1, "a null body is refused");
	is_int(parse("true", 32, false), -1, "a boolean body is refused");
	is_int(parse("{\"a\":1,}", 32, false), -1, "a trailing comma is refused");
	like(err.msg, "line 1", "the malformed-JSON message names the line");
	like(err.msg, "column", "the malformed-JSON message names the column");
	is_int(err.http, 400, "malformed JSON is a 400");
	is_int(parse("{\"a\":1}\n{\"b\":2}", 32, false), -1, "two concatenated objects are refused");
	is_int(parse("{\"a\":1} x", 32, false), -1, "trailing garbage is refused");
	is_int(parse("{\"a\":\n\n  nope}", 32, false), -1, "a bad token is refused");
	like(err.msg, "line 3", "... and the message points at line 3");
	is_int(parse("{\"a\":1", 32, false), -1, "an unterminated object is refused");
	is_int(parse("{\"a\":\"\\u0000\"}", 32, false), -1, "\\u0000 in a string is refused by the parser");
	is_int(parse("{\"a\":\"\xff\"}", 32, false), -1, "invalid UTF-8 is refused");
	is_int(parse("{\"a\":1,\"a\":2}", 32, false), -1, "a duplicate key is refused");
	like(err.msg, "Duplicate key", "... with a message saying so");
	is_int(parse("{\"o\":{\"k\":1,\"k\":1}}", 32, false), -1, "a nested duplicate key is refused");

	/* depth */
	is_int(parse("{\"a\":{\"b\":{}}}", 3, false), 0, "nesting at the limit (3) is accepted");
	is_int(parse("{\"a\":{\"b\":{\"c\":[]}}}", 3, false), -1, "nesting past the limit (4 > 3) is refused");
	like(err.msg, "deeper than 3", "... and the message says the limit");
	is_int(parse("{\"a\":\"[[[[[[[[[[\"}", 3, false), 0, "brackets inside strings do not count as depth");
	is_int(parse("{\"a\":\"\\\"[[[[[[\"}", 3, false), 0, "an escaped quote does not end the string");
	is_int(sbx_json_depth("[[]]", 4, 10), 2, "sbx_json_depth counts nesting");
	is_int(sbx_json_depth("[[[]]]", 6, 2), -1, "sbx_json_depth gives -1 past the limit");
	is_int(sbx_json_depth("", 0, 2), 0, "sbx_json_depth of nothing is 0");

	n = 100000;
	deep = malloc(2 * n + 1);
	if (!deep)
		bail_out("malloc");
	memset(deep, '[', n);
	memset(deep + n, ']', n);
	deep[2 * n] = 0;
	t0 = now();
	is_int(parse(deep, 32, false), -1, "a 100000-deep array is refused (no crash)");
	like(err.msg, "deeper", "... as too deep");
	for (size_t i = 0; i < n; i++)
		memcpy(deep + i * 2, "{\"", 2);
	deep[2 * n] = 0;
	is_int(parse(deep, 32, false), -1, "100000 unclosed '{\"' do not crash");
	for (size_t i = 0; i + 5 <= 2 * n; i += 5)
		memcpy(deep + i, "{\"a\":", 5);
	is_int(parse(deep, 32, false), -1, "40000 nested objects are refused (no crash)");
	ok(now() - t0 < 2.0, "the deep inputs were refused in under 2 seconds (%.3fs)", now() - t0);
	free(deep);

	/* empty bodies */
	is_int(parse("", 32, false), -1, "an empty body is refused without allow_empty");
	like(err.msg, "required", "... saying a body is required");
	is_int(parse(" \r\n\t", 32, false), -1, "a whitespace body is refused without allow_empty");
	is_int(parse("", 32, true), 0, "an empty body is {} with allow_empty");
	is_int(parse("  \n", 32, true), 0, "a whitespace body is {} with allow_empty");
	{
		json_t *j = NULL;
		sbx_json_parse_body(NULL, 0, 32, true, &j, &err);
		ok(j && json_object_size(j) == 0, "a NULL, 0-length body is an empty object with allow_empty");
		if (j)
			json_decref(j);
	}

	/* sbx_json_check */
	is_int(CHECK("{}"), 0, "an empty create body passes the create spec");
	is_int(CHECK("{\"name\":\"a\",\"template\":\"debian-12\",\"specs\":{\"cpu\":1},"
		     "\"env\":{\"A\":\"1\"},\"metadata\":{\"k\":\"v\"},\"timeout\":60,"
		     "\"egress\":{\"mode\":\"open\"},\"autoDestroy\":true,\"extra\":[1]}"),
	       0, "a full create body passes");
	is_int(CHECK("{\"nmae\":\"x\"}"), -1, "an unknown field is refused");
	like(err.msg, "Unknown field: nmae", "... and named");
	is_str(err.code, "unknown_field", "... with code unknown_field");
	is_int(err.http, 400, "... as a 400");
	is_int(check_str("{\"zz\":1}", create_spec, SBX_ARRAY_LEN(create_spec), "specs"), -1,
	       "an unknown nested field is refused");
	like(err.msg, "specs.zz", "... and named with its parent");
	is_int(CHECK("{\"a\\u0001b\":1}"), -1, "an unknown field with a control character is refused");
	ok(!strchr(err.msg, '\001'), "... and the control character is not echoed");
	{
		char key[300], body[400];
		memset(key, 'k', 200);
		key[200] = 0;
		snprintf(body, sizeof(body), "{\"%s\":1}", key);
		is_int(CHECK(body), -1, "a 200-character unknown field is refused");
		ok(strlen(err.msg) < 120, "... and echoed only in part (%zu bytes)", strlen(err.msg));
	}
	is_int(check_str("{}", req_spec, 2, NULL), -1, "a missing required field is refused");
	like(err.msg, "cmd is required", "... and named");
	is_int(check_str("{\"cmd\":null}", req_spec, 2, NULL), -1, "null for a required field counts as missing");
	is_int(check_str("{\"cmd\":\"ls\",\"n\":null}", req_spec, 2, NULL), 0, "null for an optional field is absent");
	is_int(CHECK("{\"name\":null,\"env\":null,\"timeout\":null}"), 0, "nulls for optional fields pass");
	is_int(CHECK("{\"name\":1}"), -1, "a number for a string is refused");
	like(err.msg, "name must be a string", "... with 'must be a string'");
	is_int(CHECK("{\"name\":\"\"}"), -1, "a string below its minimum length is refused");
	like(err.msg, "1 to 64", "... naming the range");
	is_int(CHECK("{\"name\":\"0123456789012345678901234567890123456789012345678901234567890123\"}"), 0,
	       "a 64-character name passes");
	is_int(CHECK("{\"name\":\"01234567890123456789012345678901234567890123456789012345678901234\"}"), -1,
	       "a 65-character name is refused");
	is_int(CHECK("{\"timeout\":\"60\"}"), -1, "a string for an integer is refused");
	like(err.msg, "timeout must be an integer", "... with 'must be an integer'");
	is_int(CHECK("{\"timeout\":60.0}"), -1, "a real for an integer is refused");
	is_int(CHECK("{\"timeout\":true}"), -1, "a boolean for an integer is refused");
	is_int(CHECK("{\"timeout\":59}"), -1, "an integer below its minimum is refused");
	like(err.msg, "between 60 and 86400", "... naming the range");
	is_int(CHECK("{\"timeout\":86401}"), -1, "an integer above its maximum is refused");
	is_int(CHECK("{\"timeout\":86400}"), 0, "an integer at its maximum passes");
	is_int(CHECK("{\"timeout\":-9223372036854775808}"), -1, "LLONG_MIN is refused");
	is_int(check_str("{\"cmd\":\"x\",\"n\":-5}", req_spec, 2, NULL), 0, "a negative range includes its minimum");
	is_int(check_str("{\"cmd\":\"x\",\"n\":-6}", req_spec, 2, NULL), -1, "... and refuses below it");
	is_int(CHECK("{\"autoDestroy\":1}"), -1, "a number for a boolean is refused");
	is_int(CHECK("{\"autoDestroy\":\"true\"}"), -1, "a string for a boolean is refused");
	is_int(CHECK("{\"autoDestroy\":false}"), 0, "false is a boolean");
	is_int(CHECK("{\"specs\":[]}"), -1, "an array for an object is refused");
	is_int(CHECK("{\"egress\":\"open\"}"), -1, "a string for an object is refused");
	is_int(CHECK("{\"env\":[\"A=1\"]}"), -1, "an array for a string map is refused");
	is_int(CHECK("{\"env\":{\"A\":1}}"), -1, "a number value in a string map is refused");
	like(err.msg, "env values must be strings", "... naming the map");
	is_int(CHECK("{\"env\":{\"A\":null}}"), -1, "a null value in a string map is refused");
	is_int(CHECK("{\"env\":{\"\":\"x\"}}"), -1, "an empty key in a string map is refused");
	is_int(CHECK("{\"env\":{\"A\":\"1\",\"B\":\"2\",\"C\":\"3\"}}"), 0, "a map at its maximum size passes");
	is_int(CHECK("{\"env\":{\"A\":\"1\",\"B\":\"2\",\"C\":\"3\",\"D\":\"4\"}}"), -1,
	       "a map above its maximum size is refused");
	is_int(check_str("{\"mode\":\"open\",\"allow\":[]}", egress_spec, 2, "egress"), 0,
	       "a nested spec passes");
	is_int(check_str("{\"allow\":[]}", egress_spec, 2, "egress"), -1, "a nested missing field is refused");
	like(err.msg, "egress.mode is required", "... and named with its parent");
	{
		char body[1024] = "{\"mode\":\"restricted\",\"allow\":[";
		for (int i = 0; i < 51; i++)
			strcat(body, i ? ",\"h\"" : "\"h\"");
		strcat(body, "]}");
		is_int(check_str(body, egress_spec, 2, "egress"), -1, "an array above its maximum size is refused");
	}
	{
		/* NUL inside strings can only come from a caller; the check must still refuse it */
		json_t *o = json_object();
		json_object_set_new(o, "name", json_stringn("a\0b", 3));
		is_int(sbx_json_check(o, create_spec, SBX_ARRAY_LEN(create_spec), NULL, &err), -1,
		       "a NUL inside a string is refused");
		like(err.msg, "NUL", "... saying NUL");
		json_object_set_new(o, "name", json_string("ok"));
		json_object_set_new(o, "env", json_pack("{s:o}", "A", json_stringn("x\0y", 3)));
		is_int(sbx_json_check(o, create_spec, SBX_ARRAY_LEN(create_spec), NULL, &err), -1,
		       "a NUL inside a string-map value is refused");
		json_decref(o);
	}
	{
		json_t *a = json_array();
		is_int(sbx_json_check(a, create_spec, SBX_ARRAY_LEN(create_spec), NULL, &err), -1,
		       "sbx_json_check refuses a non-object");
		json_decref(a);
	}

	/* accessors */
	{
		json_t *o = json_loads("{\"s\":\"v\",\"i\":7,\"b\":true,\"n\":null,\"x\":\"7\"}", 0, NULL);
		is_str(sbx_json_str(o, "s", "d"), "v", "sbx_json_str reads a string");
		is_str(sbx_json_str(o, "n", "d"), "d", "sbx_json_str treats null as absent");
		is_str(sbx_json_str(o, "i", "d"), "d", "sbx_json_str gives the default for a wrong type");
		is_int(sbx_json_int(o, "i", -1), 7, "sbx_json_int reads an integer");
		is_int(sbx_json_int(o, "x", -1), -1, "sbx_json_int gives the default for a string");
		is_int(sbx_json_int(o, "missing", -1), -1, "sbx_json_int gives the default when absent");
		ok(sbx_json_bool(o, "b", false), "sbx_json_bool reads a boolean");
		ok(!sbx_json_bool(o, "n", false), "sbx_json_bool treats null as absent");
		json_decref(o);
	}
	/* sbx_json_escape: the same bytes as jansson's compact dump, for
	 * strings of every length to 40 and random ones of ASCII (controls,
	 * '"' and '\\' dense), two-, three- and four-byte characters */
	{
		static const char *const multi[] = { "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80" };
		unsigned seed = 12345;
		int bad = 0, cases = 0;
		char in[600], out[6 * sizeof(in)];

		for (int k = 0; k < 3000; k++) {
			size_t m_len = 0, want = k < 400 ? (size_t)(k % 41) : (size_t)(k % 97) * 5;
			json_t *j;
			char *dump;
			size_t len;

			while (m_len < want && m_len + 4 < sizeof(in)) {
				seed = seed * 1103515245u + 12345u;
				unsigned r = (seed >> 16) & 0x7fff;
				if (r % 7 == 0) {
					const char *m = multi[r % 3];
					memcpy(in + m_len, m, strlen(m));
					m_len += strlen(m);
				} else {
					in[m_len++] = (char)(r % 3 == 0 ? r % 0x20 : r % 5 == 0 ? '"' : r % 11 == 0 ? '\\' : 0x20 + r % 0x5f);
				}
			}
			j = json_stringn(in, m_len);
			dump = j ? json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
			len = sbx_json_escape(out, in, m_len);
			cases++;
			if (!dump || strlen(dump) != len + 2 || memcmp(dump + 1, out, len))
				bad++;
			free(dump);
			json_decref(j);
		}
		is_int(bad, 0, "sbx_json_escape writes what jansson writes (%d strings, controls, quotes, backslashes, UTF-8)",
		       cases);
		is_int((long long)sbx_json_escape(out, "", 0), 0, "sbx_json_escape of nothing is nothing");
	}
	return done_testing();
}
