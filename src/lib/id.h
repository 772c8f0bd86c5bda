/* Object ids (24 lowercase hex = 96 random bits) and request ids. */
#ifndef SBX_ID_H
#define SBX_ID_H

#include <stdbool.h>
#include <stddef.h>

#define SBX_ID_LEN 24

/* out must hold SBX_ID_LEN + 1 bytes. Needs sodium_init() first. */
void sbx_id_new(char out[SBX_ID_LEN + 1]);
bool sbx_id_valid(const char *s);
bool sbx_id_valid_n(const char *s, size_t n);
/* A client-chosen request id is kept when it is 1..64 of [A-Za-z0-9._-]. */
bool sbx_request_id_valid(const char *s);
void sbx_hex(const unsigned char *in, size_t n, char *out /* 2n+1 */);

#endif
