/* The node agent's relay, the requests from the API (doc/internal-protocol.md,
 * hop 1): a first request starts an op (exec, file operations, background
 * processes) after checking every field strictly; follow-ups (credit,
 * stdin, signal, file data/end/abort) go to the running op. relay.c
 * dispatches to here; chan.c carries the frames to sbx-init. */
#include "config.h"
#include <inttypes.h>
#include <signal.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <jansson.h>
#include "cleanup.h"
#include "clock.h"
#include "execlog.h"
#include "frame.h"
#include "id.h"
#include "json.h"
#include "log.h"
#include "relay_int.h"
#include "sandbox_state.h"

#define MAX_OPS 16384
/* Bytes from the API not yet framed, per op: the API keeps to the window
 * (file.credit); past this it did not, and the op fails. */
#define PEND_MAX (2 * 1024 * 1024 + SBX_FRAME_MAX_PAYLOAD)
#define ACTIVITY_MS 10000
#define CMD_MAX 4096

static long long wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* c: the placement's channel; sid: the record it serves */
static void touch_activity(struct relay *r, struct chan *c, const char *sid)
{
	long long now = sbx_now_ms();
	sbx_err err = SBX_ERR_INIT;

	if (c->last_touch && now - c->last_touch < ACTIVITY_MS)
		return;
	c->last_touch = now;
	if (r->xlog) {
		execlog_touch(r->xlog, sid);
		return;
	}
	if (sbx_sandbox_touch(r->db, sid, &err) < 0)
		log_warnx("sandbox %s: last_activity_at: %s", sid, err.msg);
}

static int buf_add(struct buf *b, const void *p, size_t n, size_t max)
{
	uint8_t *np;

	if (b->off && b->off == b->len)
		b->off = b->len = 0;
	if (b->len - b->off + n > max)
		return -1;
	if (b->off) {
		memmove(b->p, b->p + b->off, b->len - b->off);
		b->len -= b->off;
		b->off = 0;
	}
	np = realloc(b->p, b->len + n ? b->len + n : 1);
	if (!np)
		return -1;
	b->p = np;
	memcpy(b->p + b->len, p, n);
	b->len += n;
	return 0;
}

/* ---- requests (hop 1, API -> node) ---- */

static int sig_of(json_t *v)
{
	static const struct {
		const char *name;
		int sig;
	} names[] = { { "HUP", SIGHUP },   { "INT", SIGINT },   { "QUIT", SIGQUIT }, { "KILL", SIGKILL },
		      { "USR1", SIGUSR1 }, { "USR2", SIGUSR2 }, { "TERM", SIGTERM }, { "STOP", SIGSTOP },
		      { "CONT", SIGCONT }, { "ALRM", SIGALRM }, { "PIPE", SIGPIPE }, { "WINCH", SIGWINCH } };
	const char *s;

	if (json_is_integer(v)) {
		json_int_t n = json_integer_value(v);
		return n >= 1 && n <= 64 ? (int)n : -1;
	}
	if (!json_is_string(v))
		return -1;
	s = json_string_value(v);
	if (!strncmp(s, "SIG", 3))
		s += 3;
	for (size_t i = 0; i < SBX_ARRAY_LEN(names); i++)
		if (!strcmp(s, names[i].name))
			return names[i].sig;
	return -1;
}

static int b64_decode(const char *s, uint8_t **out, size_t *len)
{
	size_t sl = strlen(s), cap = sl / 4 * 3 + 3;
	uint8_t *p = malloc(cap ? cap : 1);

	if (!p)
		return -1;
	if (sodium_base642bin(p, cap, s, sl, "\n\r ", len, NULL, sodium_base64_VARIANT_ORIGINAL) != 0) {
		free(p);
		return -1;
	}
	*out = p;
	return 0;
}

static bool str_clean(json_t *v)
{
	return json_is_string(v) && strlen(json_string_value(v)) == json_string_length(v);
}

/* The common start of a new op: the sandbox must be ready here and its
 * channel up. NULL: an error was answered. */
static struct rop *op_begin(struct relay *r, const sbx_mq_msg *m, const char *sid, const char *plc,
			    const char *op_id, enum rk kind)
{
	struct chan *c;
	struct rop *o;
	char why[300] = "";
	int st;
	sbx_err err = SBX_ERR_INIT;

	if (op_find(r, op_id)) {
		reply_error(r, m, op_id, "internal", "op %s is already running", op_id);
		return NULL;
	}
	st = r->h.state ? r->h.state(r->h.ctx, plc, sid, why, sizeof(why)) : 1;
	if (st < 0) {
		reply_error(r, m, op_id, "not_ready", "the sandbox is not on this node");
		return NULL;
	}
	if (st == 0) {
		reply_error(r, m, op_id, "not_ready", "the sandbox is %s", why[0] ? why : "not ready");
		return NULL;
	}
	if (r->nops >= MAX_OPS) {
		reply_error(r, m, op_id, "internal", "the node runs too many operations");
		return NULL;
	}
	c = chan_get(r, plc);
	if (!c) {
		reply_error(r, m, op_id, "internal", "no channel slot");
		return NULL;
	}
	/* a frozen sandbox is thawed before anything reaches it (idle.c) */
	if (r->h.wake)
		r->h.wake(r->h.ctx, plc);
	/* the socket is dialled now and the handshake runs in the loop; a
	 * socket that cannot be dialled yet (sbx-init still binding it) is
	 * dialled again from the loop's ticks (chan_dial_later): the loop
	 * never waits for one sandbox */
	if (c->fd < 0 && !c->dial_at && chan_open(r, c, &err) < 0) {
		char w[256] = "";
		int alive = sandbox_alive(r->sc, plc, w, sizeof(w));
		if (alive == 0) {
			reply_error(r, m, op_id, "sandbox_dead", "the sandbox died: %s", w[0] ? w : err.msg);
			chan_dead(r, c, w);
			return NULL;
		}
		if (!strcmp(err.code, "no_init")) {
			reply_error(r, m, op_id, "internal", "cannot reach sbx-init: %s", err.msg);
			return NULL;
		}
		if (alive < 0) {
			reply_error(r, m, op_id, "sandbox_unresponsive", "sbx-init did not answer: %s", err.msg);
			return NULL;
		}
		chan_dial_later(r, c, err.msg);
	}
	o = calloc(1, sizeof(*o));
	if (!o) {
		reply_error(r, m, op_id, "internal", "out of memory");
		return NULL;
	}
	o->ch = c;
	o->kind = kind;
	o->stream = c->next_stream++;
	if (!c->next_stream)
		c->next_stream = 1;
	o->live = true;
	o->size = -1;
	o->oom0 = -1;
	o->t0_mono = sbx_now_ms();
	o->t0_wall_ms = wall_ms();
	snprintf(o->op_id, sizeof(o->op_id), "%s", op_id);
	snprintf(o->reply_to, sizeof(o->reply_to), "%s", m->reply_to);
	snprintf(o->req_id, sizeof(o->req_id), "%s", m->request_id);
	snprintf(o->sandbox, sizeof(o->sandbox), "%s", sid);
	o->next = r->ops;
	if (r->ops)
		r->ops->prev = o;
	r->ops = o;
	o->cnext = c->ops;
	if (c->ops)
		c->ops->cprev = o;
	c->ops = o;
	r->nops++;
	c->nops++;
	c->busy_at = o->t0_mono;
	touch_activity(r, c, sid);
	return o;
}

/* The op's opening frame is queued: sbx-init must answer it within
 * answer_ms. Kinds whose first answer may rightly take long (a write waits
 * for data, an attach for output, a PSTDIN for its reader) get a PING on
 * their stream: its PONG, sent once sbx-init has read the op, answers. */
static void op_expect(struct relay *r, struct rop *o)
{
	o->await_at = sbx_now_ms();
	if (o->kind == RK_WRITE || o->kind == RK_ATTACH || o->kind == RK_PSTDIN)
		chan_send(r, o->ch, SBX_F_PING, o->stream, NULL, 0);
}

void on_exec(struct relay *r, const sbx_mq_msg *m, json_t *b, const char *sid, const char *plc, const char *op_id)
{
	json_t *argv, *env = NULL, *v;
	const char *cwd = "/", *stdin_b64 = NULL, *key;
	json_int_t timeout_ms = 0, credit = 65536, cols = 0, rows = 0;
	int stdin_open = 0, background = 0;
	json_error_t jerr;
	struct sbx_exec_req req = { 0 };
	cleanup_free const char **av = NULL;
	cleanup_free const char **ev = NULL;
	cleanup_free char *envbuf = NULL;
	cleanup_free uint8_t *payload = NULL;
	cleanup_free uint8_t *in = NULL;
	size_t plen, inlen = 0, k = 0, envsz = 0;
	char cmd[CMD_MAX + 1];
	size_t cl = 0;
	sbx_err err = SBX_ERR_INIT;
	struct rop *o;

	if (json_unpack_ex(b, &jerr, JSON_STRICT,
			   "{s:s, s:s, s:s, s:o, s?o, s?s, s?I, s?I, s?b, s?b, s?s, s?{s:I, s:I}}", "sandbox_id", &sid,
			   "placement_id", &plc, "op_id", &op_id, "argv", &argv, "env", &env, "cwd", &cwd, "timeout_ms",
			   &timeout_ms, "credit", &credit, "stdin_open", &stdin_open, "background", &background,
			   "stdin_b64", &stdin_b64, "pty", "cols", &cols, "rows", &rows) < 0 ||
	    (cols && (cols < 1 || cols > SBX_PTY_MAX || rows < 1 || rows > SBX_PTY_MAX)) ||
	    !json_is_array(argv) || json_array_size(argv) < 1 || json_array_size(argv) > SBX_EXEC_MAX_ARGS ||
	    (env && !json_is_null(env) && (!json_is_object(env) || json_object_size(env) > SBX_EXEC_MAX_ARGS)) ||
	    timeout_ms < 0 || timeout_ms > UINT32_MAX || credit < 0 || credit > UINT32_MAX) {
		reply_error(r, m, op_id, "internal", "malformed exec request: %s", jerr.text);
		return;
	}
	av = calloc(json_array_size(argv) + 1, sizeof(*av));
	ev = calloc((env ? json_object_size(env) : 0) + 1, sizeof(*ev));
	if (!av || !ev) {
		reply_error(r, m, op_id, "internal", "out of memory");
		return;
	}
	for (size_t i = 0; i < json_array_size(argv); i++) {
		v = json_array_get(argv, i);
		if (!str_clean(v)) {
			reply_error(r, m, op_id, "internal", "argv[%zu] is not a string without NUL", i);
			return;
		}
		av[i] = json_string_value(v);
		cl += (size_t)snprintf(cmd + (cl < sizeof(cmd) ? cl : sizeof(cmd) - 1),
				       cl < sizeof(cmd) ? sizeof(cmd) - cl : 1, "%s%s", i ? " " : "", av[i]);
	}
	if (env && json_is_object(env)) {
		json_object_foreach(env, key, v) envsz += strlen(key) + 2 + (json_is_string(v) ? json_string_length(v) : 0);
		envbuf = malloc(envsz + 1);
		if (!envbuf) {
			reply_error(r, m, op_id, "internal", "out of memory");
			return;
		}
		char *p = envbuf;
		json_object_foreach(env, key, v) {
			if (!str_clean(v) || !key[0] || strchr(key, '=')) {
				reply_error(r, m, op_id, "internal", "env %.64s: not NAME and a string value", key);
				return;
			}
			ev[k++] = p;
			p += sprintf(p, "%s=%s", key, json_string_value(v)) + 1;
		}
	}
	if (stdin_b64 && (b64_decode(stdin_b64, &in, &inlen) < 0 || inlen > SBX_STDIN_WINDOW)) {
		reply_error(r, m, op_id, inlen > SBX_STDIN_WINDOW ? "too_large" : "internal",
			    "stdin_b64 is not base64 of at most 1 MiB");
		return;
	}
	req.flags = (stdin_open || inlen ? SBX_EXEC_STDIN : 0) | (background ? SBX_EXEC_BACKGROUND : 0) |
		    (cols ? SBX_EXEC_PTY : 0);
	req.cols = (uint16_t)cols;
	req.rows = (uint16_t)rows;
	req.timeout_ms = (uint32_t)timeout_ms;
	req.credit = (uint32_t)credit;
	req.cwd = cwd;
	req.argc = (int)json_array_size(argv);
	req.envc = (int)k;
	req.argv = av;
	req.envp = ev;
	if (sbx_exec_encode(&req, &payload, &plen, &err) < 0) {
		reply_error(r, m, op_id, !strcmp(err.code, "too_large") ? "too_large" : "internal", "%s", err.msg);
		return;
	}
	if (!(o = op_begin(r, m, sid, plc, op_id, RK_EXEC)))
		return;
	o->background = background;
	o->stdin_open = stdin_open;
	o->credit_in = (uint64_t)credit;
	o->cmd = strdup(cmd);
	o->oom0 = sandbox_oom_kills(plc);
	if (inlen && buf_add(&o->pend, in, inlen, PEND_MAX) < 0) {
		op_error(r, o, "internal", "out of memory");
		return;
	}
	o->want_close = !stdin_open && (req.flags & SBX_EXEC_STDIN);
	if (chan_send(r, o->ch, SBX_F_EXEC, o->stream, payload, plen) == 0) {
		op_expect(r, o);
		op_pump(r, o);
	}
	log_info("sandbox %s: exec %.200s (op %s, stream %u)", sid, cmd, op_id, o->stream);
}

void on_file(struct relay *r, const sbx_mq_msg *m, json_t *b, const char *sid, const char *plc, const char *op_id,
	     enum rk kind)
{
	const char *path = NULL;
	int flag = 0;
	json_int_t credit = 1024 * 1024, size = -1;
	json_error_t jerr;
	int rc;
	struct sbx_file_req fr = { 0 };
	uint8_t payload[SBX_FILE_MAX];
	long plen;
	sbx_err err = SBX_ERR_INIT;
	struct rop *o;

	switch (kind) {
	case RK_WRITE:
		rc = json_unpack_ex(b, &jerr, JSON_STRICT, "{s:s, s:s, s:s, s:s, s?b, s?I}", "sandbox_id", &sid, "placement_id", &plc, "op_id",
				    &op_id, "path", &path, "mkdir", &flag, "size", &size);
		fr.op = SBX_FILE_WRITE;
		break;
	case RK_READ:
		rc = json_unpack_ex(b, &jerr, JSON_STRICT, "{s:s, s:s, s:s, s:s, s?I}", "sandbox_id", &sid, "placement_id", &plc, "op_id", &op_id,
				    "path", &path, "credit", &credit);
		fr.op = SBX_FILE_READ;
		break;
	case RK_LIST:
		rc = json_unpack_ex(b, &jerr, JSON_STRICT, "{s:s, s:s, s:s, s:s}", "sandbox_id", &sid, "placement_id", &plc, "op_id", &op_id,
				    "path", &path);
		fr.op = SBX_FILE_LIST;
		credit = ACC_MAX;
		break;
	case RK_DELETE:
		rc = json_unpack_ex(b, &jerr, JSON_STRICT, "{s:s, s:s, s:s, s:s, s?b}", "sandbox_id", &sid, "placement_id", &plc, "op_id", &op_id,
				    "path", &path, "recursive", &flag);
		fr.op = SBX_FILE_DELETE;
		break;
	default:
		rc = json_unpack_ex(b, &jerr, JSON_STRICT, "{s:s, s:s, s:s, s:s, s?b}", "sandbox_id", &sid, "placement_id", &plc, "op_id", &op_id,
				    "path", &path, "parents", &flag);
		fr.op = SBX_FILE_MKDIR;
		break;
	}
	if (rc < 0 || credit < 0 || credit > UINT32_MAX) {
		reply_error(r, m, op_id, "internal", "malformed file request: %s", jerr.text);
		return;
	}
	fr.flags = flag ? SBX_FILE_PARENTS : 0;
	fr.credit = kind == RK_READ || kind == RK_LIST ? (uint32_t)credit : 0;
	fr.path = path;
	if ((plen = sbx_file_encode(&fr, payload, &err)) < 0) {
		reply_error(r, m, op_id, "invalid", "%s", err.msg);
		return;
	}
	if (!(o = op_begin(r, m, sid, plc, op_id, kind)))
		return;
	o->credit_in = fr.credit;
	o->size = size;
	if (kind == RK_LIST)
		o->acc = json_array();
	if (chan_send(r, o->ch, SBX_F_FILE, o->stream, payload, (size_t)plen) == 0)
		op_expect(r, o);
}

void on_proc(struct relay *r, const sbx_mq_msg *m, json_t *b, const char *sid, const char *plc, const char *op_id,
	     enum rk kind)
{
	json_int_t pid = 0, offset = 0, credit = 65536, cols = 1, rows = 1;
	int follow = 0, close_ = 0;
	const char *data = NULL;
	json_t *sigv = NULL;
	int sig = 0;
	json_error_t jerr;
	int rc;
	cleanup_free uint8_t *bytes = NULL;
	size_t blen = 0;
	struct rop *o;

	switch (kind) {
	case RK_PROCS:
		rc = json_unpack_ex(b, &jerr, JSON_STRICT, "{s:s, s:s, s:s}", "sandbox_id", &sid, "placement_id", &plc, "op_id", &op_id);
		break;
	case RK_ATTACH:
		rc = json_unpack_ex(b, &jerr, JSON_STRICT, "{s:s, s:s, s:s, s:I, s?I, s?b, s?I}", "sandbox_id", &sid, "placement_id", &plc,
				    "op_id", &op_id, "pid", &pid, "offset", &offset, "follow", &follow, "credit",
				    &credit);
		break;
	case RK_PSTDIN:
		rc = json_unpack_ex(b, &jerr, JSON_STRICT, "{s:s, s:s, s:s, s:I, s?s, s?b}", "sandbox_id", &sid, "placement_id", &plc, "op_id",
				    &op_id, "pid", &pid, "data_b64", &data, "close", &close_);
		break;
	case RK_PRESIZE:
		rc = json_unpack_ex(b, &jerr, JSON_STRICT, "{s:s, s:s, s:s, s:I, s:I, s:I}", "sandbox_id", &sid,
				    "placement_id", &plc, "op_id", &op_id, "pid", &pid, "cols", &cols, "rows", &rows);
		break;
	default:
		rc = json_unpack_ex(b, &jerr, JSON_STRICT, "{s:s, s:s, s:s, s:I, s:o}", "sandbox_id", &sid, "placement_id", &plc, "op_id", &op_id,
				    "pid", &pid, "signal", &sigv);
		break;
	}
	if (rc < 0 || pid < 0 || pid > UINT32_MAX || offset < 0 || credit < 0 || credit > UINT32_MAX ||
	    cols < 1 || cols > SBX_PTY_MAX || rows < 1 || rows > SBX_PTY_MAX ||
	    (kind != RK_PROCS && pid < 1)) {
		reply_error(r, m, op_id, "internal", "malformed %s request: %s", m->type, jerr.text);
		return;
	}
	if (kind == RK_PSIGNAL && (sig = sig_of(sigv)) < 0) {
		reply_error(r, m, op_id, "invalid", "not a signal");
		return;
	}
	if (kind == RK_PSTDIN) {
		if (data && b64_decode(data, &bytes, &blen) < 0) {
			reply_error(r, m, op_id, "internal", "data_b64 is not base64");
			return;
		}
		if (blen > SBX_FRAME_MAX_PAYLOAD - 4) {
			reply_error(r, m, op_id, "too_large", "at most %d bytes per proc.stdin", SBX_FRAME_MAX_PAYLOAD - 4);
			return;
		}
		if (!blen && !close_) {
			/* nothing to do: answer at once */
			reply_json(r, m, op_id, SBX_MSG_DONE, json_object());
			return;
		}
	}
	if (!(o = op_begin(r, m, sid, plc, op_id, kind)))
		return;
	switch (kind) {
	case RK_PROCS:
		o->acc = json_array();
		chan_send(r, o->ch, SBX_F_PROCS, o->stream, NULL, 0);
		break;
	case RK_ATTACH: {
		struct sbx_attach_req ar = { .pid = (uint32_t)pid, .flags = follow ? SBX_ATTACH_FOLLOW : 0,
					     .credit = (uint32_t)credit, .offset = (uint64_t)offset };
		uint8_t p[SBX_ATTACH_LEN];
		long n = sbx_attach_encode(&ar, p);
		o->credit_in = (uint64_t)credit;
		o->pid = (uint32_t)pid;
		o->got = (int64_t)offset; /* where the replay starts */
		chan_send(r, o->ch, SBX_F_ATTACH, o->stream, p, (size_t)n);
		break;
	}
	case RK_PSTDIN: {
		/* data first (one frame), then an empty one to close: each is
		 * answered with EXIT on its own stream; the op ends with the last */
		cleanup_free uint8_t *p = malloc(4 + blen);
		if (!p) {
			op_error(r, o, "internal", "out of memory");
			return;
		}
		sbx_put32(p, (uint32_t)pid);
		if (blen) {
			memcpy(p + 4, bytes, blen);
			if (close_) {
				uint32_t s2;
				/* the data's answer is not waited for: the close follows it in order */
				chan_send(r, o->ch, SBX_F_PSTDIN, o->stream, p, 4 + blen);
				s2 = o->ch->next_stream++;
				if (!o->ch->next_stream)
					o->ch->next_stream = 1;
				o->stream = s2;
				chan_send(r, o->ch, SBX_F_PSTDIN, o->stream, p, 4);
			} else {
				chan_send(r, o->ch, SBX_F_PSTDIN, o->stream, p, 4 + blen);
			}
		} else {
			chan_send(r, o->ch, SBX_F_PSTDIN, o->stream, p, 4);
		}
		break;
	}
	case RK_PRESIZE: {
		uint8_t p[8];
		long n = sbx_presize_encode((uint32_t)pid, (uint16_t)cols, (uint16_t)rows, p);
		chan_send(r, o->ch, SBX_F_PRESIZE, o->stream, p, (size_t)n);
		break;
	}
	default: {
		uint8_t p[8];
		long n = sbx_psignal_encode((uint32_t)pid, (uint32_t)sig, p);
		chan_send(r, o->ch, SBX_F_PSIGNAL, o->stream, p, (size_t)n);
		break;
	}
	}
	if (!o->ch->doomed)
		op_expect(r, o);
}

/* credit, stdin, signal, file.data, file.end, file.abort: to a running op. */
void on_followup(struct relay *r, const sbx_mq_msg *m, enum sbx_msg_kind kind)
{
	cleanup_json json_t *b = NULL;
	json_error_t jerr;
	const char *sid = NULL, *plc = NULL, *op_id = m->correlation_id;
	struct rop *o = op_find(r, op_id);
	json_t *pv;

	if (kind == SBX_MSG_FILE_DATA) {
		if (!o || o->kind != RK_WRITE)
			return; /* after the op ended: nothing to do */
		if (m->len == 0)
			return;
		o->got += (int64_t)m->len;
		if (o->size >= 0 && o->got > o->size) {
			op_error(r, o, "too_large", "more data than the declared size (%" PRId64 ")", o->size);
			return;
		}
		if (buf_add(&o->pend, m->body, m->len, PEND_MAX) < 0) {
			op_error(r, o, "internal", "file data past the window (no file.credit waited for)");
			return;
		}
		op_pump(r, o);
		return;
	}
	b = json_loadb(m->body, m->len, JSON_REJECT_DUPLICATES, &jerr);
	if (!b || !json_is_object(b)) {
		log_warnx("rejecting a malformed %s message", m->type);
		return;
	}
	if (!o)
		return;
	/* an op is reached only through the placement it runs on */
	if (!(pv = json_object_get(b, "placement_id")) || !json_is_string(pv) ||
	    strcmp(json_string_value(pv), o->ch->id)) {
		log_warnx("op %s: a %s naming another placement; ignored", o->op_id, m->type);
		return;
	}
	switch (kind) {
	case SBX_MSG_CREDIT: {
		json_int_t bytes = 0;
		if (json_unpack_ex(b, &jerr, JSON_STRICT, "{s:s, s:s, s:s, s:I}", "sandbox_id", &sid, "placement_id", &plc, "op_id", &op_id, "bytes",
				   &bytes) < 0 ||
		    bytes < 1 || bytes > UINT32_MAX) {
			log_warnx("op %s: malformed credit", o->op_id);
			return;
		}
		if (o->kind != RK_EXEC && o->kind != RK_ATTACH && o->kind != RK_READ)
			return;
		o->credit_in += (uint64_t)bytes;
		chan_send_u32(r, o->ch, SBX_F_CREDIT, o->stream, (uint32_t)bytes);
		break;
	}
	case SBX_MSG_STDIN: {
		const char *data = NULL;
		int close_ = 0;
		cleanup_free uint8_t *bytes = NULL;
		size_t blen = 0;
		if (json_unpack_ex(b, &jerr, JSON_STRICT, "{s:s, s:s, s:s, s?s, s?b}", "sandbox_id", &sid, "placement_id", &plc, "op_id", &op_id,
				   "data_b64", &data, "close", &close_) < 0 ||
		    (data && b64_decode(data, &bytes, &blen) < 0)) {
			log_warnx("op %s: malformed stdin", o->op_id);
			return;
		}
		if (o->kind != RK_EXEC || o->closed || o->want_close)
			return; /* stdin closed already: dropped, like sbx-init does */
		if (blen && buf_add(&o->pend, bytes, blen, PEND_MAX) < 0) {
			op_error(r, o, "too_large", "stdin past the node's buffer (%d bytes)", PEND_MAX);
			return;
		}
		if (close_)
			o->want_close = true;
		op_pump(r, o);
		break;
	}
	case SBX_MSG_SIGNAL: {
		json_t *sv = NULL;
		int sig;
		if (json_unpack_ex(b, &jerr, JSON_STRICT, "{s:s, s:s, s:s, s:o}", "sandbox_id", &sid, "placement_id", &plc, "op_id", &op_id,
				   "signal", &sv) < 0 ||
		    (sig = sig_of(sv)) < 0) {
			log_warnx("op %s: malformed signal", o->op_id);
			return;
		}
		if (o->kind == RK_EXEC && o->live && !o->background) {
			chan_send_u32(r, o->ch, SBX_F_SIGNAL, o->stream, (uint32_t)sig);
		} else if (o->kind == RK_ATTACH || o->kind == RK_READ) {
			/* the reader went away: stop relaying (the process runs on) */
			op_pub_json(r, o, SBX_MSG_DONE, json_pack("{s:b}", "detached", 1));
			op_free(r, o);
		}
		break;
	}
	case SBX_MSG_FILE_END:
		if (json_unpack_ex(b, &jerr, JSON_STRICT, "{s:s, s:s, s:s}", "sandbox_id", &sid, "placement_id", &plc, "op_id", &op_id) < 0 ||
		    o->kind != RK_WRITE)
			return;
		if (o->size >= 0 && o->got != o->size) {
			op_error(r, o, "invalid", "%" PRId64 " bytes received, %" PRId64 " declared", o->got, o->size);
			return;
		}
		o->want_close = true;
		op_pump(r, o);
		break;
	case SBX_MSG_FILE_ABORT:
		if (json_unpack_ex(b, &jerr, JSON_STRICT, "{s:s, s:s, s:s}", "sandbox_id", &sid, "placement_id", &plc, "op_id", &op_id) < 0) {
			log_warnx("op %s: malformed file.abort", o->op_id);
			return;
		}
		if (o->kind != RK_WRITE)
			return;
		/* op_free's SIGNAL ends the stream inside: sbx-init removes the temp file */
		op_error(r, o, "invalid", "the upload was aborted");
		break;
	default:
		break;
	}
}

