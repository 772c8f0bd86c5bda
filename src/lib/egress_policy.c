/* Egress policies (egress_policy.h): the parser both sides use, so the API refuses
 * exactly what the node would. */
#include "config.h"
#include <arpa/inet.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "egress_policy.h"

static const char *const mode_names[] = { "deny_all", "open", "restricted" };

int sbx_egress_mode_parse(const char *s)
{
	for (int i = 0; s && i < 3; i++)
		if (!strcmp(s, mode_names[i]))
			return i;
	return -1;
}

const char *sbx_egress_mode_name(enum sbx_egress_mode m)
{
	return (unsigned)m < 3 ? mode_names[m] : "";
}

/* RFC 1123 labels: letters, digits and inner hyphens, 1..63 each; at least
 * one dot (a bare word is nobody's public name); not all-numeric at the
 * end (that is an address gone wrong). */
static int host_ok(const char *s, size_t n)
{
	size_t label = 0;
	int dots = 0;
	const char *last = s;

	if (n == 0 || n > 253 || s[0] == '.' || s[n - 1] == '.' || s[0] == '-')
		return 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '.') {
			if (label == 0 || s[i - 1] == '-')
				return 0;
			label = 0;
			dots++;
			last = s + i + 1;
			continue;
		}
		if (!isalnum(c) && c != '-')
			return 0;
		if (c == '-' && label == 0)
			return 0;
		if (++label > 63)
			return 0;
	}
	if (s[n - 1] == '-' || dots == 0)
		return 0;
	return strspn(last, "0123456789") != (size_t)(s + n - last);
}

int sbx_egress_entry_parse(const char *s, struct sbx_egress_entry *e, sbx_err *err)
{
	char buf[300];
	const char *colon, *slash;
	size_t n;

	memset(e, 0, sizeof(*e));
	if (!s || !*s || strlen(s) >= sizeof(buf))
		return sbx_err_set(err, 400, "invalid_field", "egress.allow entries are 1..253 characters");
	snprintf(buf, sizeof(buf), "%s", s);
	colon = strchr(buf, ':');
	if (colon) {
		char *end;
		long p = strtol(colon + 1, &end, 10);
		if (!colon[1] || *end || strspn(colon + 1, "0123456789") != strlen(colon + 1) || p < 1 || p > 65535)
			return sbx_err_set(err, 400, "invalid_field",
					   "egress.allow entry '%.64s': the port must be 1..65535", s);
		e->port = (int)p;
		buf[colon - buf] = 0;
	}
	n = strlen(buf);
	slash = strchr(buf, '/');
	if (strspn(buf, "0123456789./") == n) {
		struct in_addr in;
		long len = 32;
		if (slash) {
			char *end;
			if (!slash[1] || strspn(slash + 1, "0123456789") != strlen(slash + 1) || strlen(slash + 1) > 2 ||
			    (len = strtol(slash + 1, &end, 10)) > 32)
				return sbx_err_set(err, 400, "invalid_field",
						   "egress.allow entry '%.64s': the prefix length must be 0..32", s);
			buf[slash - buf] = 0;
		}
		if (inet_pton(AF_INET, buf, &in) != 1)
			return sbx_err_set(err, 400, "invalid_field",
					   "egress.allow entry '%.64s' is not an IPv4 address, a CIDR or a hostname", s);
		e->len = (int)len;
		e->net = ntohl(in.s_addr);
		if (len < 32 && (e->net & ~(len ? 0xffffffffu << (32 - len) : 0u)))
			return sbx_err_set(err, 400, "invalid_field",
					   "egress.allow entry '%.64s' has host bits set beyond /%ld", s, len);
		return 0;
	}
	if (slash || !host_ok(buf, n))
		return sbx_err_set(err, 400, "invalid_field",
				   "egress.allow entry '%.64s' is not an IPv4 address, a CIDR or a hostname", s);
	for (size_t i = 0; i <= n; i++)
		e->host[i] = (char)tolower((unsigned char)buf[i]);
	return 0;
}

int sbx_egress_parse(const char *mode, const json_t *allow, struct sbx_egress *out, sbx_err *err)
{
	int m = sbx_egress_mode_parse(mode);
	size_t i, n = allow && !json_is_null(allow) ? json_array_size(allow) : 0;
	json_t *v;

	memset(out, 0, sizeof(*out));
	if (m < 0)
		return sbx_err_set(err, 400, "invalid_field", "egress.mode must be open, deny_all or restricted");
	if (allow && !json_is_null(allow) && !json_is_array(allow))
		return sbx_err_set(err, 400, "invalid_field", "egress.allow must be an array of strings");
	if (m != SBX_EGRESS_RESTRICTED && n > 0)
		return sbx_err_set(err, 400, "invalid_field", "egress.allow is only allowed with mode restricted");
	if (m == SBX_EGRESS_RESTRICTED && n == 0)
		return sbx_err_set(err, 400, "invalid_field", "egress.allow needs at least one entry with mode restricted");
	if (n > SBX_EGRESS_MAX_ALLOW)
		return sbx_err_set(err, 400, "invalid_field", "egress.allow has at most %d entries", SBX_EGRESS_MAX_ALLOW);
	out->mode = (enum sbx_egress_mode)m;
	json_array_foreach(allow, i, v) {
		if (!json_is_string(v))
			return sbx_err_set(err, 400, "invalid_field", "egress.allow must be an array of strings");
		if (sbx_egress_entry_parse(json_string_value(v), &out->allow[i], err) < 0)
			return -1;
	}
	out->n = n;
	return 0;
}
