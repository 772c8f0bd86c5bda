/* Proves: pagination defaults to page 1, limit 15; limit must be 1..100 and
 * page >= 1 (non-numeric, negative, signed, overflowing and empty values are
 * 400s); keys and values are percent-decoded; sbx_url_decode refuses %00, bad
 * and truncated escapes and output that does not fit; total pages round up. */
#include "config.h"
#include <limits.h>
#include <string.h>
#include "page.h"
#include "../tap.h"

static sbx_err err;
static sbx_page pg;

static int pp(const char *qs)
{
	sbx_err_clear(&err);
	pg.page = pg.limit = -7;
	return sbx_page_parse(qs, &pg, &err);
}

static void page_is(const char *qs, long page, long limit)
{
	int r = pp(qs);

	ok(r == 0 && pg.page == page && pg.limit == limit, "'%s' -> page %ld limit %ld", qs ? qs : "(null)",
	   page, limit);
	if (r)
		diag("error: %s", err.msg);
	else if (pg.page != page || pg.limit != limit)
		diag("got page %ld limit %ld", pg.page, pg.limit);
}

static void page_bad(const char *qs, const char *what)
{
	int r = pp(qs);

	ok(r == -1 && err.http == 400 && strstr(err.msg, what), "'%s' is a 400 about %s", qs, what);
	if (r == 0)
		diag("accepted: page %ld limit %ld", pg.page, pg.limit);
	else if (err.http != 400 || !strstr(err.msg, what))
		diag("got %d: %s", err.http, err.msg);
}

static int dec(const char *in, char *out, size_t outsz)
{
	return sbx_url_decode(in, strlen(in), out, outsz);
}

int main(void)
{
	char buf[64];

	page_is(NULL, 1, 15);
	page_is("", 1, 15);
	page_is("foo=bar", 1, 15);
	page_is("page=2", 2, 15);
	page_is("limit=1", 1, 1);
	page_is("limit=100", 1, 100);
	page_is("page=3&limit=50", 3, 50);
	page_is("limit=50&page=3", 3, 50);
	page_is("x=1&page=2&y=&limit=7&z", 2, 7);
	page_is("page=1000000", 1000000, 15);
	page_is("page=0007", 7, 15);
	page_is("pa%67e=4&li%6Dit=9", 4, 9);
	page_is("page=%34&limit=1%30", 4, 10);
	page_is("pagex=5&xlimit=6", 1, 15);
	page_is("page=2&page=3", 2, 15);

	page_bad("limit=0", "limit");
	page_bad("limit=101", "limit");
	page_bad("limit=-1", "limit");
	page_bad("limit=+5", "limit");
	page_bad("limit=%2B5", "limit");
	page_bad("limit=5x", "limit");
	page_bad("limit=abc", "limit");
	page_bad("limit=", "limit");
	page_bad("limit", "limit");
	page_bad("limit=1.5", "limit");
	page_bad("limit= 5", "limit");
	page_bad("limit=0x10", "limit");
	page_bad("limit=99999999999999999999", "limit");
	page_bad("limit=1%00", "limit");
	page_bad("limit=%zz", "limit");
	page_bad("page=0", "page");
	page_bad("page=-3", "page");
	page_bad("page=1000001", "page");
	page_bad("page=9223372036854775808", "page");
	page_bad("page=99999999999999999999999999999999999999", "page");
	page_bad("page=", "page");
	page_bad("page=two", "page");
	page_bad("page=1&limit=1000", "limit");

	{
		int r;
		sbx_err_clear(&err);
		r = sbx_query_get("a=1&b=x%20y+z&c", "b", buf, sizeof(buf), &err);
		ok(r == 1 && !strcmp(buf, "x y z"), "sbx_query_get decodes %%20 and '+' to spaces");
		r = sbx_query_get("a=1&b=2&c", "c", buf, sizeof(buf), &err);
		ok(r == 1 && !strcmp(buf, ""), "a key without '=' is found with an empty value");
		r = sbx_query_get("a=1", "b", buf, sizeof(buf), &err);
		is_int(r, 0, "an absent key gives 0");
		r = sbx_query_get(NULL, "b", buf, sizeof(buf), &err);
		is_int(r, 0, "a NULL query gives 0");
		r = sbx_query_get("b=%G0", "b", buf, sizeof(buf), &err);
		is_int(r, -1, "a bad escape in the value gives -1");
		is_int(err.http, 400, "... as a 400");
		r = sbx_query_get("b=0123456789", "b", buf, 5, &err);
		is_int(r, -1, "a value that does not fit gives -1 (never truncated)");
		r = sbx_query_get("%zz=1&b=2", "b", buf, sizeof(buf), &err);
		ok(r == 1 && !strcmp(buf, "2"), "a malformed other key does not hide the one asked for");
		r = sbx_query_get("&&b=3&", "b", buf, sizeof(buf), &err);
		ok(r == 1 && !strcmp(buf, "3"), "empty pairs are skipped");
		r = sbx_query_get("b%00=1", "b", buf, sizeof(buf), &err);
		is_int(r, 0, "a key with %%00 does not match a shorter key");
	}

	is_int(dec("a%20b", buf, sizeof(buf)), 0, "url_decode decodes %%20");
	is_str(buf, "a b", "... to a space");
	dec("a+b", buf, sizeof(buf));
	is_str(buf, "a b", "url_decode turns '+' into a space");
	dec("%41%6a%6A", buf, sizeof(buf));
	is_str(buf, "Ajj", "url_decode accepts upper- and lower-case hex");
	dec("%2F", buf, sizeof(buf));
	is_str(buf, "/", "url_decode decodes %%2F (the router refuses it, not the decoder)");
	is_int(dec("%00", buf, sizeof(buf)), -1, "url_decode refuses %%00");
	is_int(dec("a%00b", buf, sizeof(buf)), -1, "url_decode refuses an embedded %%00");
	is_int(dec("%", buf, sizeof(buf)), -1, "url_decode refuses a lone '%%'");
	is_int(dec("%4", buf, sizeof(buf)), -1, "url_decode refuses a truncated escape");
	is_int(dec("ab%4", buf, sizeof(buf)), -1, "url_decode refuses a truncated escape at the end");
	is_int(dec("%g1", buf, sizeof(buf)), -1, "url_decode refuses a non-hex escape");
	is_int(dec("%1g", buf, sizeof(buf)), -1, "url_decode refuses a non-hex second digit");
	is_int(dec("% 1", buf, sizeof(buf)), -1, "url_decode refuses a space in an escape");
	is_int(dec("", buf, sizeof(buf)), 0, "url_decode accepts the empty string");
	is_str(buf, "", "... giving the empty string");
	is_int(dec("abcd", buf, 5), 0, "url_decode fills a buffer exactly (4 chars + NUL in 5)");
	is_int(dec("abcde", buf, 5), -1, "url_decode refuses output that does not fit");
	is_int(dec("", buf, 0), -1, "url_decode refuses a zero-sized buffer");
	is_int(sbx_url_decode("%41", 2, buf, sizeof(buf)), -1,
	       "url_decode honours n: an escape cut by n is truncated");

	is_int(sbx_page_total_pages(0, 15), 0, "0 items are 0 pages");
	is_int(sbx_page_total_pages(1, 15), 1, "1 item is 1 page");
	is_int(sbx_page_total_pages(15, 15), 1, "15 items of 15 are 1 page");
	is_int(sbx_page_total_pages(16, 15), 2, "16 items of 15 are 2 pages");
	is_int(sbx_page_total_pages(100, 1), 100, "100 items of 1 are 100 pages");
	is_int(sbx_page_total_pages(-1, 15), 0, "a negative total is 0 pages");
	is_int(sbx_page_total_pages(10, 0), 0, "a zero limit is 0 pages (no division by zero)");
	is_int(sbx_page_total_pages(LONG_MAX, 100), LONG_MAX / 100 + 1,
	       "a huge total does not overflow");
	return done_testing();
}
