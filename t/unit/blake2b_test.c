/* Proves: blake2b.c is BLAKE2b: RFC 7693's vector, and libsodium's
 * crypto_generichash for every key length, digest length and message
 * length tried (block boundaries, input fed in pieces); bad lengths are
 * refused; and the channel MAC (chanauth.c, now blake2b.c's) is the one
 * libsodium computed before, so a node and an sbx-init of either build
 * still agree. */
#include "config.h"
#include <stdio.h>
#include <string.h>
#include <sodium.h>
#include "blake2b.h"
#include "chanauth.h"
#include "../tap.h"

static void hex(const uint8_t *p, size_t n, char *out)
{
	for (size_t i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", p[i]);
}

/* one digest by blake2b.c, the input fed in pieces of `piece` bytes */
static void ours(uint8_t *out, size_t outlen, const uint8_t *key, size_t keylen, const uint8_t *m, size_t n,
		 size_t piece)
{
	struct sbx_blake2b s;

	sbx_blake2b_init(&s, outlen, key, keylen);
	for (size_t i = 0; i < n; i += piece)
		sbx_blake2b_update(&s, m + i, n - i < piece ? n - i : piece);
	sbx_blake2b_final(&s, out);
}

int main(void)
{
	static const char abc512[] = "ba80a53f981c4d0d6a2797b69f12f6e94c212f14685ac4b74b12bb6fdbffa2d1"
				     "7d87c5392aab792dc252d5de4533cc9518d38aa8dbf1925ab92386edd4009923";
	static const size_t keylens[] = { 0, 1, 16, 32, 63, 64 }, outlens[] = { 1, 16, 20, 32, 48, 64 },
			    pieces[] = { 1, 7, 128, 1000 };
	uint8_t key[64], msg[1200], a[64], b[64];
	char h[129];
	struct sbx_blake2b s;
	int cases = 0, bad = 0;

	plan(7);
	if (sodium_init() < 0)
		return 1;

	ours(a, 64, NULL, 0, (const uint8_t *)"abc", 3, 3);
	hex(a, 64, h);
	is_str(h, abc512, "BLAKE2b-512(\"abc\") is RFC 7693's appendix A");

	randombytes_buf(key, sizeof(key));
	randombytes_buf(msg, sizeof(msg));
	for (size_t k = 0; k < sizeof(keylens) / sizeof(keylens[0]); k++)
		for (size_t o = 0; o < sizeof(outlens) / sizeof(outlens[0]); o++)
			for (size_t n = 0; n <= sizeof(msg); n += n < 300 ? 1 : 67) {
				size_t piece = pieces[(k + o + n) % 4];
				ours(a, outlens[o], key, keylens[k], msg, n, piece);
				crypto_generichash(b, outlens[o], msg, n, keylens[k] ? key : NULL, keylens[k]);
				cases++;
				if (memcmp(a, b, outlens[o]) && bad++ < 3)
					diag("differs: key %zu, digest %zu, message %zu bytes", keylens[k], outlens[o], n);
			}
	ok(bad == 0, "libsodium's crypto_generichash, the same in %d cases (keys 0-64, digests 1-64, "
		     "messages 0-1200 bytes, fed in pieces of 1-1000)", cases);

	ok(sbx_blake2b_init(&s, 0, NULL, 0) < 0, "a digest of 0 bytes is refused");
	ok(sbx_blake2b_init(&s, 65, NULL, 0) < 0, "a digest of 65 bytes is refused");
	ok(sbx_blake2b_init(&s, 32, key, 65) < 0, "a key of 65 bytes is refused");

	/* the handshake's MAC as chanauth.c computed it with libsodium */
	{
		uint8_t ck[SBX_CHAN_KEY_LEN], nonce[SBX_CHAN_NONCE_LEN], mac[SBX_CHAN_MAC_LEN],
			want[SBX_CHAN_MAC_LEN];
		const char *id = "0123456789abcdef01234567";
		crypto_generichash_state st;

		randombytes_buf(ck, sizeof(ck));
		randombytes_buf(nonce, sizeof(nonce));
		crypto_generichash_init(&st, ck, sizeof(ck), sizeof(want));
		crypto_generichash_update(&st, (const unsigned char *)"sbx-chan3 ", 10);
		crypto_generichash_update(&st, (const unsigned char *)"host", 5);
		crypto_generichash_update(&st, nonce, sizeof(nonce));
		crypto_generichash_update(&st, (const unsigned char *)id, strlen(id));
		crypto_generichash_final(&st, want, sizeof(want));
		sbx_chan_mac(ck, "host", nonce, id, mac);
		ok(!memcmp(mac, want, sizeof(mac)), "the channel MAC is libsodium's of the same input");
		ok(sbx_chan_mac_ok(ck, "host", nonce, id, want), "and libsodium's MAC passes sbx_chan_mac_ok");
	}
	return done_testing();
}
