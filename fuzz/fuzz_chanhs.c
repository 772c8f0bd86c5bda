/* libFuzzer target: the host's side of the channel handshake, step by step
 * (src/lib/chanauth.c sbx_chan_hs_step), as the node agent's loop runs it on
 * a non-blocking socket against a hostile sbx-init. Byte 0 picks how the
 * rest arrives (in pieces of 1..16 bytes, or whole); the rest is what
 * sbx-init sends. Checks: a step never fails without a message; it never
 * succeeds (the input cannot know the random key's MAC); it never takes
 * more than the HELLO frame and one more (bounded by its buffer), so what
 * follows the handshake stays for the relay; and it never blocks. */
#include "config.h"
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include "chanauth.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define require(c) do { if (!(c)) __builtin_trap(); } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint8_t key[SBX_CHAN_KEY_LEN] = { 7 };
	struct sbx_chan_hs h;
	sbx_err err = SBX_ERR_INIT;
	size_t piece, off = 1, left_in_sock;
	int sv[2], rc = 0;
	uint8_t sink[256];
	ssize_t n;

	if (size < 1 || size > 4096)
		return 0;
	piece = data[0] & 0x80 ? size : (size_t)(data[0] & 15) + 1;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) < 0)
		return 0;
	sbx_chan_hs_init(&h, key, "0123456789abcdef01234567");
	while (rc == 0) {
		size_t k = size - off < piece ? size - off : piece;
		int idle = 0;
		if (k && write(sv[1], data + off, k) != (ssize_t)k)
			break;
		off += k;
		/* steps until one makes no progress with nothing more to come */
		while ((rc = sbx_chan_hs_step(&h, sv[0], &err)) == 0 && idle++ < 64)
			;
		if (rc == 0 && off == size)
			break;
	}
	require(rc != 1);
	if (rc < 0)
		require(err.msg[0]);
	/* what the steps did not take is still in the socket (of what was
	 * written: a step that fails ends the writing) */
	left_in_sock = 0;
	while ((n = read(sv[0], sink, sizeof(sink))) > 0)
		left_in_sock += (size_t)n;
	require(off - 1 - left_in_sock <= 2 * sizeof(h.buf));
	/* the AUTH it wrote, if it got that far, is all the far end sees */
	while (read(sv[1], sink, sizeof(sink)) > 0)
		;
	sbx_chan_hs_clear(&h);
	sbx_err_clear(&err);
	close(sv[0]);
	close(sv[1]);
	return 0;
}
