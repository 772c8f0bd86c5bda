#include "config.h"
#include <stdlib.h>
#include <string.h>
#include "curlbody.h"

size_t sbx_curl_body_write(char *p, size_t sz, size_t n, void *ud)
{
	struct sbx_curl_body *b = ud;
	size_t add = sz * n;
	char *nb;

	if (b->len + add > b->max) {
		b->too_big = true;
		return 0;
	}
	nb = realloc(b->data, b->len + add + 1);
	if (!nb)
		return 0;
	memcpy(nb + b->len, p, add);
	b->data = nb;
	b->len += add;
	b->data[b->len] = 0;
	return add;
}
