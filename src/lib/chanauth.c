/* The channel handshake's MACs and the host's side of it (chanauth.h). */
#include "config.h"
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>
#include <sodium.h>
#include "chanauth.h"
#include "clock.h"

#define MAC_TAG "sbx-chan3 "

void sbx_chan_mac(const uint8_t key[SBX_CHAN_KEY_LEN], const char *role,
		  const uint8_t nonce[SBX_CHAN_NONCE_LEN], const char *id, uint8_t out[SBX_CHAN_MAC_LEN])
{
	crypto_generichash_state st;

	crypto_generichash_init(&st, key, SBX_CHAN_KEY_LEN, SBX_CHAN_MAC_LEN);
	crypto_generichash_update(&st, (const unsigned char *)MAC_TAG, strlen(MAC_TAG));
	crypto_generichash_update(&st, (const unsigned char *)role, strlen(role) + 1);
	crypto_generichash_update(&st, nonce, SBX_CHAN_NONCE_LEN);
	crypto_generichash_update(&st, (const unsigned char *)id, strlen(id));
	crypto_generichash_final(&st, out, SBX_CHAN_MAC_LEN);
	sodium_memzero(&st, sizeof(st));
}

int sbx_chan_mac_ok(const uint8_t key[SBX_CHAN_KEY_LEN], const char *role,
		    const uint8_t nonce[SBX_CHAN_NONCE_LEN], const char *id,
		    const uint8_t mac[SBX_CHAN_MAC_LEN])
{
	uint8_t want[SBX_CHAN_MAC_LEN];
	int ok;

	sbx_chan_mac(key, role, nonce, id, want);
	ok = sodium_memcmp(want, mac, SBX_CHAN_MAC_LEN) == 0;
	sodium_memzero(want, sizeof(want));
	return ok;
}

int sbx_chan_random(uint8_t *out, size_t n, sbx_err *err)
{
	size_t got = 0;

	while (got < n) {
		ssize_t r = getrandom(out + got, n - got, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return sbx_err_sys(err, "chan", "getrandom");
		got += (size_t)r;
	}
	return 0;
}

int sbx_chan_key_parse(const char *hex, uint8_t key[SBX_CHAN_KEY_LEN], sbx_err *err)
{
	size_t bin_len = 0;

	if (!hex || strlen(hex) != SBX_CHAN_KEY_HEX ||
	    sodium_hex2bin(key, SBX_CHAN_KEY_LEN, hex, SBX_CHAN_KEY_HEX, NULL, &bin_len, NULL) != 0 ||
	    bin_len != SBX_CHAN_KEY_LEN)
		return sbx_err_set(err, 500, "chan", "a channel key is %d hex characters", SBX_CHAN_KEY_HEX);
	return 0;
}

void sbx_chan_key_hex(const uint8_t key[SBX_CHAN_KEY_LEN], char out[SBX_CHAN_KEY_HEX + 1])
{
	sodium_bin2hex(out, SBX_CHAN_KEY_HEX + 1, key, SBX_CHAN_KEY_LEN);
}

/* Reads exactly one frame of the expected type (from inside) into buf. */
static int read_frame(int fd, uint8_t type, uint8_t *buf, size_t cap, long long deadline,
		      struct sbx_frame *f, sbx_err *err)
{
	size_t got = 0;

	for (;;) {
		struct pollfd p = { fd, POLLIN, 0 };
		long long left = deadline - sbx_now_ms();
		long n;
		ssize_t r;

		if (got > 0) {
			n = sbx_frame_parse(buf, got, 1, f, err);
			if (n < 0)
				return sbx_err_ctx(err, "channel handshake");
			if (n > 0) {
				if (f->type != type)
					return sbx_err_set(err, 500, "chan",
							   "channel handshake: frame 0x%02x instead of 0x%02x",
							   f->type, type);
				if ((size_t)n != got)
					return sbx_err_set(err, 500, "chan",
							   "channel handshake: bytes after frame 0x%02x", type);
				return 0;
			}
		}
		if (left <= 0)
			return sbx_err_set(err, 504, "chan", "channel handshake: no frame 0x%02x in time", type);
		if (poll(&p, 1, (int)left) <= 0)
			continue;
		/* one frame at a time: the header says how much more to take */
		size_t want = got < SBX_FRAME_HDR ? SBX_FRAME_HDR - got : 0;
		if (!want) {
			uint32_t len = sbx_get32(buf);
			want = (size_t)len + 4 > got ? (size_t)len + 4 - got : 1;
		}
		if (got + want > cap)
			return sbx_err_set(err, 500, "chan", "channel handshake: oversized frame");
		r = read(fd, buf + got, want);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return sbx_err_set(err, 500, "chan", "channel closed during the handshake");
		got += (size_t)r;
	}
}

static int write_all(int fd, const uint8_t *p, size_t n, sbx_err *err)
{
	while (n > 0) {
		ssize_t r = write(fd, p, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return sbx_err_sys(err, "chan", "channel handshake: write");
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

int sbx_chan_client_handshake(int fd, const uint8_t key[SBX_CHAN_KEY_LEN], const char *id, int timeout_ms,
			      sbx_err *err)
{
	uint8_t buf[SBX_FRAME_HDR + SBX_AUTH_LEN + 16], nonce_i[SBX_CHAN_NONCE_LEN], nonce_n[SBX_CHAN_NONCE_LEN];
	uint8_t mac[SBX_CHAN_MAC_LEN], out[SBX_FRAME_HDR + SBX_AUTH_LEN];
	long long deadline = sbx_now_ms() + (timeout_ms > 0 ? timeout_ms : 1);
	struct sbx_frame f;
	uint32_t ver;

	if (read_frame(fd, SBX_F_HELLO, buf, sizeof(buf), deadline, &f, err) < 0)
		return -1;
	if (sbx_hello_decode(&f, &ver, nonce_i, err) < 0)
		return -1;
	if (ver != SBX_FRAME_VERSION)
		return sbx_err_set(err, 500, "chan", "sbx-init speaks version %u, not %u", ver, SBX_FRAME_VERSION);
	if (sbx_chan_random(nonce_n, sizeof(nonce_n), err) < 0)
		return -1;
	sbx_chan_mac(key, "node", nonce_i, id, mac);
	sbx_frame_header(out, SBX_F_AUTH, 0, SBX_AUTH_LEN);
	sbx_auth_encode(nonce_n, mac, out + SBX_FRAME_HDR);
	if (write_all(fd, out, sizeof(out), err) < 0)
		return -1;
	if (read_frame(fd, SBX_F_AUTH_OK, buf, sizeof(buf), deadline, &f, err) < 0)
		return -1;
	if (!sbx_chan_mac_ok(key, "init", nonce_n, id, f.payload))
		return sbx_err_set(err, 500, "chan", "the channel's sbx-init cannot prove it is sandbox %s", id);
	return 0;
}
