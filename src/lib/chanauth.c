/* The channel handshake's MACs and the host's side of it (chanauth.h). */
#include "config.h"
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>
#include "blake2b.h"
#include "chanauth.h"
#include "clock.h"
#include "hex.h"

#define MAC_TAG "sbx-chan3 "

void sbx_chan_mac(const uint8_t key[SBX_CHAN_KEY_LEN], const char *role,
		  const uint8_t nonce[SBX_CHAN_NONCE_LEN], const char *id, uint8_t out[SBX_CHAN_MAC_LEN])
{
	struct sbx_blake2b st;

	/* keyed BLAKE2b, as libsodium's crypto_generichash (blake2b.h) */
	(void)sbx_blake2b_init(&st, SBX_CHAN_MAC_LEN, key, SBX_CHAN_KEY_LEN);
	sbx_blake2b_update(&st, MAC_TAG, strlen(MAC_TAG));
	sbx_blake2b_update(&st, role, strlen(role) + 1);
	sbx_blake2b_update(&st, nonce, SBX_CHAN_NONCE_LEN);
	sbx_blake2b_update(&st, id, strlen(id));
	sbx_blake2b_final(&st, out);
}

int sbx_chan_mac_ok(const uint8_t key[SBX_CHAN_KEY_LEN], const char *role,
		    const uint8_t nonce[SBX_CHAN_NONCE_LEN], const char *id,
		    const uint8_t mac[SBX_CHAN_MAC_LEN])
{
	uint8_t want[SBX_CHAN_MAC_LEN];
	volatile uint8_t diff = 0;
	int ok;

	sbx_chan_mac(key, role, nonce, id, want);
	/* every byte compared, whatever the first difference (constant time) */
	for (size_t i = 0; i < SBX_CHAN_MAC_LEN; i++)
		diff |= want[i] ^ mac[i];
	ok = diff == 0;
	explicit_bzero(want, sizeof(want));
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
	if (!hex || strlen(hex) != SBX_CHAN_KEY_HEX)
		return sbx_err_set(err, 500, "chan", "a channel key is %d hex characters", SBX_CHAN_KEY_HEX);
	for (size_t i = 0; i < SBX_CHAN_KEY_LEN; i++) {
		int hi = sbx_hexval(hex[2 * i]), lo = sbx_hexval(hex[2 * i + 1]);
		if (hi < 0 || lo < 0) {
			explicit_bzero(key, SBX_CHAN_KEY_LEN);
			return sbx_err_set(err, 500, "chan", "a channel key is %d hex characters", SBX_CHAN_KEY_HEX);
		}
		key[i] = (uint8_t)(hi << 4 | lo);
	}
	return 0;
}

void sbx_chan_key_hex(const uint8_t key[SBX_CHAN_KEY_LEN], char out[SBX_CHAN_KEY_HEX + 1])
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < SBX_CHAN_KEY_LEN; i++) {
		out[2 * i] = digits[key[i] >> 4];
		out[2 * i + 1] = digits[key[i] & 15];
	}
	out[SBX_CHAN_KEY_HEX] = 0;
}

/* Is the frame of the expected type whole in h->buf? 1 yes (f points into
 * it), 0 not yet, -1 it is another or malformed. */
static int frame_in(struct sbx_chan_hs *h, uint8_t type, struct sbx_frame *f, sbx_err *err)
{
	long n = h->got ? sbx_frame_parse(h->buf, h->got, 1, f, err) : 0;

	if (n < 0)
		return sbx_err_ctx(err, "channel handshake");
	if (n == 0)
		return 0;
	if (f->type != type)
		return sbx_err_set(err, 500, "chan", "channel handshake: frame 0x%02x instead of 0x%02x", f->type,
				   type);
	if ((size_t)n != h->got)
		return sbx_err_set(err, 500, "chan", "channel handshake: bytes after frame 0x%02x", type);
	return 1;
}

/* One read towards the frame of the expected type (from inside), never past
 * it: 1 the frame is in, 0 not yet (nothing to read now, or part of it
 * read), -1 failed. */
static int take_frame(struct sbx_chan_hs *h, int fd, uint8_t type, struct sbx_frame *f, sbx_err *err)
{
	size_t want;
	ssize_t r;
	int rc = frame_in(h, type, f, err);

	if (rc != 0)
		return rc;
	/* one frame at a time: the header says how much more to take */
	want = h->got < SBX_FRAME_HDR ? SBX_FRAME_HDR - h->got : 0;
	if (!want) {
		uint32_t len = sbx_get32(h->buf);
		want = (size_t)len + 4 > h->got ? (size_t)len + 4 - h->got : 1;
	}
	if (h->got + want > sizeof(h->buf))
		return sbx_err_set(err, 500, "chan", "channel handshake: oversized frame");
	do
		r = read(fd, h->buf + h->got, want);
	while (r < 0 && errno == EINTR);
	if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		return 0;
	if (r <= 0)
		return sbx_err_set(err, 500, "chan", "channel closed during the handshake");
	h->got += (size_t)r;
	return frame_in(h, type, f, err);
}

static int write_all(int fd, const uint8_t *p, size_t n, sbx_err *err)
{
	while (n > 0) {
		ssize_t r = write(fd, p, n);
		if (r < 0 && errno == EINTR)
			continue;
		/* a fresh socket takes the 60 bytes at once, blocking or not */
		if (r <= 0)
			return sbx_err_sys(err, "chan", "channel handshake: write");
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

void sbx_chan_hs_init(struct sbx_chan_hs *h, const uint8_t key[SBX_CHAN_KEY_LEN], const char *id)
{
	memset(h, 0, sizeof(*h));
	memcpy(h->key, key, SBX_CHAN_KEY_LEN);
	snprintf(h->id, sizeof(h->id), "%s", id);
}

void sbx_chan_hs_clear(struct sbx_chan_hs *h)
{
	explicit_bzero(h, sizeof(*h));
}

int sbx_chan_hs_step(struct sbx_chan_hs *h, int fd, sbx_err *err)
{
	uint8_t mac[SBX_CHAN_MAC_LEN], out[SBX_FRAME_HDR + SBX_AUTH_LEN], nonce_i[SBX_CHAN_NONCE_LEN];
	struct sbx_frame f;
	uint32_t ver;
	int rc;

	if (h->step == SBX_HS_DONE)
		return 1;
	rc = take_frame(h, fd, h->step == SBX_HS_HELLO ? SBX_F_HELLO : SBX_F_AUTH_OK, &f, err);
	if (rc <= 0)
		return rc;
	h->got = 0;
	if (h->step == SBX_HS_AUTH_OK) {
		if (!sbx_chan_mac_ok(h->key, "init", h->nonce_n, h->id, f.payload))
			return sbx_err_set(err, 500, "chan", "the channel's sbx-init cannot prove it is sandbox %s",
					   h->id);
		h->step = SBX_HS_DONE;
		return 1;
	}
	if (sbx_hello_decode(&f, &ver, nonce_i, err) < 0)
		return -1;
	if (ver != SBX_FRAME_VERSION)
		return sbx_err_set(err, 500, "chan", "sbx-init speaks version %u, not %u", ver, SBX_FRAME_VERSION);
	if (sbx_chan_random(h->nonce_n, sizeof(h->nonce_n), err) < 0)
		return -1;
	sbx_chan_mac(h->key, "node", nonce_i, h->id, mac);
	sbx_frame_header(out, SBX_F_AUTH, 0, SBX_AUTH_LEN);
	sbx_auth_encode(h->nonce_n, mac, out + SBX_FRAME_HDR);
	if (write_all(fd, out, sizeof(out), err) < 0)
		return -1;
	h->step = SBX_HS_AUTH_OK;
	return 0;
}

int sbx_chan_client_handshake(int fd, const uint8_t key[SBX_CHAN_KEY_LEN], const char *id, int timeout_ms,
			      sbx_err *err)
{
	long long deadline = sbx_now_ms() + (timeout_ms > 0 ? timeout_ms : 1);
	struct sbx_chan_hs h;
	int rc;

	sbx_chan_hs_init(&h, key, id);
	/* one read per step, each after poll says there is something: a
	 * blocking socket never blocks past the deadline */
	for (;;) {
		struct pollfd p = { fd, POLLIN, 0 };
		long long left = deadline - sbx_now_ms();

		if (left <= 0) {
			rc = sbx_err_set(err, 504, "chan", "channel handshake: no frame 0x%02x in time",
					 h.step == SBX_HS_HELLO ? SBX_F_HELLO : SBX_F_AUTH_OK);
			break;
		}
		if (poll(&p, 1, (int)left) <= 0)
			continue;
		if ((rc = sbx_chan_hs_step(&h, fd, err)) != 0)
			break;
	}
	sbx_chan_hs_clear(&h);
	return rc < 0 ? -1 : 0;
}
