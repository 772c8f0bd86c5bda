/* libFuzzer target: the channel's frame codec (src/lib/frame.c), the parser
 * of everything that comes out of a sandbox. Byte 0 picks the direction;
 * the rest is parsed as a stream of frames, and also decoded whole as an
 * EXEC payload. Checks: a parsed frame lies inside the input, its size is
 * header + payload, its type belongs to that direction; decoded EXEC
 * strings lie inside the payload, are NUL-terminated there, and encoding
 * the decoded request gives back exactly the same bytes (the format is
 * canonical); errors always carry a message. Protocol 2: FILE, ATTACH,
 * PSIGNAL, PSTDIN, STAT, list lines and PROCS lines are decoded from the
 * whole input and from every frame, and what decodes must encode back to
 * exactly the same bytes. */
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
	require(!(req.flags & SBX_EXEC_PTY) ||
		(req.cols >= 1 && req.cols <= SBX_PTY_MAX && req.rows >= 1 && req.rows <= SBX_PTY_MAX));
	require(sbx_exec_encode(&req, &enc, &elen, &err) == 0);
	require(elen == n && memcmp(enc, p, n) == 0);
	free(enc);
	sbx_exec_req_free(&req);
}

static void check_v2(const uint8_t *p, size_t n)
{
	sbx_err err = SBX_ERR_INIT;
	struct sbx_file_req fr;
	struct sbx_attach_req ar;
	struct sbx_list_entry le;
	struct sbx_proc_info pi;
	uint8_t out[SBX_FILE_MAX];
	char line[SBX_PROC_LINE_MAX + SBX_LIST_LINE_MAX];
	const uint8_t *d;
	uint32_t pid, sig;
	size_t dl;
	long l;

	if (sbx_file_decode(p, n, &fr, &err) == 0) {
		require(inside(fr.path, p, n) && fr.path[0] == '/');
		l = sbx_file_encode(&fr, out, &err);
		require(l == (long)n && memcmp(out, p, n) == 0);
	} else {
		require(err.msg[0]);
	}
	if (sbx_attach_decode(p, n, &ar, &err) == 0) {
		require(sbx_attach_encode(&ar, out) == (long)n && memcmp(out, p, n) == 0);
		require(ar.pid > 0 && (ar.flags & ~SBX_ATTACH_FOLLOW) == 0);
	}
	if (sbx_psignal_decode(p, n, &pid, &sig, &err) == 0) {
		require(sig >= 1 && sig <= 64 && pid > 0);
		require(sbx_psignal_encode(pid, sig, out) == 8 && memcmp(out, p, 8) == 0);
	}
	{
		uint16_t cols, rows;
		if (sbx_presize_decode(p, n, &pid, &cols, &rows, &err) == 0) {
			require(pid > 0 && cols >= 1 && cols <= SBX_PTY_MAX && rows >= 1 && rows <= SBX_PTY_MAX);
			require(sbx_presize_encode(pid, cols, rows, out) == 8 && memcmp(out, p, 8) == 0);
		}
	}
	if (sbx_pstdin_decode(p, n, &pid, &d, &dl, &err) == 0)
		require(d == p + 4 && dl == n - 4 && pid > 0);
	if (sbx_list_entry_decode(p, n, &le, &err) == 0) {
		require(le.name >= (const char *)p && le.name + le.name_len == (const char *)p + n);
		l = sbx_list_entry_encode(&le, line, sizeof(line));
		require(l == (long)n && memcmp(line, p, n) == 0);
	} else {
		require(err.msg[0]);
	}
	if (sbx_proc_info_decode(p, n, &pi, &err) == 0) {
		require(pi.cmd >= (const char *)p && pi.cmd + pi.cmd_len == (const char *)p + n);
		l = sbx_proc_info_encode(&pi, line, sizeof(line));
		require(l == (long)n && memcmp(line, p, n) == 0);
	} else {
		require(err.msg[0]);
	}
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
	check_v2(data, size);

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
			uint8_t e[9];
			if (sbx_frame_decode_exit(&f, &x, &err) == 0) {
				require(x.code >= 0 && x.code <= 255 && x.signal <= 64 &&
					(x.timed_out == 0 || x.timed_out == 1));
				require((x.err != 0) == ((x.flags & SBX_EXIT_ERRNO) != 0));
				sbx_exit_encode(e, x.code, x.signal, x.flags);
				require(memcmp(e, f.payload, 9) == 0);
			}
			break;
		}
		case SBX_F_STAT: {
			struct sbx_file_stat st;
			uint8_t e[SBX_STAT_LEN];
			if (sbx_frame_decode_stat(&f, &st, &err) == 0) {
				require(st.mode <= 07777);
				sbx_stat_encode(&st, e);
				require(memcmp(e, f.payload, SBX_STAT_LEN) == 0);
			}
			break;
		}
		case SBX_F_FILE:
		case SBX_F_ATTACH:
		case SBX_F_PSTDIN:
		case SBX_F_PSIGNAL:
		case SBX_F_STDOUT:
			check_v2(f.payload, f.len);
			break;
		case SBX_F_HELLO: {
			uint8_t nonce[SBX_CHAN_NONCE_LEN];
			uint32_t v;
			require(sbx_hello_decode(&f, &v, nonce, &err) == 0);
			break;
		}
		case SBX_F_AUTH: {
			uint8_t nonce[SBX_CHAN_NONCE_LEN], mac[SBX_CHAN_MAC_LEN];
			require(sbx_auth_decode(&f, nonce, mac, &err) == 0);
			break;
		}
		case SBX_F_STARTED:
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
