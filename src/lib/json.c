#include "config.h"
#include <stdint.h>
#include <string.h>
#include "json.h"

/* Whether one of the eight bytes at p is below 0x20, '"' or '\\' (a
 * word's byte b is flagged by (b - k) & ~b & 0x80 when b < k, and by the
 * same test for 1 on b ^ c when b == c; a byte at or above k never borrows,
 * so no byte is flagged when none matches). */
static inline bool word_needs_escape(const char *p)
{
	const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
	uint64_t w, q, s;

	memcpy(&w, p, 8);
	q = w ^ (ones * '"');
	s = w ^ (ones * '\\');
	return (((w - ones * 0x20) & ~w) | ((q - ones) & ~q) | ((s - ones) & ~s)) & highs;
}

size_t sbx_json_escape(char *out, const char *d, size_t n)
{
	static const char hex[] = "0123456789ABCDEF";
	char *o = out;
	size_t i = 0;

	while (i < n) {
		size_t end;

		/* output mostly needs no escape: eight bytes a step while none
		 * of them does; a word with one goes byte by byte */
		if (i + 8 <= n && !word_needs_escape(d + i)) {
			memcpy(o, d + i, 8);
			o += 8;
			i += 8;
			continue;
		}
		for (end = i + 8 <= n ? i + 8 : n; i < end; i++) {
			unsigned char c = (unsigned char)d[i];

			if (c >= 0x20 && c != '"' && c != '\\') {
				*o++ = (char)c;
				continue;
			}
			*o++ = '\\';
			switch (c) {
			case '"': *o++ = '"'; break;
			case '\\': *o++ = '\\'; break;
			case '\b': *o++ = 'b'; break;
			case '\f': *o++ = 'f'; break;
			case '\n': *o++ = 'n'; break;
			case '\r': *o++ = 'r'; break;
			case '\t': *o++ = 't'; break;
			default:
				memcpy(o, "u00", 3);
				o[3] = hex[c >> 4];
				o[4] = hex[c & 15];
				o += 5;
			}
		}
	}
	return (size_t)(o - out);
}

int sbx_json_depth(const char *buf, size_t len, int limit)
{
	int depth = 0, max = 0;
	bool in_str = false;

	for (size_t i = 0; i < len; i++) {
		char c = buf[i];
		if (in_str) {
			if (c == '\\')
				i++;
			else if (c == '"')
				in_str = false;
			continue;
		}
		if (c == '"') {
			in_str = true;
		} else if (c == '[' || c == '{') {
			if (++depth > max)
				max = depth;
			if (max > limit)
				return -1;
		} else if (c == ']' || c == '}') {
			depth--;
		}
	}
	return max;
}

int sbx_json_parse_body(const char *buf, size_t len, int max_depth, bool allow_empty, json_t **out,
			sbx_err *err)
{
	json_error_t jerr;
	json_t *j;
	size_t i;

	for (i = 0; i < len && (buf[i] == ' ' || buf[i] == '\t' || buf[i] == '\r' || buf[i] == '\n'); i++)
		;
	if (i == len) {
		if (!allow_empty)
			return sbx_err_set(err, 400, "invalid_json", "Request body is required");
		*out = json_object();
		return *out ? 0 : sbx_err_set(err, 500, "nomem", "out of memory");
	}
	/* jansson recurses per level: refuse deep input before it parses */
	if (sbx_json_depth(buf, len, max_depth) < 0)
		return sbx_err_set(err, 400, "invalid_json", "JSON body is nested deeper than %d levels",
				   max_depth);
	j = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!j) {
		if (json_error_code(&jerr) == json_error_duplicate_key)
			return sbx_err_set(err, 400, "invalid_json", "Duplicate key in JSON body: %s",
					   jerr.text);
		return sbx_err_set(err, 400, "invalid_json", "Malformed JSON body at line %d column %d: %s",
				   jerr.line, jerr.column, jerr.text);
	}
	if (!json_is_object(j)) {
		json_decref(j);
		return sbx_err_set(err, 400, "invalid_json", "JSON body must be an object");
	}
	*out = j;
	return 0;
}

/* Characters, not bytes: jansson has already checked the UTF-8. */
static size_t utf8_chars(const char *s, size_t n)
{
	size_t c = 0;

	for (size_t i = 0; i < n; i++)
		if (((unsigned char)s[i] & 0xC0) != 0x80)
			c++;
	return c;
}

static const char *type_word(enum sbx_jtype t)
{
	switch (t) {
	case SBX_J_STRING: return "a string";
	case SBX_J_INT: return "an integer";
	case SBX_J_BOOL: return "a boolean";
	case SBX_J_OBJECT: return "an object";
	case SBX_J_ARRAY: return "an array";
	case SBX_J_STRMAP: return "an object of strings";
	case SBX_J_ANY: return "a value";
	}
	return "?";
}

static int field_err(sbx_err *err, const char *where, const char *name, const char *fmt_tail,
		     const char *word)
{
	return sbx_err_set(err, 400, "invalid_field", "%s%s%s %s%s", where ? where : "", where ? "." : "",
			   name, fmt_tail, word ? word : "");
}

int sbx_json_check(const json_t *obj, const struct sbx_jfield *spec, size_t n, const char *where,
		   sbx_err *err)
{
	const char *key;
	json_t *v;

	if (!json_is_object(obj))
		return sbx_err_set(err, 400, "invalid_field", "%s must be an object", where ? where : "body");
	json_object_foreach((json_t *)obj, key, v) {
		size_t i;
		for (i = 0; i < n; i++)
			if (!strcmp(spec[i].name, key))
				break;
		if (i == n) {
			char shown[80];
			size_t kl = strlen(key);
			/* the key is untrusted: show a bounded, printable part */
			snprintf(shown, sizeof(shown), "%.*s%s", (int)(kl > 64 ? 64 : kl), key, kl > 64 ? "..." : "");
			for (char *p = shown; *p; p++)
				if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f)
					*p = '?';
			return sbx_err_set(err, 400, "unknown_field", "Unknown field: %s%s%s", where ? where : "",
					   where ? "." : "", shown);
		}
	}
	for (size_t i = 0; i < n; i++) {
		const struct sbx_jfield *f = &spec[i];
		bool ranged = f->min != 0 || f->max != 0;
		json_t *val = json_object_get(obj, f->name);

		if (!val || json_is_null(val)) {
			if (f->required)
				return field_err(err, where, f->name, "is required", NULL);
			continue;
		}
		switch (f->type) {
		case SBX_J_STRING: {
			size_t l;
			if (!json_is_string(val))
				return field_err(err, where, f->name, "must be ", type_word(f->type));
			l = json_string_length(val);
			if (memchr(json_string_value(val), 0, l))
				return field_err(err, where, f->name, "must not contain NUL bytes", NULL);
			l = utf8_chars(json_string_value(val), l);
			if (ranged && ((long long)l < f->min || (long long)l > f->max))
				return sbx_err_set(err, 400, "invalid_field", "%s%s%s must be %lld to %lld characters long",
						   where ? where : "", where ? "." : "", f->name, f->min, f->max);
			break;
		}
		case SBX_J_INT: {
			long long x;
			if (!json_is_integer(val))
				return field_err(err, where, f->name, "must be ", type_word(f->type));
			x = json_integer_value(val);
			if (ranged && (x < f->min || x > f->max))
				return sbx_err_set(err, 400, "invalid_field", "%s%s%s must be between %lld and %lld",
						   where ? where : "", where ? "." : "", f->name, f->min, f->max);
			break;
		}
		case SBX_J_BOOL:
			if (!json_is_boolean(val))
				return field_err(err, where, f->name, "must be ", type_word(f->type));
			break;
		case SBX_J_OBJECT:
			if (!json_is_object(val))
				return field_err(err, where, f->name, "must be ", type_word(f->type));
			break;
		case SBX_J_ARRAY:
			if (!json_is_array(val))
				return field_err(err, where, f->name, "must be ", type_word(f->type));
			if (ranged && ((long long)json_array_size(val) < f->min ||
				       (long long)json_array_size(val) > f->max))
				return sbx_err_set(err, 400, "invalid_field", "%s%s%s must have %lld to %lld entries",
						   where ? where : "", where ? "." : "", f->name, f->min, f->max);
			break;
		case SBX_J_STRMAP: {
			const char *k;
			json_t *mv;
			if (!json_is_object(val))
				return field_err(err, where, f->name, "must be ", type_word(f->type));
			if (ranged && (long long)json_object_size(val) > f->max)
				return sbx_err_set(err, 400, "invalid_field", "%s%s%s must have at most %lld entries",
						   where ? where : "", where ? "." : "", f->name, f->max);
			json_object_foreach(val, k, mv) {
				if (!json_is_string(mv))
					return field_err(err, where, f->name, "values must be strings", NULL);
				if (!k[0] || memchr(json_string_value(mv), 0, json_string_length(mv)))
					return field_err(err, where, f->name,
							 "keys must be non-empty and values free of NUL bytes", NULL);
			}
			break;
		}
		case SBX_J_ANY:
			break;
		}
	}
	return 0;
}

const char *sbx_json_str(const json_t *obj, const char *key, const char *def)
{
	json_t *v = json_object_get(obj, key);
	return json_is_string(v) ? json_string_value(v) : def;
}

long long sbx_json_int(const json_t *obj, const char *key, long long def)
{
	json_t *v = json_object_get(obj, key);
	return json_is_integer(v) ? json_integer_value(v) : def;
}

bool sbx_json_bool(const json_t *obj, const char *key, bool def)
{
	json_t *v = json_object_get(obj, key);
	return json_is_boolean(v) ? json_is_true(v) : def;
}
