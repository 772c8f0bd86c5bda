#include "config.h"
#include <stdlib.h>
#include <string.h>
#include "hex.h"
#include "page.h"

int sbx_url_decode(const char *in, size_t n, char *out, size_t outsz)
{
	size_t o = 0;

	for (size_t i = 0; i < n; i++) {
		char c = in[i];
		if (c == '%') {
			int h, l;
			if (i + 2 >= n)
				return -1;
			h = sbx_hexval(in[i + 1]);
			l = sbx_hexval(in[i + 2]);
			if (h < 0 || l < 0)
				return -1;
			c = (char)(h * 16 + l);
			if (c == 0)
				return -1;
			i += 2;
		} else if (c == '+') {
			c = ' ';
		}
		if (o + 1 >= outsz)
			return -1;
		out[o++] = c;
	}
	if (outsz == 0)
		return -1;
	out[o] = 0;
	return 0;
}

int sbx_query_get(const char *qs, const char *key, char *out, size_t outsz, sbx_err *err)
{
	size_t klen = strlen(key);
	const char *p = qs;

	if (!qs)
		return 0;
	while (*p) {
		const char *amp = strchr(p, '&');
		const char *end = amp ? amp : p + strlen(p);
		const char *eq = memchr(p, '=', (size_t)(end - p));
		const char *kend = eq ? eq : end;
		char kbuf[128];

		if (sbx_url_decode(p, (size_t)(kend - p), kbuf, sizeof(kbuf)) == 0 && strlen(kbuf) == klen &&
		    memcmp(kbuf, key, klen) == 0) {
			const char *v = eq ? eq + 1 : end;
			if (sbx_url_decode(v, (size_t)(end - v), out, outsz) < 0)
				return sbx_err_set(err, 400, "invalid_query", "Malformed query parameter: %s", key);
			return 1;
		}
		if (!amp)
			break;
		p = amp + 1;
	}
	return 0;
}

static int parse_pos(const char *s, long max, long *out)
{
	char *end;
	long v;

	if (!*s || strspn(s, "0123456789") != strlen(s) || strlen(s) > 9)
		return -1;
	v = strtol(s, &end, 10);
	if (v < 1 || v > max)
		return -1;
	*out = v;
	return 0;
}

int sbx_page_parse(const char *qs, sbx_page *p, sbx_err *err)
{
	char buf[32];
	int r;

	p->page = 1;
	p->limit = SBX_PAGE_DEFAULT_LIMIT;
	r = sbx_query_get(qs, "page", buf, sizeof(buf), err);
	if (r < 0 || (r == 1 && parse_pos(buf, SBX_PAGE_MAX_PAGE, &p->page) < 0))
		return sbx_err_set(err, 400, "invalid_query", "page must be an integer between 1 and %d",
				   SBX_PAGE_MAX_PAGE);
	r = sbx_query_get(qs, "limit", buf, sizeof(buf), err);
	if (r < 0 || (r == 1 && parse_pos(buf, SBX_PAGE_MAX_LIMIT, &p->limit) < 0))
		return sbx_err_set(err, 400, "invalid_query", "limit must be an integer between 1 and %d",
				   SBX_PAGE_MAX_LIMIT);
	return 0;
}

long sbx_page_total_pages(long total, long limit)
{
	if (total <= 0 || limit <= 0)
		return 0;
	return total / limit + (total % limit != 0); /* no overflow near LONG_MAX */
}
