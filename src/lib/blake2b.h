/* BLAKE2b (RFC 7693), keyed, for the channel handshake's MAC (chanauth.c).
 *
 * Written from the RFC so that sbx-init, which is linked static against
 * musl (src/init/local.mk), needs no libsodium; its output is libsodium's
 * crypto_generichash for the same key, length and input (t/unit/blake2b_test.c
 * checks both against each other and the RFC's vector). */
#ifndef SBX_BLAKE2B_H
#define SBX_BLAKE2B_H

#include <stddef.h>
#include <stdint.h>

#define SBX_BLAKE2B_OUT_MAX 64
#define SBX_BLAKE2B_KEY_MAX 64

struct sbx_blake2b {
	uint64_t h[8];
	uint64_t t[2]; /* bytes compressed so far, 128-bit */
	uint8_t buf[128];
	size_t len; /* bytes in buf */
	size_t outlen;
};

/* outlen 1..64, keylen 0..64 (key may be NULL when 0): 0, or -1 for bad
 * lengths. */
int sbx_blake2b_init(struct sbx_blake2b *s, size_t outlen, const void *key, size_t keylen);
void sbx_blake2b_update(struct sbx_blake2b *s, const void *in, size_t n);
/* Writes outlen bytes and wipes the state. */
void sbx_blake2b_final(struct sbx_blake2b *s, uint8_t *out);

#endif
