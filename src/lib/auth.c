#include "config.h"
#include <sodium.h>
#include <string.h>
#include "auth.h"
#include "id.h"

int sbx_auth_init(sbx_auth *a, const char *secret_hex, sbx_err *err)
{
	size_t bin_len = 0;

	if (!secret_hex || strlen(secret_hex) != 64 ||
	    sodium_hex2bin(a->secret, sizeof(a->secret), secret_hex, 64, NULL, &bin_len, NULL) != 0 ||
	    bin_len != sizeof(a->secret))
		return sbx_err_set(err, 0, "bad_config", "auth_secret must be 64 hex digits");
	return 0;
}

void sbx_auth_new_token(char out[SBX_KEY_TOKEN_LEN + 1])
{
	unsigned char b[32];

	randombytes_buf(b, sizeof(b));
	memcpy(out, SBX_KEY_PREFIX, 4);
	sbx_hex(b, sizeof(b), out + 4);
	sodium_memzero(b, sizeof(b));
}

bool sbx_auth_token_wellformed(const char *t)
{
	if (!t || strlen(t) != SBX_KEY_TOKEN_LEN || memcmp(t, SBX_KEY_PREFIX, 4) != 0)
		return false;
	for (size_t i = 4; i < SBX_KEY_TOKEN_LEN; i++)
		if (!((t[i] >= '0' && t[i] <= '9') || (t[i] >= 'a' && t[i] <= 'f')))
			return false;
	return true;
}

void sbx_auth_hash(const sbx_auth *a, const char *token, unsigned char out[SBX_KEY_HASH_LEN])
{
	crypto_generichash(out, SBX_KEY_HASH_LEN, (const unsigned char *)token, strlen(token),
			   a->secret, sizeof(a->secret));
}

bool sbx_auth_hash_equal(const unsigned char *a, const unsigned char *b)
{
	return sodium_memcmp(a, b, SBX_KEY_HASH_LEN) == 0;
}
