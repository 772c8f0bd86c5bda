/* Proves: API tokens are "sbx_" + 64 lowercase hex and distinct; the
 * well-formedness check refuses every other shape before any hashing; the
 * keyed hash depends on both the install secret and the token and is
 * deterministic; the constant-time comparison tells equal from unequal;
 * sbx_auth_init refuses secrets that are not 64 hex digits. */
#include "config.h"
#include <sodium.h>
#include <string.h>
#include "auth.h"
#include "../tap.h"

#define SECRET1 "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
#define SECRET2 "ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100"

int main(void)
{
	sbx_auth a1, a2, a1b;
	sbx_err err = SBX_ERR_INIT;
	char t1[SBX_KEY_TOKEN_LEN + 1], t2[SBX_KEY_TOKEN_LEN + 1], bad[SBX_KEY_TOKEN_LEN + 8];
	unsigned char h1[SBX_KEY_HASH_LEN], h1b[SBX_KEY_HASH_LEN], h2[SBX_KEY_HASH_LEN],
		h3[SBX_KEY_HASH_LEN];

	if (sodium_init() < 0)
		bail_out("sodium_init failed");

	sbx_auth_new_token(t1);
	sbx_auth_new_token(t2);
	is_int(strlen(t1), SBX_KEY_TOKEN_LEN, "a token is %d characters", SBX_KEY_TOKEN_LEN);
	ok(!strncmp(t1, "sbx_", 4), "a token starts with sbx_");
	is_int(strspn(t1 + 4, "0123456789abcdef"), 64, "a token has 64 lowercase hex after the prefix");
	ok(sbx_auth_token_wellformed(t1), "a new token is well-formed");
	ok(strcmp(t1, t2) != 0, "two new tokens differ");

	ok(!sbx_auth_token_wellformed(NULL), "NULL is not well-formed");
	ok(!sbx_auth_token_wellformed(""), "the empty string is not well-formed");
	memcpy(bad, t1, sizeof(t1));
	bad[0] = 'S';
	ok(!sbx_auth_token_wellformed(bad), "a wrong prefix is refused");
	memcpy(bad, t1, sizeof(t1));
	bad[10] = 'A';
	ok(!sbx_auth_token_wellformed(bad), "upper-case hex is refused");
	memcpy(bad, t1, sizeof(t1));
	bad[20] = 'g';
	ok(!sbx_auth_token_wellformed(bad), "a non-hex character is refused");
	memcpy(bad, t1, sizeof(t1));
	bad[SBX_KEY_TOKEN_LEN - 1] = 0;
	ok(!sbx_auth_token_wellformed(bad), "one character short is refused");
	memcpy(bad, t1, SBX_KEY_TOKEN_LEN);
	bad[SBX_KEY_TOKEN_LEN] = 'a';
	bad[SBX_KEY_TOKEN_LEN + 1] = 0;
	ok(!sbx_auth_token_wellformed(bad), "one character long is refused");
	ok(!sbx_auth_token_wellformed("sbx_"), "the bare prefix is refused");

	is_int(sbx_auth_init(&a1, SECRET1, &err), 0, "a 64-hex secret is accepted");
	is_int(sbx_auth_init(&a1b, SECRET1, &err), 0, "the same secret again is accepted");
	is_int(sbx_auth_init(&a2, SECRET2, &err), 0, "another 64-hex secret is accepted");
	{
		sbx_auth a3;
		sbx_err_clear(&err);
		is_int(sbx_auth_init(&a3, NULL, &err), -1, "a NULL secret is refused");
		like(err.msg, "64 hex", "the error says the secret must be 64 hex digits");
		is_int(sbx_auth_init(&a3, "", &err), -1, "an empty secret is refused");
		is_int(sbx_auth_init(&a3, SECRET1 "0", &err), -1, "65 hex digits are refused");
		is_int(sbx_auth_init(&a3, "0011223344556677889900112233445566778899aabbccddeeff0011223344x5",
				     &err), -1, "a non-hex character is refused");
		is_int(sbx_auth_init(&a3, "0011223344556677889900112233445566778899aabbccddeeff00112233445",
				     &err), -1, "63 hex digits are refused");
	}

	sbx_auth_hash(&a1, t1, h1);
	sbx_auth_hash(&a1b, t1, h1b);
	sbx_auth_hash(&a2, t1, h2);
	sbx_auth_hash(&a1, t2, h3);
	ok(!memcmp(h1, h1b, sizeof(h1)), "the hash is deterministic for the same secret and token");
	ok(memcmp(h1, h2, sizeof(h1)) != 0, "another secret gives another hash");
	ok(memcmp(h1, h3, sizeof(h1)) != 0, "another token gives another hash");
	ok(sbx_auth_hash_equal(h1, h1b), "hash_equal is true for equal hashes");
	ok(!sbx_auth_hash_equal(h1, h2), "hash_equal is false for different hashes");
	memcpy(h3, h1, sizeof(h1));
	h3[SBX_KEY_HASH_LEN - 1] ^= 1;
	ok(!sbx_auth_hash_equal(h1, h3), "hash_equal sees a difference in the last bit");
	memcpy(h3, h1, sizeof(h1));
	h3[0] ^= 0x80;
	ok(!sbx_auth_hash_equal(h1, h3), "hash_equal sees a difference in the first bit");
	{
		/* a known answer: BLAKE2b-256 keyed with SECRET1 over a fixed token */
		unsigned char want[SBX_KEY_HASH_LEN], key[32];
		const char *tok = "sbx_0000000000000000000000000000000000000000000000000000000000000000";
		sodium_hex2bin(key, sizeof(key), SECRET1, 64, NULL, NULL, NULL);
		crypto_generichash(want, sizeof(want), (const unsigned char *)tok, strlen(tok), key,
				   sizeof(key));
		sbx_auth_hash(&a1, tok, h3);
		ok(!memcmp(h3, want, sizeof(want)),
		   "the hash is BLAKE2b-256 of the token keyed with the decoded secret");
	}
	return done_testing();
}
