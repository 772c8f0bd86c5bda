/* The channel's frames (see frame.h). Both ends parse strictly: a frame of
 * an unknown type, from the wrong side, with a length its type cannot have,
 * or an EXEC payload that does not add up exactly, is an error, never
 * guessed at. Only libc and err.c are used, so sbx-init can link this file
 * into its static binary. */
#include "config.h"
#include <stdlib.h>
#include <string.h>
#include "frame.h"

#define EXEC_FIXED 16 /* flags, timeout_ms, credit, argc, envc */
#define PING_MAX 64
#define ERROR_MAX 1024

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = v >> 24;
	p[1] = v >> 16;
	p[2] = v >> 8;
	p[3] = v;
}

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = v >> 8;
	p[1] = v;
}

void sbx_frame_header(uint8_t out[SBX_FRAME_HDR], uint8_t type, uint32_t stream, uint32_t payload_len)
{
	put32(out, payload_len + 5);
	out[4] = type;
	put32(out + 5, stream);
}

/* Strict UTF-8 (no overlongs, no surrogates, nothing past U+10FFFF, no NUL). */
static int utf8_valid(const uint8_t *s, size_t n)
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
	{ SBX_F_PONG, 1, 0, 0, PING_MAX },
	{ SBX_F_STARTED, 1, 1, 4, 4 },
	{ SBX_F_STDOUT, 1, 1, 1, SBX_FRAME_MAX_PAYLOAD },
	{ SBX_F_STDERR, 1, 1, 1, SBX_FRAME_MAX_PAYLOAD },
	{ SBX_F_EXIT, 1, 1, 9, 9 },
	{ SBX_F_ERROR, 1, 1, 1, ERROR_MAX },
	{ SBX_F_HELLO, 1, 2, 4, 4 },
	{ SBX_F_STDIN_ACK, 1, 1, 4, 4 },
};

long sbx_frame_parse(const uint8_t *buf, size_t n, int from_inside, struct sbx_frame *f, sbx_err *err)
{
	const struct type_rule *r = NULL;
	uint32_t len, plen, stream;

	if (n < 4)
		return 0;
	len = get32(buf);
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
	stream = get32(buf + 5);
	if ((r->needs_stream == 1 && stream == 0) || (r->needs_stream == 2 && stream != 0))
		return sbx_err_set(err, 0, "bad_frame", "frame type 0x%02x on stream %u", buf[4], stream);
	if (n - SBX_FRAME_HDR < plen)
		return 0;
	if (r->type == SBX_F_ERROR && !utf8_valid(buf + SBX_FRAME_HDR, plen))
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
	if (req->flags & ~(SBX_EXEC_STDIN | SBX_EXEC_BACKGROUND))
		return sbx_err_set(err, 0, "bad_exec", "unknown exec flags 0x%x", req->flags);
	if (!req->cwd || req->cwd[0] != '/')
		return sbx_err_set(err, 0, "bad_exec", "cwd must be an absolute path");
	if (check_strings(req->argv, req->argc, "argv", 0, err) < 0 ||
	    check_strings(req->envp, req->envc, "env", 1, err) < 0)
		return -1;
	if (req->argv[0][0] == 0)
		return sbx_err_set(err, 0, "bad_exec", "argv[0] is empty");
	return 0;
}

int sbx_exec_encode(const struct sbx_exec_req *req, uint8_t **out, size_t *len, sbx_err *err)
{
	size_t n = EXEC_FIXED, off;
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
	put32(p, req->flags);
	put32(p + 4, req->timeout_ms);
	put32(p + 8, req->credit);
	put16(p + 12, (uint16_t)req->argc);
	put16(p + 14, (uint16_t)req->envc);
	off = EXEC_FIXED;
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
	size_t off = EXEC_FIXED;
	const char **argv = NULL, **envp = NULL;
	int argc, envc;

	memset(req, 0, sizeof(*req));
	if (n < EXEC_FIXED || n > SBX_FRAME_MAX_PAYLOAD)
		return sbx_err_set(err, 0, "bad_exec", "EXEC payload of %zu bytes", n);
	argc = get16(p + 12);
	envc = get16(p + 14);
	if (argc < 1 || argc > SBX_EXEC_MAX_ARGS)
		return sbx_err_set(err, 0, "bad_exec", "argc %d out of range", argc);
	if (envc > SBX_EXEC_MAX_ARGS)
		return sbx_err_set(err, 0, "bad_exec", "envc %d out of range", envc);
	/* every string takes at least its NUL: reject before allocating */
	if ((size_t)(1 + argc + envc) > n - EXEC_FIXED)
		return sbx_err_set(err, 0, "bad_exec", "EXEC payload too short for %d args and %d env",
				   argc, envc);
	argv = calloc((size_t)argc + 1, sizeof(*argv));
	envp = calloc((size_t)envc + 1, sizeof(*envp));
	if (!argv || !envp) {
		free(argv);
		free(envp);
		return sbx_err_sys(err, "internal", "calloc");
	}
	req->flags = get32(p);
	req->timeout_ms = get32(p + 4);
	req->credit = get32(p + 8);
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

int sbx_frame_decode_exit(const struct sbx_frame *f, struct sbx_exit_info *out, sbx_err *err)
{
	uint32_t sig;
	uint8_t flags;

	if (f->type != SBX_F_EXIT || f->len != 9)
		return sbx_err_set(err, 0, "bad_frame", "not an EXIT frame");
	sig = get32(f->payload + 4);
	flags = f->payload[8];
	if (sig > 64)
		return sbx_err_set(err, 0, "bad_frame", "EXIT with signal %u", sig);
	if (get32(f->payload) > 255)
		return sbx_err_set(err, 0, "bad_frame", "EXIT with code %d", (int32_t)get32(f->payload));
	if (flags & ~1u)
		return sbx_err_set(err, 0, "bad_frame", "EXIT with unknown flags 0x%x", flags);
	out->code = (int32_t)get32(f->payload);
	out->signal = sig;
	out->timed_out = flags & 1;
	return 0;
}

int sbx_frame_decode_u32(const struct sbx_frame *f, uint32_t *out, sbx_err *err)
{
	if (f->len != 4)
		return sbx_err_set(err, 0, "bad_frame", "frame type 0x%02x: expected 4 bytes, got %u",
				   f->type, f->len);
	*out = get32(f->payload);
	return 0;
}
