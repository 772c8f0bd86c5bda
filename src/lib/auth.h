/* API keys: random 256-bit tokens shown once, stored as a keyed hash
 * (BLAKE2b keyed with the install's auth_secret). */
#ifndef SBX_AUTH_H
#define SBX_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include "err.h"

#define SBX_KEY_PREFIX "sbx_"
#define SBX_KEY_TOKEN_LEN (4 + 64) /* "sbx_" + 64 hex */
#define SBX_KEY_HASH_LEN 32
#define SBX_KEY_SHOWN_PREFIX_LEN 12 /* "sbx_" + 8 hex, safe to list */

typedef struct sbx_auth {
	unsigned char secret[32];
} sbx_auth;

int sbx_auth_init(sbx_auth *a, const char *secret_hex, sbx_err *err);
/* A new token (NUL-terminated, SBX_KEY_TOKEN_LEN chars). */
void sbx_auth_new_token(char out[SBX_KEY_TOKEN_LEN + 1]);
/* False for anything that is not a well-formed token (no hashing done). */
bool sbx_auth_token_wellformed(const char *token);
void sbx_auth_hash(const sbx_auth *a, const char *token, unsigned char out[SBX_KEY_HASH_LEN]);
/* Constant-time comparison of two hashes. */
bool sbx_auth_hash_equal(const unsigned char *a, const unsigned char *b);

#endif
