/* BLAKE2b as RFC 7693 describes it (blake2b.h). */
#include "config.h"
#include <string.h>
#include "blake2b.h"

static const uint64_t iv[8] = {
	0x6a09e667f3bcc908ULL, 0xbb67ae8584caa73bULL, 0x3c6ef372fe94f82bULL, 0xa54ff53a5f1d36f1ULL,
	0x510e527fade682d1ULL, 0x9b05688c2b3e6c1fULL, 0x1f83d9abfb41bd6bULL, 0x5be0cd19137e2179ULL,
};

/* RFC 7693 2.7: the message word schedule of round r is sigma[r % 10] */
static const uint8_t sigma[10][16] = {
	{ 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15 },
	{ 14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3 },
	{ 11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4 },
	{ 7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8 },
	{ 9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13 },
	{ 2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9 },
	{ 12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11 },
	{ 13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10 },
	{ 6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5 },
	{ 10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0 },
};

static uint64_t rotr(uint64_t x, unsigned n)
{
	return (x >> n) | (x << (64 - n));
}

static uint64_t load64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

/* the mixing function G (RFC 7693 3.1) */
static void mix(uint64_t v[16], int a, int b, int c, int d, uint64_t x, uint64_t y)
{
	v[a] = v[a] + v[b] + x;
	v[d] = rotr(v[d] ^ v[a], 32);
	v[c] = v[c] + v[d];
	v[b] = rotr(v[b] ^ v[c], 24);
	v[a] = v[a] + v[b] + y;
	v[d] = rotr(v[d] ^ v[a], 16);
	v[c] = v[c] + v[d];
	v[b] = rotr(v[b] ^ v[c], 63);
}

/* the compression function F (RFC 7693 3.2) over s->buf */
static void compress(struct sbx_blake2b *s, int last)
{
	uint64_t v[16], m[16];

	for (int i = 0; i < 16; i++)
		m[i] = load64(s->buf + 8 * i);
	for (int i = 0; i < 8; i++) {
		v[i] = s->h[i];
		v[i + 8] = iv[i];
	}
	v[12] ^= s->t[0];
	v[13] ^= s->t[1];
	if (last)
		v[14] = ~v[14];
	for (int r = 0; r < 12; r++) {
		const uint8_t *z = sigma[r % 10];
		mix(v, 0, 4, 8, 12, m[z[0]], m[z[1]]);
		mix(v, 1, 5, 9, 13, m[z[2]], m[z[3]]);
		mix(v, 2, 6, 10, 14, m[z[4]], m[z[5]]);
		mix(v, 3, 7, 11, 15, m[z[6]], m[z[7]]);
		mix(v, 0, 5, 10, 15, m[z[8]], m[z[9]]);
		mix(v, 1, 6, 11, 12, m[z[10]], m[z[11]]);
		mix(v, 2, 7, 8, 13, m[z[12]], m[z[13]]);
		mix(v, 3, 4, 9, 14, m[z[14]], m[z[15]]);
	}
	for (int i = 0; i < 8; i++)
		s->h[i] ^= v[i] ^ v[i + 8];
}

static void count(struct sbx_blake2b *s, size_t n)
{
	s->t[0] += n;
	if (s->t[0] < n)
		s->t[1]++;
}

int sbx_blake2b_init(struct sbx_blake2b *s, size_t outlen, const void *key, size_t keylen)
{
	if (outlen < 1 || outlen > SBX_BLAKE2B_OUT_MAX || keylen > SBX_BLAKE2B_KEY_MAX || (keylen && !key))
		return -1;
	memset(s, 0, sizeof(*s));
	memcpy(s->h, iv, sizeof(s->h));
	/* the parameter block: digest length, key length, fanout 1, depth 1 */
	s->h[0] ^= 0x01010000ULL ^ ((uint64_t)keylen << 8) ^ outlen;
	s->outlen = outlen;
	if (keylen) {
		/* the key, zero-padded, is the first block */
		memcpy(s->buf, key, keylen);
		s->len = sizeof(s->buf);
	}
	return 0;
}

void sbx_blake2b_update(struct sbx_blake2b *s, const void *in, size_t n)
{
	const uint8_t *p = in;

	while (n > 0) {
		size_t k;
		/* a full buffer is compressed only once more input follows: the
		 * last block must go to final, flagged as last */
		if (s->len == sizeof(s->buf)) {
			count(s, sizeof(s->buf));
			compress(s, 0);
			s->len = 0;
		}
		k = sizeof(s->buf) - s->len;
		if (k > n)
			k = n;
		memcpy(s->buf + s->len, p, k);
		s->len += k;
		p += k;
		n -= k;
	}
}

void sbx_blake2b_final(struct sbx_blake2b *s, uint8_t *out)
{
	count(s, s->len);
	memset(s->buf + s->len, 0, sizeof(s->buf) - s->len);
	compress(s, 1);
	for (size_t i = 0; i < s->outlen; i++)
		out[i] = (uint8_t)(s->h[i / 8] >> (8 * (i % 8)));
	explicit_bzero(s, sizeof(*s));
}
