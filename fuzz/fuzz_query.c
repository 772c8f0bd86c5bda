/* libFuzzer target: a raw query string through sbx_page_parse, sbx_query_get
 * and sbx_url_decode. Checks: accepted pages are in 1..1000000 and limits in
 * 1..100, decoded values fit their buffer and never contain a NUL that the
 * input did not, errors are 400s. */
#include "config.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "page.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define require(c) do { if (!(c)) __builtin_trap(); } while (0)

static const char *const keys[] = { "page", "limit", "follow", "list", "a", "" };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	sbx_err err = SBX_ERR_INIT;
	sbx_page p;
	char *qs, out[64];
	size_t outsz;
	int r;

	if (size < 1)
		return 0;
	/* byte 0 picks the key and the output buffer size; the rest is the query */
	outsz = 1 + (data[0] >> 3) % sizeof(out);
	qs = malloc(size);
	if (!qs)
		return 0;
	memcpy(qs, data + 1, size - 1);
	qs[size - 1] = 0;

	if (sbx_page_parse(qs, &p, &err) == 0) {
		require(p.page >= 1 && p.page <= SBX_PAGE_MAX_PAGE);
		require(p.limit >= 1 && p.limit <= SBX_PAGE_MAX_LIMIT);
		require(sbx_page_total_pages(p.page * p.limit, p.limit) == p.page);
	} else {
		require(err.http == 400 && err.msg[0]);
	}

	memset(out, 'X', sizeof(out));
	r = sbx_query_get(qs, keys[data[0] % (sizeof(keys) / sizeof(keys[0]))], out, outsz, &err);
	require(r >= -1 && r <= 1);
	if (r == 1)
		require(memchr(out, 0, outsz) != NULL);
	else if (r < 0)
		require(err.http == 400);

	/* the decoder on the whole input: output never longer than the input */
	{
		size_t n = strlen(qs);
		char *dec = malloc(n + 1);
		if (dec) {
			if (sbx_url_decode(qs, n, dec, n + 1) == 0) {
				require(strlen(dec) <= n);
				if (!strchr(qs, '%') && !strchr(qs, '+'))
					require(!strcmp(dec, qs));
			}
			free(dec);
		}
	}
	free(qs);
	return 0;
}
