/* The channel's frame codec (src/lib/frame.c): round trips, and every way a
 * frame or an EXEC payload can be wrong is refused, not guessed at. */
#include "config.h"
#include <stdlib.h>
#include <string.h>
#include "../tap.h"
#include "frame.h"

static size_t mk(uint8_t *out, uint8_t type, uint32_t stream, const void *p, size_t n)
{
	sbx_frame_header(out, type, stream, (uint32_t)n);
	if (n)
		memcpy(out + SBX_FRAME_HDR, p, n);
	return SBX_FRAME_HDR + n;
}

static long parse(const uint8_t *b, size_t n, int inside, struct sbx_frame *f, sbx_err *err)
{
	sbx_err_clear(err);
	return sbx_frame_parse(b, n, inside, f, err);
}

/* An EXEC payload built by hand: fixed part + the given bytes. */
static size_t raw_exec(uint8_t *out, uint16_t argc, uint16_t envc, const void *strs, size_t n)
{
	memset(out, 0, 12);
	out[12] = argc >> 8;
	out[13] = argc & 0xff;
	out[14] = envc >> 8;
	out[15] = envc & 0xff;
	memcpy(out + 16, strs, n);
	return 16 + n;
}

int main(void)
{
	static uint8_t b[SBX_FRAME_HDR + SBX_FRAME_MAX_PAYLOAD + 16];
	sbx_err err = SBX_ERR_INIT;
	struct sbx_frame f;
	struct sbx_exec_req req, dec;
	struct sbx_exit_info x;
	uint8_t *p;
	size_t n, plen;
	uint32_t v;
	long r;

	plan(48);

	/* header and incremental parsing */
	n = mk(b, SBX_F_STDOUT, 7, "a\0b\xff", 4);
	is_int(n, 13, "a 4-byte STDOUT frame is 13 bytes");
	is_int(b[3], 9, "length counts type + stream + payload");
	for (size_t k = 0; k < n; k++)
		if (parse(b, k, 1, &f, &err) != 0)
			break;
	ok(parse(b, 3, 1, &f, &err) == 0 && parse(b, 12, 1, &f, &err) == 0,
	   "a partial frame asks for more bytes");
	r = parse(b, n + 5, 1, &f, &err);
	ok(r == 13 && f.type == SBX_F_STDOUT && f.stream == 7 && f.len == 4 &&
	   !memcmp(f.payload, "a\0b\xff", 4), "a complete frame decodes with binary payload intact");

	/* direction and type */
	ok(parse(b, n, 0, &f, &err) < 0, "STDOUT from the host is refused");
	like(err.msg, "wrong side", "... naming the wrong side");
	n = mk(b, SBX_F_EXEC, 1, "", 0);
	ok(parse(b, n, 1, &f, &err) < 0, "EXEC from inside is refused");
	b[4] = 0x42;
	ok(parse(b, 5, 1, &f, &err) < 0, "an unknown type is refused as soon as the type byte is in");
	like(err.msg, "unknown frame type", "... as unknown");
	b[4] = 0x00;
	ok(parse(b, 9, 0, &f, &err) < 0, "type 0 is unknown");

	/* lengths */
	sbx_frame_header(b, SBX_F_STDOUT, 1, SBX_FRAME_MAX_PAYLOAD + 1);
	ok(parse(b, 4, 1, &f, &err) < 0, "an oversized length is refused from the length alone");
	b[0] = b[1] = b[2] = 0;
	b[3] = 4;
	ok(parse(b, 4, 1, &f, &err) < 0, "a length shorter than type + stream is refused");
	b[0] = 0xff;
	ok(parse(b, 4, 1, &f, &err) < 0, "a huge length (sign bit) is refused");
	n = mk(b, SBX_F_STDOUT, 1, "", 0);
	ok(parse(b, n, 1, &f, &err) < 0, "an empty STDOUT is refused");
	n = mk(b, SBX_F_EXIT, 1, "12345678", 8);
	ok(parse(b, n, 1, &f, &err) < 0, "an 8-byte EXIT is refused");
	n = mk(b, SBX_F_CREDIT, 1, "12345", 5);
	ok(parse(b, n, 0, &f, &err) < 0, "a 5-byte CREDIT is refused");
	memset(b + 100, 'x', 100);
	n = mk(b, SBX_F_PING, 0, b + 100, 65);
	ok(parse(b, n, 0, &f, &err) < 0, "a PING cookie over 64 bytes is refused");
	n = mk(b, SBX_F_PING, 0, "c", 1);
	ok(parse(b, n, 0, &f, &err) == (long)n, "a PING on stream 0 is fine");

	/* streams */
	n = mk(b, SBX_F_STDOUT, 0, "x", 1);
	ok(parse(b, n, 1, &f, &err) < 0, "STDOUT on stream 0 is refused");
	n = mk(b, SBX_F_HELLO, 3, "\0\0\0\1", 4);
	ok(parse(b, n, 1, &f, &err) < 0, "HELLO on a process stream is refused");
	n = mk(b, SBX_F_HELLO, 0, "\0\0\0\1", 4);
	ok(parse(b, n, 1, &f, &err) == (long)n && sbx_frame_decode_u32(&f, &v, &err) == 0 && v == 1,
	   "HELLO decodes its version");

	/* ERROR text */
	n = mk(b, SBX_F_ERROR, 1, "command not found: x", 20);
	ok(parse(b, n, 1, &f, &err) == (long)n, "an ERROR with text is accepted");
	n = mk(b, SBX_F_ERROR, 1, "bad \xc0\xaf", 6);
	ok(parse(b, n, 1, &f, &err) < 0, "an ERROR with an overlong UTF-8 sequence is refused");
	n = mk(b, SBX_F_ERROR, 1, "a\0b", 3);
	ok(parse(b, n, 1, &f, &err) < 0, "an ERROR with a NUL is refused");

	/* EXIT */
	n = mk(b, SBX_F_EXIT, 1, "\0\0\0\x7c\0\0\0\x09\x01", 9);
	ok(parse(b, n, 1, &f, &err) == (long)n && sbx_frame_decode_exit(&f, &x, &err) == 0 &&
	   x.code == 124 && x.signal == 9 && x.timed_out == 1, "EXIT decodes code, signal, timed out");
	n = mk(b, SBX_F_EXIT, 1, "\0\0\0\0\0\0\0\0\x02", 9);
	parse(b, n, 1, &f, &err);
	ok(sbx_frame_decode_exit(&f, &x, &err) < 0, "EXIT with unknown flags is refused");
	n = mk(b, SBX_F_EXIT, 1, "\0\0\0\0\0\0\0\x41\0", 9);
	parse(b, n, 1, &f, &err);
	ok(sbx_frame_decode_exit(&f, &x, &err) < 0, "EXIT with signal 65 is refused");
	n = mk(b, SBX_F_EXIT, 1, "\xff\xff\xff\xff\0\0\0\0\0", 9);
	parse(b, n, 1, &f, &err);
	ok(sbx_frame_decode_exit(&f, &x, &err) < 0, "EXIT with code -1 is refused");

	/* EXEC round trip */
	{
		const char *argv[] = { "sh", "-c", "echo \xff", NULL };
		const char *envp[] = { "PATH=/bin", "A=", NULL };
		req = (struct sbx_exec_req){ SBX_EXEC_STDIN, 1500, 4096, "/tmp", 3, 2, argv, envp };
		ok(sbx_exec_encode(&req, &p, &plen, &err) == 0, "EXEC encodes");
		ok(sbx_exec_decode(p, plen, &dec, &err) == 0, "... and decodes");
		ok(dec.flags == SBX_EXEC_STDIN && dec.timeout_ms == 1500 && dec.credit == 4096 &&
		   !strcmp(dec.cwd, "/tmp") && dec.argc == 3 && !strcmp(dec.argv[2], "echo \xff") &&
		   dec.argv[3] == NULL && dec.envc == 2 && !strcmp(dec.envp[1], "A=") && dec.envp[2] == NULL,
		   "... with every field, NULL-terminated vectors");
		ok((const uint8_t *)dec.argv[0] > p && (const uint8_t *)dec.envp[1] < p + plen,
		   "decoded strings point into the payload");
		sbx_exec_req_free(&dec);
		ok(sbx_exec_decode(p, plen - 1, &dec, &err) < 0, "a truncated EXEC (last NUL gone) is refused");
		like(err.msg, "truncated", "... as truncated");
		memcpy(b, p, plen);
		b[plen] = 'z';
		ok(sbx_exec_decode(b, plen + 1, &dec, &err) < 0, "trailing bytes after the last string are refused");
		b[3] = 0x80;
		ok(sbx_exec_decode(b, plen, &dec, &err) < 0, "unknown flags are refused");
		free(p);

		req.argc = 0;
		ok(sbx_exec_encode(&req, &p, &plen, &err) < 0, "encoding argc 0 is refused");
		req.argc = 3;
		req.cwd = "tmp";
		ok(sbx_exec_encode(&req, &p, &plen, &err) < 0, "encoding a relative cwd is refused");
		req.cwd = "/";
		envp[0] = "NOEQUALS";
		ok(sbx_exec_encode(&req, &p, &plen, &err) < 0, "encoding an env entry without '=' is refused");
	}

	n = raw_exec(b, 0, 0, "/\0", 2);
	ok(sbx_exec_decode(b, n, &dec, &err) < 0, "decoding argc 0 is refused");
	n = raw_exec(b, SBX_EXEC_MAX_ARGS + 1, 0, "/\0", 2);
	ok(sbx_exec_decode(b, n, &dec, &err) < 0, "decoding too many args is refused");
	n = raw_exec(b, 1, 0, "/\0ls", 4);
	ok(sbx_exec_decode(b, n, &dec, &err) < 0, "argv without its NUL is refused");
	n = raw_exec(b, 2, 0, "/\0ls\0", 5);
	ok(sbx_exec_decode(b, n, &dec, &err) < 0, "fewer strings than argc is refused");
	n = raw_exec(b, 1, 1, "/\0ls\0=x\0", 8);
	ok(sbx_exec_decode(b, n, &dec, &err) < 0, "an env entry starting with '=' is refused");
	n = raw_exec(b, 1, 0, "/\0\0", 3);
	ok(sbx_exec_decode(b, n, &dec, &err) < 0, "an empty argv[0] is refused");
	n = raw_exec(b, 1, 0, "/\0ls\0", 5);
	ok(sbx_exec_decode(b, 10, &dec, &err) < 0, "a payload shorter than the fixed part is refused");
	ok(sbx_exec_decode(b, n, &dec, &err) == 0 && dec.argc == 1 && !strcmp(dec.argv[0], "ls"),
	   "the smallest EXEC decodes");
	sbx_exec_req_free(&dec);

	/* a payload too large to encode */
	{
		char *big = malloc(SBX_FRAME_MAX_PAYLOAD);
		const char *argv[] = { big, NULL };
		memset(big, 'a', SBX_FRAME_MAX_PAYLOAD - 1);
		big[SBX_FRAME_MAX_PAYLOAD - 1] = 0;
		req = (struct sbx_exec_req){ 0, 0, 0, "/", 1, 0, argv, (const char *[]){ NULL } };
		ok(sbx_exec_encode(&req, &p, &plen, &err) < 0 && err.http == 413,
		   "an EXEC over the frame maximum is refused with 413");
		free(big);
	}
	return done_testing();
}
