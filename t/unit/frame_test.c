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

	plan(117);

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

	/* STATUS (host, stream 0, empty) and its answer (inside, stream 0, u32) */
	n = mk(b, SBX_F_STATUS, 0, "", 0);
	ok(parse(b, n, 0, &f, &err) == (long)n && f.type == SBX_F_STATUS, "STATUS from the host decodes");
	n = mk(b, SBX_F_STATUS, 3, "", 0);
	ok(parse(b, n, 0, &f, &err) < 0, "STATUS on a stream other than 0 is refused");
	n = mk(b, SBX_F_STATUS_R, 0, "\0\0\0\2", 4);
	ok(parse(b, n, 1, &f, &err) == (long)n && sbx_get32(f.payload) == 2, "STATUS_R from inside carries its count");
	ok(parse(b, n, 0, &f, &err) < 0, "STATUS_R from the host is refused");
	n = mk(b, SBX_F_STATUS_R, 0, "\0\0\0", 3);
	ok(parse(b, n, 1, &f, &err) < 0, "STATUS_R of a length other than 4 is refused");
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
	{
		uint8_t nonce[SBX_CHAN_NONCE_LEN], got_nonce[SBX_CHAN_NONCE_LEN], mac[SBX_CHAN_MAC_LEN],
			got_mac[SBX_CHAN_MAC_LEN], pl[SBX_AUTH_LEN];
		for (int i = 0; i < SBX_CHAN_NONCE_LEN; i++)
			nonce[i] = (uint8_t)(i * 7 + 1);
		for (int i = 0; i < SBX_CHAN_MAC_LEN; i++)
			mac[i] = (uint8_t)(255 - i);
		is_int(sbx_hello_encode(nonce, pl), SBX_HELLO_LEN, "HELLO is %d bytes", SBX_HELLO_LEN);
		n = mk(b, SBX_F_HELLO, 3, pl, SBX_HELLO_LEN);
		ok(parse(b, n, 1, &f, &err) < 0, "HELLO on a process stream is refused");
		n = mk(b, SBX_F_HELLO, 0, "\0\0\0\3", 4);
		ok(parse(b, n, 1, &f, &err) < 0, "a v2 HELLO (version only) is refused");
		n = mk(b, SBX_F_HELLO, 0, pl, SBX_HELLO_LEN);
		ok(parse(b, n, 1, &f, &err) == (long)n && sbx_hello_decode(&f, &v, got_nonce, &err) == 0 &&
			   v == SBX_FRAME_VERSION && !memcmp(got_nonce, nonce, sizeof(nonce)),
		   "HELLO decodes its version and nonce");
		ok(parse(b, n, 0, &f, &err) < 0, "HELLO from the host is refused");
		is_int(sbx_auth_encode(nonce, mac, pl), SBX_AUTH_LEN, "AUTH is %d bytes", SBX_AUTH_LEN);
		n = mk(b, SBX_F_AUTH, 0, pl, SBX_AUTH_LEN);
		ok(parse(b, n, 0, &f, &err) == (long)n && sbx_auth_decode(&f, got_nonce, got_mac, &err) == 0 &&
			   !memcmp(got_nonce, nonce, sizeof(nonce)) && !memcmp(got_mac, mac, sizeof(mac)),
		   "AUTH decodes its nonce and MAC");
		ok(parse(b, n, 1, &f, &err) < 0, "AUTH from inside is refused");
		n = mk(b, SBX_F_AUTH, 0, pl, SBX_AUTH_LEN - 1);
		ok(parse(b, n, 0, &f, &err) < 0, "a short AUTH is refused");
		n = mk(b, SBX_F_AUTH_OK, 0, mac, SBX_CHAN_MAC_LEN);
		ok(parse(b, n, 1, &f, &err) == (long)n, "AUTH_OK from inside is accepted");
		n = mk(b, SBX_F_AUTH_OK, 1, mac, SBX_CHAN_MAC_LEN);
		ok(parse(b, n, 1, &f, &err) < 0, "AUTH_OK on a process stream is refused");
	}

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
	n = mk(b, SBX_F_EXIT, 1, "\0\0\0\0\0\0\0\0\x10", 9);
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
		req = (struct sbx_exec_req){ SBX_EXEC_STDIN, 1500, 4096, "/tmp", 3, 2, argv, envp, 0, 0 };
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

	/* EXEC on a pseudo-terminal: the size travels before the strings */
	{
		const char *argv[] = { "bash", NULL };
		req = (struct sbx_exec_req){ SBX_EXEC_PTY | SBX_EXEC_BACKGROUND, 0, 4096, "/", 1, 0, argv,
					     (const char *[]){ NULL }, 120, 40 };
		ok(sbx_exec_encode(&req, &p, &plen, &err) == 0 && sbx_exec_decode(p, plen, &dec, &err) == 0 &&
		   dec.flags == (SBX_EXEC_PTY | SBX_EXEC_BACKGROUND) && dec.cols == 120 && dec.rows == 40 &&
		   !strcmp(dec.cwd, "/") && !strcmp(dec.argv[0], "bash"),
		   "EXEC with PTY round-trips its terminal size");
		sbx_exec_req_free(&dec);
		ok(sbx_exec_decode(p, 17, &dec, &err) < 0, "... and a PTY EXEC cut inside its size is refused");
		free(p);
		req.cols = 0;
		ok(sbx_exec_encode(&req, &p, &plen, &err) < 0, "a terminal of 0 columns is refused");
		req.cols = SBX_PTY_MAX + 1;
		ok(sbx_exec_encode(&req, &p, &plen, &err) < 0, "a terminal wider than SBX_PTY_MAX is refused");
	}
	{
		uint8_t rb[8];
		uint32_t rpid;
		uint16_t c, rr;
		sbx_presize_encode(9, 132, 43, rb);
		ok(sbx_presize_decode(rb, 8, &rpid, &c, &rr, &err) == 0 && rpid == 9 && c == 132 && rr == 43,
		   "PRESIZE round-trips pid and size");
		sbx_presize_encode(9, 0, 43, rb);
		ok(sbx_presize_decode(rb, 8, &rpid, &c, &rr, &err) < 0, "PRESIZE with 0 columns is refused");
		ok(sbx_presize_decode(rb, 7, &rpid, &c, &rr, &err) < 0, "a short PRESIZE is refused");
	}

	/* a payload too large to encode */
	{
		char *big = malloc(SBX_FRAME_MAX_PAYLOAD);
		const char *argv[] = { big, NULL };
		memset(big, 'a', SBX_FRAME_MAX_PAYLOAD - 1);
		big[SBX_FRAME_MAX_PAYLOAD - 1] = 0;
		req = (struct sbx_exec_req){ 0, 0, 0, "/", 1, 0, argv, (const char *[]){ NULL }, 0, 0 };
		ok(sbx_exec_encode(&req, &p, &plen, &err) < 0 && err.http == 413,
		   "an EXEC over the frame maximum is refused with 413");
		free(big);
	}

	/* ---- protocol 2 ---- */
	{
		struct sbx_file_req fr = { SBX_FILE_WRITE, SBX_FILE_PARENTS, 0640, 77, "/a/b c" }, fd;
		uint8_t fb[SBX_FILE_MAX + 8];
		long fl = sbx_file_encode(&fr, fb, &err);
		ok(fl == 16 + 7 && sbx_file_decode(fb, (size_t)fl, &fd, &err) == 0 && fd.op == 1 &&
		   fd.flags == 1 && fd.mode == 0640 && fd.credit == 77 && !strcmp(fd.path, "/a/b c") &&
		   (const uint8_t *)fd.path == fb + 16, "FILE encodes and decodes every field");
		n = mk(b, SBX_F_FILE, 2, fb, (size_t)fl);
		ok(parse(b, n, 0, &f, &err) == (long)n && parse(b, n, 1, &f, &err) < 0,
		   "FILE comes from the host only");
		n = mk(b, SBX_F_FILE, 0, fb, (size_t)fl);
		ok(parse(b, n, 0, &f, &err) < 0, "FILE on stream 0 is refused");
		fb[18] = 0;
		ok(sbx_file_decode(fb, (size_t)fl, &fd, &err) < 0, "a FILE path with a NUL inside is refused");
		fb[18] = 'b';
		ok(sbx_file_decode(fb, (size_t)fl - 1, &fd, &err) < 0, "a FILE path without its NUL is refused");
		fb[16] = 'a';
		ok(sbx_file_decode(fb, (size_t)fl, &fd, &err) < 0, "a relative FILE path is refused");
		fb[16] = '/';
		fb[3] = 6;
		ok(sbx_file_decode(fb, (size_t)fl, &fd, &err) < 0, "an unknown file op is refused");
		fb[3] = 1;
		fb[7] = 2;
		ok(sbx_file_decode(fb, (size_t)fl, &fd, &err) < 0, "unknown file flags are refused");
		fb[7] = 1;
		fb[10] = 0x10;
		ok(sbx_file_decode(fb, (size_t)fl, &fd, &err) < 0, "a mode beyond the permission bits is refused");
		fr.path = "rel";
		ok(sbx_file_encode(&fr, fb, &err) < 0, "encoding a relative path is refused");
		ok(sbx_file_decode(fb, 17, &fd, &err) < 0, "a FILE payload of only the fixed part and a NUL is refused");
	}
	{
		struct sbx_attach_req ar = { 42, SBX_ATTACH_FOLLOW, 4096, ((uint64_t)1 << 40) + 5 }, ad;
		uint8_t ab[SBX_ATTACH_LEN];
		sbx_attach_encode(&ar, ab);
		ok(sbx_attach_decode(ab, sizeof(ab), &ad, &err) == 0 && ad.pid == 42 && ad.flags == 1 &&
		   ad.credit == 4096 && ad.offset == ar.offset, "ATTACH round-trips a 64-bit offset");
		ok(sbx_attach_decode(ab, sizeof(ab) - 1, &ad, &err) < 0, "a short ATTACH is refused");
		ab[15] = 3;
		ok(sbx_attach_decode(ab, sizeof(ab), &ad, &err) < 0, "ATTACH with unknown flags is refused");
		memset(ab, 0, 4);
		ab[15] = 1;
		ok(sbx_attach_decode(ab, sizeof(ab), &ad, &err) < 0, "ATTACH to pid 0 is refused");
		n = mk(b, SBX_F_ATTACH, 1, ab, 19);
		ok(parse(b, n, 0, &f, &err) < 0, "a 19-byte ATTACH frame is refused by the parser");
	}
	{
		uint8_t sb[8];
		uint32_t pid, sig;
		const uint8_t *d;
		size_t dl;
		sbx_psignal_encode(7, 15, sb);
		ok(sbx_psignal_decode(sb, 8, &pid, &sig, &err) == 0 && pid == 7 && sig == 15,
		   "PSIGNAL round-trips");
		sbx_psignal_encode(7, 65, sb);
		ok(sbx_psignal_decode(sb, 8, &pid, &sig, &err) < 0, "PSIGNAL with signal 65 is refused");
		sbx_psignal_encode(7, 0, sb);
		ok(sbx_psignal_decode(sb, 8, &pid, &sig, &err) < 0, "PSIGNAL with signal 0 is refused");
		ok(sbx_pstdin_decode((const uint8_t *)"\0\0\0\x09hi", 6, &pid, &d, &dl, &err) == 0 &&
		   pid == 9 && dl == 2 && !memcmp(d, "hi", 2), "PSTDIN gives the pid and the bytes");
		ok(sbx_pstdin_decode((const uint8_t *)"\0\0\0\x09", 4, &pid, &d, &dl, &err) == 0 && dl == 0,
		   "an empty PSTDIN (close) decodes");
		ok(sbx_pstdin_decode((const uint8_t *)"\0\0\0\0x", 5, &pid, &d, &dl, &err) < 0,
		   "PSTDIN to pid 0 is refused");
		n = mk(b, SBX_F_PROCS, 1, "x", 1);
		ok(parse(b, n, 0, &f, &err) < 0, "PROCS with a payload is refused");
		n = mk(b, SBX_F_PROCS, 1, "", 0);
		ok(parse(b, n, 0, &f, &err) == (long)n, "an empty PROCS parses");
	}
	{
		struct sbx_file_stat st = { 50000000, 0755, -3 }, sd;
		uint8_t tb[SBX_STAT_LEN];
		sbx_stat_encode(&st, tb);
		n = mk(b, SBX_F_STAT, 1, tb, sizeof(tb));
		ok(parse(b, n, 1, &f, &err) == (long)n && sbx_frame_decode_stat(&f, &sd, &err) == 0 &&
		   sd.size == 50000000 && sd.mode == 0755 && sd.mtime == -3, "STAT round-trips");
		ok(parse(b, n, 0, &f, &err) < 0, "STAT from the host is refused");
		st.mode = 010000;
		sbx_stat_encode(&st, tb);
		n = mk(b, SBX_F_STAT, 1, tb, sizeof(tb));
		parse(b, n, 1, &f, &err);
		ok(sbx_frame_decode_stat(&f, &sd, &err) < 0, "STAT with file-type bits in its mode is refused");
		st.mode = 0644;
		st.size = (uint64_t)1 << 63;
		sbx_stat_encode(&st, tb);
		n = mk(b, SBX_F_STAT, 1, tb, sizeof(tb));
		parse(b, n, 1, &f, &err);
		ok(sbx_frame_decode_stat(&f, &sd, &err) < 0, "STAT with a size past INT64_MAX is refused");
	}
	{
		static const struct {
			const char *p;
			uint8_t ok;
			const char *what;
		} ex[] = {
			{ "\0\0\0\x02\0\0\0\0\x02", 1, "EXIT errno 2 (ENOENT) decodes" },
			{ "\0\0\0\0\0\0\0\0\x02", 0, "EXIT errno 0 is refused" },
			{ "\0\0\0\x02\0\0\0\0\x03", 0, "EXIT errno with timed-out is refused" },
			{ "\0\0\0\x02\0\0\0\x09\x02", 0, "EXIT errno with a signal is refused" },
			{ "\0\0\0\0\0\0\0\0\x04", 1, "EXIT detached decodes" },
			{ "\0\0\0\0\0\0\0\0\x0c", 1, "EXIT detached + truncated decodes" },
			{ "\0\0\0\x01\0\0\0\0\x04", 0, "EXIT detached with a code is refused" },
			{ "\0\0\0\x07\0\0\0\0\x08", 1, "EXIT 7 truncated decodes" },
			{ "\0\0\0\x05\0\0\0\x09\0", 0, "EXIT with signal 9 and code 5 (not 137) is refused" },
			{ "\0\0\0\x89\0\0\0\x09\0", 1, "EXIT 137 signal 9 decodes" },
			{ "\0\0\0\x05\0\0\0\0\x01", 0, "EXIT timed out with code 5 is refused" },
		};
		for (size_t i = 0; i < sizeof(ex) / sizeof(ex[0]); i++) {
			n = mk(b, SBX_F_EXIT, 1, ex[i].p, 9);
			parse(b, n, 1, &f, &err);
			ok((sbx_frame_decode_exit(&f, &x, &err) == 0) == ex[i].ok, "%s", ex[i].what);
		}
		n = mk(b, SBX_F_EXIT, 1, "\0\0\0\x02\0\0\0\0\x02", 9);
		parse(b, n, 1, &f, &err);
		sbx_frame_decode_exit(&f, &x, &err);
		ok(x.err == 2 && x.flags == SBX_EXIT_ERRNO && x.timed_out == 0, "... with err and flags set");
	}
	{
		struct sbx_list_entry e = { SBX_FT_FILE, 123, 0644, -5, "a b", 3 }, d;
		char line[SBX_LIST_LINE_MAX];
		long ll = sbx_list_entry_encode(&e, line, sizeof(line));
		ok(ll > 0 && (size_t)ll == strlen("file\t123\t0644\t-5\ta b") &&
		   !memcmp(line, "file\t123\t0644\t-5\ta b", (size_t)ll), "a list entry encodes as its line");
		ok(sbx_list_entry_decode((uint8_t *)line, (size_t)ll, &d, &err) == 0 && d.type == SBX_FT_FILE &&
		   d.size == 123 && d.mode == 0644 && d.mtime == -5 && d.name_len == 3 && !memcmp(d.name, "a b", 3),
		   "... and decodes back");
		e.name = "a\nb";
		ok(sbx_list_entry_encode(&e, line, sizeof(line)) < 0, "a name with a newline cannot be encoded");
		static const char *bad[] = {
			"file\t0123\t0644\t1\tx", "file\t1\t644\t1\tx",	  "file\t1\t0648\t1\tx",
			"file\t1\t0644\t-0\tx",	  "file\t1\t0644\t1\t",	  "file\t1\t0644\t1\ta/b",
			"file\t1\t0644\t1\t..",	  "pipe\t1\t0644\t1\tx",  "file\t1\t0644\tx",
			"file\t+1\t0644\t1\tx",	  "file\t99999999999999999999\t0644\t1\tx",
		};
		int refused = 0;
		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
			refused += sbx_list_entry_decode((const uint8_t *)bad[i], strlen(bad[i]), &d, &err) < 0;
		is_int(refused, (long long)(sizeof(bad) / sizeof(bad[0])),
		       "list lines with leading zeros, bad mode/type/name, '-0', overflow or a missing field are refused");
		ok(sbx_list_entry_decode((const uint8_t *)"dir\t0\t0755\t0\tx\ty", strlen("dir\t0\t0755\t0\tx\ty"), &d, &err) == 0 &&
		   d.name_len == 3, "a name may contain a tab (the name is last)");
	}
	{
		struct sbx_proc_info pi = { 12, 0, 137, 9, SBX_EXIT_TRUNCATED, 1000, 2000, 99, "sleep 1 \xc3\xa9", 10 }, d;
		char line[SBX_PROC_LINE_MAX];
		long pl = sbx_proc_info_encode(&pi, line, sizeof(line));
		ok(pl > 0 && sbx_proc_info_decode((uint8_t *)line, (size_t)pl, &d, &err) == 0 && d.pid == 12 &&
		   !d.running && d.exit_code == 137 && d.signal == 9 && d.flags == SBX_EXIT_TRUNCATED &&
		   d.started_ms == 1000 && d.ended_ms == 2000 && d.bytes == 99 && d.cmd_len == 10,
		   "a PROCS line round-trips (UTF-8 in the command)");
		static const char *bad[] = {
			"12\trunning\t1\t0\t0\t1\t0\t0\tx", "12\texited\t5\t9\t0\t1\t2\t0\tx",
			"12\tzombie\t0\t0\t0\t1\t0\t0\tx", "12\texited\t0\t0\t16\t1\t2\t0\tx",
			"0\texited\t0\t0\t0\t1\t2\t0\tx",  "12\texited\t0\t0\t0\t1\t2\t0\ta\x01",
			"12\texited\t0\t0\t0\t1\t2\t0\t\xff", "12\texited\t0\t0\t0\t1\t2\tx",
		};
		int refused = 0;
		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
			refused += sbx_proc_info_decode((const uint8_t *)bad[i], strlen(bad[i]), &d, &err) < 0;
		is_int(refused, (long long)(sizeof(bad) / sizeof(bad[0])),
		       "PROCS lines with a running exit code, a status that does not add up, an unknown state or flag, pid 0, control bytes, invalid UTF-8 or a missing field are refused");
		ok(sbx_proc_info_decode((const uint8_t *)"3\trunning\t0\t0\t0\t5\t0\t0\t", strlen("3\trunning\t0\t0\t0\t5\t0\t0\t"), &d, &err) == 0 &&
		   d.running && d.cmd_len == 0, "a running process with an empty command decodes");
	}
	return done_testing();
}
