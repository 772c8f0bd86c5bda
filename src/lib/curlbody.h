/* A libcurl write callback that keeps an answer's body in memory, up to a
 * bound (CURLOPT_WRITEFUNCTION sbx_curl_body_write, CURLOPT_WRITEDATA the
 * struct): a larger answer stops the transfer (CURLE_WRITE_ERROR) with
 * too_big set. data is NUL-terminated once anything arrived; free() it. */
#ifndef SBX_CURLBODY_H
#define SBX_CURLBODY_H

#include <stdbool.h>
#include <stddef.h>

struct sbx_curl_body {
	char *data;
	size_t len;
	size_t max; /* bound of len */
	bool too_big;
};

size_t sbx_curl_body_write(char *p, size_t sz, size_t n, void *ud);

#endif
