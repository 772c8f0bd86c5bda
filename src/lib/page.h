/* Query strings and pagination (?page=1&limit=15, limit 1..100). */
#ifndef SBX_PAGE_H
#define SBX_PAGE_H

#include <stdbool.h>
#include <stddef.h>
#include "err.h"

#define SBX_PAGE_DEFAULT_LIMIT 15
#define SBX_PAGE_MAX_LIMIT 100
#define SBX_PAGE_MAX_PAGE 1000000

/* Percent-decodes in[0..n) into out (outsz incl. NUL); '+' is a space.
 * Fails on bad escapes, on %00, and when it does not fit. */
int sbx_url_decode(const char *in, size_t n, char *out, size_t outsz);
/* Finds `key` in a raw query string and decodes its value. Returns 1 found,
 * 0 absent, -1 malformed (err filled, 400). */
int sbx_query_get(const char *qs, const char *key, char *out, size_t outsz, sbx_err *err);

typedef struct sbx_page {
	long page, limit;
} sbx_page;

int sbx_page_parse(const char *qs, sbx_page *p, sbx_err *err);
long sbx_page_total_pages(long total, long limit);

#endif
