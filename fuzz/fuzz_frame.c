/* libFuzzer target: the channel's frame codec (src/lib/frame.c), the parser
 * of everything that comes out of a sandbox. Byte 0 picks the direction;
 * the rest is parsed as a stream of frames, and also decoded whole as an
 * EXEC payload. Checks: a parsed frame lies inside the input, its size is
 * header + payload, its type belongs to that direction; decoded EXEC
 * strings lie inside the payload, are NUL-terminated there, and encoding
 * the decoded request gives back exactly the same bytes (the format is
 * canonical); errors always carry a message. */
#include "config.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "frame.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define require(c) do { if (!(c)) __builtin_trap(); } while (0)

static int inside(const void *s, const uint8_t *p, size_t n)
{
	const uint8_t *q = s;

	return q >= p && q < p + n && memchr(q, 0, (size_t)(p + n - q)) != NULL;
}

static void check_exec(const uint8_t *p, size_t n)
{
	sbx_err err = SBX_ERR_INIT;
	struct sbx_exec_req req;
	uint8_t *enc;
	size_t elen;

	if (sbx_exec_decode(p, n, &req, &err) < 0) {
		require(err.msg[0]);
		return;
	}
	require(req.argc >= 1 && req.argc <= SBX_EXEC_MAX_ARGS);
	require(req.envc >= 0 && req.envc <= SBX_EXEC_MAX_ARGS);
	require(inside(req.cwd, p, n) && req.cwd[0] == '/');
	for (int i = 0; i < req.argc; i++)
		require(inside(req.argv[i], p, n));
	for (int i = 0; i < req.envc; i++)
		require(inside(req.envp[i], p, n) && strchr(req.envp[i], '='));
	require(req.argv[req.argc] == NULL && req.envp[req.envc] == NULL);
	require(sbx_exec_encode(&req, &enc, &elen, &err) == 0);
	require(elen == n && memcmp(enc, p, n) == 0);
	free(enc);
	sbx_exec_req_free(&req);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	sbx_err err = SBX_ERR_INIT;
	struct sbx_frame f;
	int from_inside;
	size_t off;
	long r;

	if (size < 1)
		return 0;
	from_inside = data[0] & 1;
	data++;
	size--;
	check_exec(data, size);

	for (off = 0; off < size; off += (size_t)r) {
		r = sbx_frame_parse(data + off, size - off, from_inside, &f, &err);
		if (r <= 0) {
			require(r == 0 || err.msg[0]);
			break;
		}
		require((size_t)r <= size - off);
		require((size_t)r == SBX_FRAME_HDR + f.len && f.len <= SBX_FRAME_MAX_PAYLOAD);
		require(f.payload == data + off + SBX_FRAME_HDR);
		require(((f.type & 0x80) != 0) == (from_inside != 0));
		/* a frame cut short anywhere only ever asks for more bytes */
		require(sbx_frame_parse(data + off, (size_t)r - 1, from_inside, &f, &err) == 0);
		sbx_frame_parse(data + off, (size_t)r, from_inside, &f, &err);
		switch (f.type) {
		case SBX_F_EXEC:
			check_exec(f.payload, f.len);
			break;
		case SBX_F_EXIT: {
			struct sbx_exit_info x;
			if (sbx_frame_decode_exit(&f, &x, &err) == 0)
				require(x.code >= 0 && x.code <= 255 && x.signal <= 64 &&
					(x.timed_out == 0 || x.timed_out == 1));
			break;
		}
		case SBX_F_STARTED:
		case SBX_F_HELLO:
		case SBX_F_CREDIT:
		case SBX_F_SIGNAL:
		case SBX_F_STDIN_ACK: {
			uint32_t v;
			require(sbx_frame_decode_u32(&f, &v, &err) == 0);
			break;
		}
		default:
			break;
		}
	}
	return 0;
}
