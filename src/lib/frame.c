/* The channel's frames (see frame.h). Both ends parse strictly: a frame of
 * an unknown type, from the wrong side, with a length its type cannot have,
 * or an EXEC payload that does not add up exactly, is an error, never
 * guessed at. Only libc and err.c are used, so sbx-init can link this file
 * into its static binary. */
#include "config.h"
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "frame.h"

#define EXEC_FIXED 16 /* flags, timeout_ms, credit, argc, envc */
#define PING_MAX 64
#define ERROR_MAX 1024

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = v >> 8;
	p[1] = v;
}

void sbx_frame_header(uint8_t out[SBX_FRAME_HDR], uint8_t type, uint32_t stream, uint32_t payload_len)
{
	sbx_put32(out, payload_len + 5);
	out[4] = type;
	sbx_put32(out + 5, stream);
}

/* Strict UTF-8 (no overlongs, no surrogates, nothing past U+10FFFF, no NUL). */
int sbx_utf8_valid(const uint8_t *s, size_t n)
{
	size_t i = 0;

	while (i < n) {
		uint8_t c = s[i];
		size_t k;
		uint32_t cp;

		if (c == 0)
			return 0;
		if (c < 0x80) {
			i++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf)
			k = 1, cp = c & 0x1f;
		else if (c >= 0xe0 && c <= 0xef)
			k = 2, cp = c & 0x0f;
		else if (c >= 0xf0 && c <= 0xf4)
			k = 3, cp = c & 0x07;
		else
			return 0;
		if (n - i - 1 < k)
			return 0;
		for (size_t j = 1; j <= k; j++) {
			if ((s[i + j] & 0xc0) != 0x80)
				return 0;
			cp = cp << 6 | (s[i + j] & 0x3f);
		}
		if ((k == 2 && cp < 0x800) || (k == 3 && (cp < 0x10000 || cp > 0x10ffff)) ||
		    (cp >= 0xd800 && cp <= 0xdfff))
			return 0;
		i += k + 1;
	}
	return 1;
}

/* Which side may send a type, and the payload lengths it can have. */
struct type_rule {
	uint8_t type;
	uint8_t from_inside;
	uint8_t needs_stream; /* 1: stream != 0, 2: stream == 0, 0: any */
	uint32_t min, max;
};

static const struct type_rule rules[] = {
	{ SBX_F_PING, 0, 0, 0, PING_MAX },
	{ SBX_F_EXEC, 0, 1, EXEC_FIXED + 3, SBX_FRAME_MAX_PAYLOAD },
	{ SBX_F_STDIN, 0, 1, 0, SBX_FRAME_MAX_PAYLOAD },
	{ SBX_F_SIGNAL, 0, 1, 4, 4 },
	{ SBX_F_CREDIT, 0, 1, 4, 4 },
	{ SBX_F_FILE, 0, 1, SBX_FILE_FIXED + 2, SBX_FILE_MAX },
	{ SBX_F_ATTACH, 0, 1, SBX_ATTACH_LEN, SBX_ATTACH_LEN },
	{ SBX_F_PROCS, 0, 1, 0, 0 },
	{ SBX_F_PSTDIN, 0, 1, 4, SBX_FRAME_MAX_PAYLOAD },
	{ SBX_F_PSIGNAL, 0, 1, 8, 8 },
	{ SBX_F_PRESIZE, 0, 1, 8, 8 },
	{ SBX_F_AUTH, 0, 2, SBX_AUTH_LEN, SBX_AUTH_LEN },
	{ SBX_F_STATUS, 0, 2, 0, 0 },
	{ SBX_F_PONG, 1, 0, 0, PING_MAX },
	{ SBX_F_STARTED, 1, 1, 4, 4 },
	{ SBX_F_STDOUT, 1, 1, 1, SBX_FRAME_MAX_PAYLOAD },
	{ SBX_F_STDERR, 1, 1, 1, SBX_FRAME_MAX_PAYLOAD },
	{ SBX_F_EXIT, 1, 1, 9, 9 },
	{ SBX_F_ERROR, 1, 1, 1, ERROR_MAX },
	{ SBX_F_HELLO, 1, 2, SBX_HELLO_LEN, SBX_HELLO_LEN },
	{ SBX_F_STDIN_ACK, 1, 1, 4, 4 },
	{ SBX_F_STAT, 1, 1, SBX_STAT_LEN, SBX_STAT_LEN },
	{ SBX_F_AUTH_OK, 1, 2, SBX_CHAN_MAC_LEN, SBX_CHAN_MAC_LEN },
	{ SBX_F_STATUS_R, 1, 2, 4, 4 },
};

long sbx_frame_parse(const uint8_t *buf, size_t n, int from_inside, struct sbx_frame *f, sbx_err *err)
{
	const struct type_rule *r = NULL;
	uint32_t len, plen, stream;

	if (n < 4)
		return 0;
	len = sbx_get32(buf);
	if (len < 5)
		return sbx_err_set(err, 0, "bad_frame", "frame length %u is shorter than its header", len);
	if (len - 5 > SBX_FRAME_MAX_PAYLOAD)
		return sbx_err_set(err, 0, "bad_frame", "frame length %u is over the maximum", len);
	plen = len - 5;
	if (n < 5)
		return 0;
	for (size_t i = 0; i < sizeof(rules) / sizeof(rules[0]); i++)
		if (rules[i].type == buf[4])
			r = &rules[i];
	if (!r)
		return sbx_err_set(err, 0, "bad_frame", "unknown frame type 0x%02x", buf[4]);
	if (r->from_inside != (from_inside ? 1 : 0))
		return sbx_err_set(err, 0, "bad_frame", "frame type 0x%02x from the wrong side", buf[4]);
	if (plen < r->min || plen > r->max)
		return sbx_err_set(err, 0, "bad_frame", "frame type 0x%02x with a %u-byte payload", buf[4],
				   plen);
	if (n < SBX_FRAME_HDR)
		return 0;
	stream = sbx_get32(buf + 5);
	if ((r->needs_stream == 1 && stream == 0) || (r->needs_stream == 2 && stream != 0))
		return sbx_err_set(err, 0, "bad_frame", "frame type 0x%02x on stream %u", buf[4], stream);
	if (n - SBX_FRAME_HDR < plen)
		return 0;
	if (r->type == SBX_F_ERROR && !sbx_utf8_valid(buf + SBX_FRAME_HDR, plen))
		return sbx_err_set(err, 0, "bad_frame", "ERROR message is not UTF-8 text");
	f->type = r->type;
	f->stream = stream;
	f->payload = buf + SBX_FRAME_HDR;
	f->len = plen;
	return (long)SBX_FRAME_HDR + plen;
}

static int check_strings(const char *const *v, int c, const char *what, int env, sbx_err *err)
{
	for (int i = 0; i < c; i++) {
		if (!v || !v[i])
			return sbx_err_set(err, 0, "bad_exec", "%s[%d] is missing", what, i);
		if (env && (v[i][0] == '=' || !strchr(v[i], '=')))
			return sbx_err_set(err, 0, "bad_exec", "%s[%d] is not NAME=value", what, i);
	}
	return 0;
}

static int check_req(const struct sbx_exec_req *req, sbx_err *err)
{
	if (req->argc < 1 || req->argc > SBX_EXEC_MAX_ARGS)
		return sbx_err_set(err, 0, "bad_exec", "argc %d out of range", req->argc);
	if (req->envc < 0 || req->envc > SBX_EXEC_MAX_ARGS)
		return sbx_err_set(err, 0, "bad_exec", "envc %d out of range", req->envc);
	if (req->flags & ~(SBX_EXEC_STDIN | SBX_EXEC_BACKGROUND | SBX_EXEC_PTY))
		return sbx_err_set(err, 0, "bad_exec", "unknown exec flags 0x%x", req->flags);
	if ((req->flags & SBX_EXEC_PTY) && (req->cols < 1 || req->cols > SBX_PTY_MAX || req->rows < 1 ||
					    req->rows > SBX_PTY_MAX))
		return sbx_err_set(err, 0, "bad_exec", "terminal size %ux%u out of range", req->cols, req->rows);
	if (!req->cwd || req->cwd[0] != '/')
		return sbx_err_set(err, 0, "bad_exec", "cwd must be an absolute path");
	if (check_strings(req->argv, req->argc, "argv", 0, err) < 0 ||
	    check_strings(req->envp, req->envc, "env", 1, err) < 0)
		return -1;
	if (req->argv[0][0] == 0)
		return sbx_err_set(err, 0, "bad_exec", "argv[0] is empty");
	return 0;
}

/* Where the strings start: the terminal size sits before them with a pty. */
static size_t exec_fixed(uint32_t flags)
{
	return EXEC_FIXED + ((flags & SBX_EXEC_PTY) ? 4 : 0);
}

int sbx_exec_encode(const struct sbx_exec_req *req, uint8_t **out, size_t *len, sbx_err *err)
{
	size_t n = exec_fixed(req->flags), off;
	uint8_t *p;

	if (check_req(req, err) < 0)
		return -1;
	n += strlen(req->cwd) + 1;
	for (int i = 0; i < req->argc; i++)
		n += strlen(req->argv[i]) + 1;
	for (int i = 0; i < req->envc; i++)
		n += strlen(req->envp[i]) + 1;
	if (n > SBX_FRAME_MAX_PAYLOAD)
		return sbx_err_set(err, 413, "too_large", "command, cwd and env are %zu bytes (max %d)", n,
				   SBX_FRAME_MAX_PAYLOAD);
	p = malloc(n);
	if (!p)
		return sbx_err_sys(err, "internal", "malloc");
	sbx_put32(p, req->flags);
	sbx_put32(p + 4, req->timeout_ms);
	sbx_put32(p + 8, req->credit);
	put16(p + 12, (uint16_t)req->argc);
	put16(p + 14, (uint16_t)req->envc);
	if (req->flags & SBX_EXEC_PTY) {
		put16(p + 16, req->cols);
		put16(p + 18, req->rows);
	}
	off = exec_fixed(req->flags);
#define PUTS(s)                                      \
	do {                                         \
		size_t l_ = strlen(s) + 1;           \
		memcpy(p + off, (s), l_);            \
		off += l_;                           \
	} while (0)
	PUTS(req->cwd);
	for (int i = 0; i < req->argc; i++)
		PUTS(req->argv[i]);
	for (int i = 0; i < req->envc; i++)
		PUTS(req->envp[i]);
#undef PUTS
	*out = p;
	*len = n;
	return 0;
}

/* Next NUL-terminated string at *off inside p[0..n); NULL when none ends there. */
static const char *next_string(const uint8_t *p, size_t n, size_t *off)
{
	const uint8_t *nul;
	const char *s;

	if (*off >= n)
		return NULL;
	nul = memchr(p + *off, 0, n - *off);
	if (!nul)
		return NULL;
	s = (const char *)p + *off;
	*off = (size_t)(nul - p) + 1;
	return s;
}

int sbx_exec_decode(const uint8_t *p, size_t n, struct sbx_exec_req *req, sbx_err *err)
{
	size_t off;
	const char **argv = NULL, **envp = NULL;
	int argc, envc;

	memset(req, 0, sizeof(*req));
	if (n < EXEC_FIXED || n > SBX_FRAME_MAX_PAYLOAD || n < exec_fixed(sbx_get32(p)))
		return sbx_err_set(err, 0, "bad_exec", "EXEC payload of %zu bytes", n);
	off = exec_fixed(sbx_get32(p));
	argc = get16(p + 12);
	envc = get16(p + 14);
	if (argc < 1 || argc > SBX_EXEC_MAX_ARGS)
		return sbx_err_set(err, 0, "bad_exec", "argc %d out of range", argc);
	if (envc > SBX_EXEC_MAX_ARGS)
		return sbx_err_set(err, 0, "bad_exec", "envc %d out of range", envc);
	/* every string takes at least its NUL: reject before allocating */
	if ((size_t)(1 + argc + envc) > n - off)
		return sbx_err_set(err, 0, "bad_exec", "EXEC payload too short for %d args and %d env",
				   argc, envc);
	argv = calloc((size_t)argc + 1, sizeof(*argv));
	envp = calloc((size_t)envc + 1, sizeof(*envp));
	if (!argv || !envp) {
		free(argv);
		free(envp);
		return sbx_err_sys(err, "internal", "calloc");
	}
	req->flags = sbx_get32(p);
	req->timeout_ms = sbx_get32(p + 4);
	req->credit = sbx_get32(p + 8);
	if (req->flags & SBX_EXEC_PTY) {
		req->cols = get16(p + 16);
		req->rows = get16(p + 18);
	}
	req->argc = argc;
	req->envc = envc;
	req->argv = argv;
	req->envp = envp;
	req->cwd = next_string(p, n, &off);
	for (int i = 0; i < argc && req->cwd; i++)
		if (!(argv[i] = next_string(p, n, &off)))
			goto truncated;
	for (int i = 0; i < envc && req->cwd; i++)
		if (!(envp[i] = next_string(p, n, &off)))
			goto truncated;
	if (!req->cwd)
		goto truncated;
	if (off != n) {
		sbx_err_set(err, 0, "bad_exec", "%zu bytes after the last string of EXEC", n - off);
		goto fail;
	}
	if (check_req(req, err) < 0)
		goto fail;
	return 0;
truncated:
	sbx_err_set(err, 0, "bad_exec", "EXEC payload truncated (a string has no NUL)");
fail:
	sbx_exec_req_free(req);
	return -1;
}

void sbx_exec_req_free(struct sbx_exec_req *req)
{
	free(req->argv);
	free(req->envp);
	req->argv = req->envp = NULL;
}

/* What sbx-init can send: an errno alone; "detached" without a status;
 * otherwise a status that adds up (128 + signal, or 124 after a timeout). */
static int exit_valid(int64_t code, uint32_t sig, uint8_t flags)
{
	if (flags & ~SBX_EXIT_FLAGS || sig > 64 || code < 0 || code > 255)
		return 0;
	if (flags & SBX_EXIT_ERRNO)
		return flags == SBX_EXIT_ERRNO && code >= 1 && sig == 0;
	if (flags & SBX_EXIT_DETACHED)
		return !(flags & SBX_EXIT_TIMED_OUT) && code == 0 && sig == 0;
	if (flags & SBX_EXIT_TIMED_OUT)
		return code == 124;
	return sig == 0 || code == 128 + (int64_t)sig;
}

int sbx_frame_decode_exit(const struct sbx_frame *f, struct sbx_exit_info *out, sbx_err *err)
{
	uint32_t sig, code;
	uint8_t flags;

	if (f->type != SBX_F_EXIT || f->len != 9)
		return sbx_err_set(err, 0, "bad_frame", "not an EXIT frame");
	code = sbx_get32(f->payload);
	sig = sbx_get32(f->payload + 4);
	flags = f->payload[8];
	if (!exit_valid(code > 255 ? 256 : (int64_t)code, sig, flags))
		return sbx_err_set(err, 0, "bad_frame", "EXIT with code %d, signal %u, flags 0x%x",
				   (int32_t)code, sig, flags);
	out->code = (int32_t)code;
	out->signal = sig;
	out->flags = flags;
	out->timed_out = (flags & SBX_EXIT_TIMED_OUT) != 0;
	out->err = (flags & SBX_EXIT_ERRNO) ? (int)code : 0;
	return 0;
}

long sbx_exit_encode(uint8_t out[9], int32_t code, uint32_t signal, uint8_t flags)
{
	sbx_put32(out, (uint32_t)code);
	sbx_put32(out + 4, signal);
	out[8] = flags;
	return 9;
}

int sbx_frame_decode_u32(const struct sbx_frame *f, uint32_t *out, sbx_err *err)
{
	if (f->len != 4)
		return sbx_err_set(err, 0, "bad_frame", "frame type 0x%02x: expected 4 bytes, got %u",
				   f->type, f->len);
	*out = sbx_get32(f->payload);
	return 0;
}

/* ---- v2 ---------------------------------------------------------------- */

static void put64(uint8_t *p, uint64_t v)
{
	sbx_put32(p, (uint32_t)(v >> 32));
	sbx_put32(p + 4, (uint32_t)v);
}

static uint64_t get64(const uint8_t *p)
{
	return (uint64_t)sbx_get32(p) << 32 | sbx_get32(p + 4);
}

static int file_check(const struct sbx_file_req *req, size_t plen, sbx_err *err)
{
	if (req->op < SBX_FILE_WRITE || req->op > SBX_FILE_MKDIR)
		return sbx_err_set(err, 0, "bad_file", "unknown file op %u", req->op);
	if (req->flags & ~SBX_FILE_PARENTS)
		return sbx_err_set(err, 0, "bad_file", "unknown file flags 0x%x", req->flags);
	if (req->mode & ~07777u)
		return sbx_err_set(err, 0, "bad_file", "file mode 0%o is more than permission bits",
				   req->mode);
	if (plen < 1 || plen > SBX_PATH_MAX || req->path[0] != '/')
		return sbx_err_set(err, 0, "bad_file", "path must be absolute, 1..%d bytes",
				   SBX_PATH_MAX);
	return 0;
}

long sbx_file_encode(const struct sbx_file_req *req, uint8_t out[SBX_FILE_MAX], sbx_err *err)
{
	size_t plen = req->path ? strlen(req->path) : 0;

	if (!req->path || file_check(req, plen, err) < 0)
		return req->path ? -1 : sbx_err_set(err, 0, "bad_file", "no path");
	sbx_put32(out, req->op);
	sbx_put32(out + 4, req->flags);
	sbx_put32(out + 8, req->mode);
	sbx_put32(out + 12, req->credit);
	memcpy(out + SBX_FILE_FIXED, req->path, plen + 1);
	return (long)(SBX_FILE_FIXED + plen + 1);
}

int sbx_file_decode(const uint8_t *p, size_t n, struct sbx_file_req *req, sbx_err *err)
{
	const uint8_t *nul;

	memset(req, 0, sizeof(*req));
	if (n < SBX_FILE_FIXED + 2 || n > SBX_FILE_MAX)
		return sbx_err_set(err, 0, "bad_file", "FILE payload of %zu bytes", n);
	/* the path ends exactly at the payload's end: a NUL inside is refused */
	nul = memchr(p + SBX_FILE_FIXED, 0, n - SBX_FILE_FIXED);
	if (nul != p + n - 1)
		return sbx_err_set(err, 0, "bad_file", "FILE path must end at the payload's only NUL");
	req->op = sbx_get32(p);
	req->flags = sbx_get32(p + 4);
	req->mode = sbx_get32(p + 8);
	req->credit = sbx_get32(p + 12);
	req->path = (const char *)p + SBX_FILE_FIXED;
	if (file_check(req, n - SBX_FILE_FIXED - 1, err) < 0) {
		memset(req, 0, sizeof(*req));
		return -1;
	}
	return 0;
}

long sbx_attach_encode(const struct sbx_attach_req *req, uint8_t out[SBX_ATTACH_LEN])
{
	sbx_put32(out, req->pid);
	put64(out + 4, req->offset);
	sbx_put32(out + 12, req->flags);
	sbx_put32(out + 16, req->credit);
	return SBX_ATTACH_LEN;
}

int sbx_attach_decode(const uint8_t *p, size_t n, struct sbx_attach_req *req, sbx_err *err)
{
	if (n != SBX_ATTACH_LEN)
		return sbx_err_set(err, 0, "bad_attach", "ATTACH payload of %zu bytes", n);
	req->pid = sbx_get32(p);
	req->offset = get64(p + 4);
	req->flags = sbx_get32(p + 12);
	req->credit = sbx_get32(p + 16);
	if (req->flags & ~SBX_ATTACH_FOLLOW)
		return sbx_err_set(err, 0, "bad_attach", "unknown ATTACH flags 0x%x", req->flags);
	if (req->pid == 0 || req->pid > INT32_MAX)
		return sbx_err_set(err, 0, "bad_attach", "ATTACH pid %u", req->pid);
	return 0;
}

long sbx_psignal_encode(uint32_t pid, uint32_t sig, uint8_t out[8])
{
	sbx_put32(out, pid);
	sbx_put32(out + 4, sig);
	return 8;
}

int sbx_psignal_decode(const uint8_t *p, size_t n, uint32_t *pid, uint32_t *sig, sbx_err *err)
{
	if (n != 8)
		return sbx_err_set(err, 0, "bad_psignal", "PSIGNAL payload of %zu bytes", n);
	*pid = sbx_get32(p);
	*sig = sbx_get32(p + 4);
	if (*pid == 0 || *pid > INT32_MAX || *sig < 1 || *sig > 64)
		return sbx_err_set(err, 0, "bad_psignal", "PSIGNAL pid %u signal %u", *pid, *sig);
	return 0;
}

long sbx_presize_encode(uint32_t pid, uint16_t cols, uint16_t rows, uint8_t out[8])
{
	sbx_put32(out, pid);
	put16(out + 4, cols);
	put16(out + 6, rows);
	return 8;
}

int sbx_presize_decode(const uint8_t *p, size_t n, uint32_t *pid, uint16_t *cols, uint16_t *rows, sbx_err *err)
{
	if (n != 8)
		return sbx_err_set(err, 0, "bad_presize", "PRESIZE payload of %zu bytes", n);
	*pid = sbx_get32(p);
	*cols = get16(p + 4);
	*rows = get16(p + 6);
	if (*pid == 0 || *pid > INT32_MAX || *cols < 1 || *cols > SBX_PTY_MAX || *rows < 1 || *rows > SBX_PTY_MAX)
		return sbx_err_set(err, 0, "bad_presize", "PRESIZE pid %u size %ux%u", *pid, *cols, *rows);
	return 0;
}

int sbx_pstdin_decode(const uint8_t *p, size_t n, uint32_t *pid, const uint8_t **data, size_t *len,
		      sbx_err *err)
{
	if (n < 4 || n > SBX_FRAME_MAX_PAYLOAD)
		return sbx_err_set(err, 0, "bad_pstdin", "PSTDIN payload of %zu bytes", n);
	*pid = sbx_get32(p);
	if (*pid == 0 || *pid > INT32_MAX)
		return sbx_err_set(err, 0, "bad_pstdin", "PSTDIN pid %u", *pid);
	*data = p + 4;
	*len = n - 4;
	return 0;
}

long sbx_stat_encode(const struct sbx_file_stat *st, uint8_t out[SBX_STAT_LEN])
{
	put64(out, st->size);
	sbx_put32(out + 8, st->mode);
	put64(out + 12, (uint64_t)st->mtime);
	return SBX_STAT_LEN;
}

int sbx_frame_decode_stat(const struct sbx_frame *f, struct sbx_file_stat *out, sbx_err *err)
{
	if (f->type != SBX_F_STAT || f->len != SBX_STAT_LEN)
		return sbx_err_set(err, 0, "bad_frame", "not a STAT frame");
	out->size = get64(f->payload);
	out->mode = sbx_get32(f->payload + 8);
	out->mtime = (int64_t)get64(f->payload + 12);
	if (out->size > INT64_MAX || out->mode > 07777)
		return sbx_err_set(err, 0, "bad_frame", "STAT with size %" PRIu64 ", mode 0%o",
				   out->size, out->mode);
	return 0;
}

/* ---- text lines from inside: canonical fields --------------------------- */

/* A tab-separated field starting at *off, ending at a tab (consumed), or
 * at n for the last one. */
static int field(const uint8_t *p, size_t n, size_t *off, int last, const uint8_t **s, size_t *len)
{
	const uint8_t *tab;

	if (*off > n)
		return 0;
	*s = p + *off;
	if (last) {
		*len = n - *off;
		*off = n + 1;
		return 1;
	}
	tab = memchr(p + *off, '\t', n - *off);
	if (!tab)
		return 0;
	*len = (size_t)(tab - *s);
	*off = (size_t)(tab - p) + 1;
	return 1;
}

/* Decimal without sign, no leading zero (but "0"), no overflow. */
static int dec_u64(const uint8_t *s, size_t n, uint64_t *v)
{
	uint64_t x = 0;

	if (n < 1 || n > 20 || (n > 1 && s[0] == '0'))
		return 0;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return 0;
		if (x > (UINT64_MAX - (uint64_t)(s[i] - '0')) / 10)
			return 0;
		x = x * 10 + (uint64_t)(s[i] - '0');
	}
	*v = x;
	return 1;
}

static int dec_i64(const uint8_t *s, size_t n, int64_t *v)
{
	uint64_t x;

	if (n > 0 && s[0] == '-') {
		if (!dec_u64(s + 1, n - 1, &x) || x == 0 || x > (uint64_t)INT64_MAX + 1)
			return 0;
		*v = x == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)x;
		return 1;
	}
	if (!dec_u64(s, n, &x) || x > INT64_MAX)
		return 0;
	*v = (int64_t)x;
	return 1;
}

static int eq(const uint8_t *s, size_t n, const char *lit)
{
	return strlen(lit) == n && memcmp(s, lit, n) == 0;
}

/* The next field as a number no greater than max. */
static int field_u64(const uint8_t *p, size_t n, size_t *off, uint64_t max, uint64_t *v)
{
	const uint8_t *s;
	size_t l;

	return field(p, n, off, 0, &s, &l) && dec_u64(s, l, v) && *v <= max;
}

static int field_i64(const uint8_t *p, size_t n, size_t *off, int64_t *v)
{
	const uint8_t *s;
	size_t l;

	return field(p, n, off, 0, &s, &l) && dec_i64(s, l, v);
}

/* A line is its tab-separated head, already printed into out by snprintf
 * (which returned `head`), and a free-text last field appended here: the
 * line's length, or -1 when it does not fit. */
static long line_end(char *out, size_t cap, int head, const char *tail, size_t tail_len)
{
	if (head < 0 || (size_t)head >= cap || (size_t)head + tail_len > cap)
		return -1;
	memcpy(out + head, tail, tail_len);
	return (long)((size_t)head + tail_len);
}

static const char *const ftype_names[] = { NULL, "file", "dir", "symlink", "other" };

const char *sbx_ftype_name(enum sbx_ftype t)
{
	return t >= SBX_FT_FILE && t <= SBX_FT_OTHER ? ftype_names[t] : NULL;
}

static int name_valid(const char *s, size_t n)
{
	if (n < 1 || n > SBX_NAME_MAX || memchr(s, 0, n) || memchr(s, '/', n) || memchr(s, '\n', n))
		return 0;
	return !((n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'));
}

long sbx_list_entry_encode(const struct sbx_list_entry *e, char *out, size_t cap)
{
	const char *t = sbx_ftype_name(e->type);
	int n;

	if (!t || !name_valid(e->name, e->name_len) || e->mode > 07777 || e->size > INT64_MAX)
		return -1;
	n = snprintf(out, cap, "%s\t%" PRIu64 "\t%04o\t%" PRId64 "\t", t, e->size, e->mode, e->mtime);
	return line_end(out, cap, n, e->name, e->name_len);
}

int sbx_list_entry_decode(const uint8_t *p, size_t n, struct sbx_list_entry *e, sbx_err *err)
{
	const uint8_t *s;
	size_t off = 0, l;
	uint64_t u;

	memset(e, 0, sizeof(*e));
	if (n > SBX_LIST_LINE_MAX)
		goto bad;
	if (!field(p, n, &off, 0, &s, &l))
		goto bad;
	for (int t = SBX_FT_FILE; t <= SBX_FT_OTHER; t++)
		if (eq(s, l, ftype_names[t]))
			e->type = (enum sbx_ftype)t;
	if (!e->type)
		goto bad;
	if (!field_u64(p, n, &off, INT64_MAX, &e->size))
		goto bad;
	if (!field(p, n, &off, 0, &s, &l) || l != 4)
		goto bad;
	u = 0;
	for (size_t i = 0; i < 4; i++) {
		if (s[i] < '0' || s[i] > '7')
			goto bad;
		u = u * 8 + (uint64_t)(s[i] - '0');
	}
	e->mode = (uint32_t)u;
	if (!field_i64(p, n, &off, &e->mtime))
		goto bad;
	if (!field(p, n, &off, 1, &s, &l) || !name_valid((const char *)s, l))
		goto bad;
	e->name = (const char *)s;
	e->name_len = l;
	return 0;
bad:
	memset(e, 0, sizeof(*e));
	return sbx_err_set(err, 0, "bad_frame", "malformed list entry");
}

static int cmd_valid(const char *s, size_t n)
{
	if (n > SBX_CMD_MAX || !sbx_utf8_valid((const uint8_t *)s, n))
		return 0;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
			return 0;
	return 1;
}

static int proc_info_valid(const struct sbx_proc_info *pi)
{
	if (pi->pid < 1 || pi->pid > INT32_MAX || pi->started_ms < 0 || pi->ended_ms < 0 ||
	    (pi->flags & ~(SBX_EXIT_TIMED_OUT | SBX_EXIT_TRUNCATED)) ||
	    !cmd_valid(pi->cmd, pi->cmd_len) || pi->bytes > INT64_MAX)
		return 0;
	if (pi->running)
		return pi->exit_code == 0 && pi->signal == 0 && pi->ended_ms == 0 &&
		       !(pi->flags & SBX_EXIT_TIMED_OUT);
	return exit_valid(pi->exit_code, pi->signal, pi->flags & SBX_EXIT_TIMED_OUT);
}

long sbx_proc_info_encode(const struct sbx_proc_info *pi, char *out, size_t cap)
{
	int n;

	if (!proc_info_valid(pi))
		return -1;
	n = snprintf(out, cap, "%" PRIu32 "\t%s\t%" PRId32 "\t%" PRIu32 "\t%u\t%" PRId64 "\t%" PRId64
			       "\t%" PRIu64 "\t",
		     pi->pid, pi->running ? "running" : "exited", pi->exit_code, pi->signal,
		     (unsigned)pi->flags, pi->started_ms, pi->ended_ms, pi->bytes);
	return line_end(out, cap, n, pi->cmd, pi->cmd_len);
}

int sbx_proc_info_decode(const uint8_t *p, size_t n, struct sbx_proc_info *pi, sbx_err *err)
{
	const uint8_t *s;
	size_t off = 0, l;
	uint64_t u;

	memset(pi, 0, sizeof(*pi));
	if (n > SBX_PROC_LINE_MAX)
		goto bad;
	if (!field_u64(p, n, &off, INT32_MAX, &u))
		goto bad;
	pi->pid = (uint32_t)u;
	if (!field(p, n, &off, 0, &s, &l))
		goto bad;
	if (eq(s, l, "running"))
		pi->running = 1;
	else if (!eq(s, l, "exited"))
		goto bad;
	if (!field_u64(p, n, &off, 255, &u))
		goto bad;
	pi->exit_code = (int32_t)u;
	if (!field_u64(p, n, &off, 64, &u))
		goto bad;
	pi->signal = (uint32_t)u;
	if (!field_u64(p, n, &off, 255, &u))
		goto bad;
	pi->flags = (uint8_t)u;
	if (!field_i64(p, n, &off, &pi->started_ms) || !field_i64(p, n, &off, &pi->ended_ms) ||
	    !field_u64(p, n, &off, UINT64_MAX, &pi->bytes))
		goto bad;
	if (!field(p, n, &off, 1, &s, &l))
		goto bad;
	pi->cmd = (const char *)s;
	pi->cmd_len = l;
	if (!proc_info_valid(pi))
		goto bad;
	return 0;
bad:
	memset(pi, 0, sizeof(*pi));
	return sbx_err_set(err, 0, "bad_frame", "malformed process entry");
}

long sbx_hello_encode(const uint8_t nonce[SBX_CHAN_NONCE_LEN], uint8_t out[SBX_HELLO_LEN])
{
	sbx_put32(out, SBX_FRAME_VERSION);
	memcpy(out + 4, nonce, SBX_CHAN_NONCE_LEN);
	return SBX_HELLO_LEN;
}

int sbx_hello_decode(const struct sbx_frame *f, uint32_t *version, uint8_t nonce[SBX_CHAN_NONCE_LEN],
		     sbx_err *err)
{
	if (f->type != SBX_F_HELLO || f->len != SBX_HELLO_LEN)
		return sbx_err_set(err, 0, "bad_frame", "not a HELLO frame");
	*version = sbx_get32(f->payload);
	memcpy(nonce, f->payload + 4, SBX_CHAN_NONCE_LEN);
	return 0;
}

long sbx_auth_encode(const uint8_t nonce[SBX_CHAN_NONCE_LEN], const uint8_t mac[SBX_CHAN_MAC_LEN],
		     uint8_t out[SBX_AUTH_LEN])
{
	memcpy(out, nonce, SBX_CHAN_NONCE_LEN);
	memcpy(out + SBX_CHAN_NONCE_LEN, mac, SBX_CHAN_MAC_LEN);
	return SBX_AUTH_LEN;
}

int sbx_auth_decode(const struct sbx_frame *f, uint8_t nonce[SBX_CHAN_NONCE_LEN],
		    uint8_t mac[SBX_CHAN_MAC_LEN], sbx_err *err)
{
	if (f->type != SBX_F_AUTH || f->len != SBX_AUTH_LEN)
		return sbx_err_set(err, 0, "bad_frame", "not an AUTH frame");
	memcpy(nonce, f->payload, SBX_CHAN_NONCE_LEN);
	memcpy(mac, f->payload + SBX_CHAN_NONCE_LEN, SBX_CHAN_MAC_LEN);
	return 0;
}
