/* The node agent's runtime relay (doc/node-relay.md), its AMQP side: the
 * API's ops arrive as AMQP messages (doc/internal-protocol.md, hop 1),
 * become frames on one channel per sandbox to its sbx-init (hop 2, chan.c),
 * and what comes back is published to the op's reply queue at once: one
 * message per frame, but output, one message per channel read (op_pub).
 *
 * Memory per op and per channel is bounded; flow control is end to end:
 * output needs credit that only the API grants (as it writes to its
 * client), stdin and file data need STDIN_ACKs that only sbx-init gives (as
 * the process or the file takes them). */
#include "config.h"
#include <inttypes.h>
#include <signal.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <jansson.h>
#include "cleanup.h"
#include "execlog.h"
#include "frame.h"
#include "id.h"
#include "json.h"
#include "log.h"
#include "relay_int.h"
#include "sandbox_state.h"
#include "stats.h"


/* ---- publishing (hop 1, node -> API) ---- */

static void publish_to(struct relay *r, const char *reply_to, const char *corr, const char *req_id,
		       enum sbx_msg_kind kind, const void *body, size_t len)
{
	sbx_err err = SBX_ERR_INIT;
	const char *type = sbx_msg_name(kind);
	struct sbx_mq_pub p = { .type = type, .correlation_id = corr, .request_id = req_id };

	if (!reply_to[0])
		return;
	if (sbx_outbox_put(r->ob, reply_to, body, len, &p, &err) < 0)
		log_warnx("op %s: %s event lost: %s", corr, type, err.msg);
}

static void publish_json_to(struct relay *r, const char *reply_to, const char *corr, const char *req_id,
			    enum sbx_msg_kind kind, json_t *body /* stolen */)
{
	cleanup_json json_t *b = body;
	cleanup_free char *s = b ? json_dumps(b, JSON_COMPACT) : NULL;

	if (!s) {
		log_warnx("op %s: cannot encode the %s event", corr, sbx_msg_name(kind));
		return;
	}
	publish_to(r, reply_to, corr, req_id, kind, s, strlen(s));
}

/* Output is published per channel read, not per frame: the frames of one
 * kind that one read brought go as one message (OUTQ_MAX at most), which
 * is what made a broker message per ~11 KiB frame the limit of streaming.
 * Order holds: any other event of the op publishes what waits first, and
 * chan_read ends with op_flush of each op it served. 256 KiB (what one
 * channel read can bring) halves the messages of 128 KiB; the API's credit
 * window (4 MiB, src/api/h_exec.c) holds many of them. */
#define OUTQ_MAX (256 * 1024)

void op_flush(struct relay *r, struct rop *o)
{
	if (!o->outq_len)
		return;
	publish_to(r, o->reply_to, o->op_id, o->req_id, o->outq_kind, o->outq, o->outq_len);
	o->outq_len = 0;
}

void op_pub(struct relay *r, struct rop *o, enum sbx_msg_kind kind, const void *b, size_t n)
{
	bool output = kind == SBX_MSG_STDOUT || kind == SBX_MSG_STDERR || kind == SBX_MSG_FILE_DATA;

	if (o->outq_len && (!output || kind != o->outq_kind || o->outq_len + n > OUTQ_MAX))
		op_flush(r, o);
	if (output && n < OUTQ_MAX && (o->outq || (o->outq = malloc(OUTQ_MAX)))) {
		memcpy(o->outq + o->outq_len, b, n);
		o->outq_len += n;
		o->outq_kind = kind;
		return;
	}
	publish_to(r, o->reply_to, o->op_id, o->req_id, kind, b, n);
}

void op_pub_json(struct relay *r, struct rop *o, enum sbx_msg_kind kind, json_t *body)
{
	op_flush(r, o);
	publish_json_to(r, o->reply_to, o->op_id, o->req_id, kind, body);
}

void reply_json(struct relay *r, const sbx_mq_msg *m, const char *corr, enum sbx_msg_kind kind, json_t *body)
{
	publish_json_to(r, m->reply_to, corr, m->request_id, kind, body);
}

void reply_error(struct relay *r, const sbx_mq_msg *m, const char *corr, const char *code, const char *fmt,
			...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	publish_json_to(r, m->reply_to, corr, m->request_id, SBX_MSG_ERROR,
			json_pack("{s:s, s:s}", "message", msg, "code", code));
}

/* ---- ops ---- */

struct rop *op_find(struct relay *r, const char *op_id)
{
	for (struct rop *o = r->ops; o; o = o->next)
		if (!strcmp(o->op_id, op_id))
			return o;
	return NULL;
}

void record_exec(struct relay *r, struct rop *o, const struct sbx_exit_info *x, const char *error)
{
	char id[SBX_ID_LEN + 1], code[16], sig[16], dur[24], ob[24], eb[24], t0[24];
	sbx_err err = SBX_ERR_INIT;

	if (o->kind != RK_EXEC)
		return;
	sbx_id_new(id);
	snprintf(code, sizeof(code), "%d", x ? x->code : 0);
	snprintf(sig, sizeof(sig), "%u", x ? x->signal : 0);
	snprintf(dur, sizeof(dur), "%lld", sbx_now_ms() - o->t0_mono);
	snprintf(ob, sizeof(ob), "%" PRIu64, o->out_b);
	snprintf(eb, sizeof(eb), "%" PRIu64, o->err_b);
	snprintf(t0, sizeof(t0), "%lld", o->t0_wall_ms);
	if (r->xlog) {
		const char *const v[EXECLOG_NPARAMS] = { id, o->sandbox, o->cmd ? o->cmd : "", x ? code : NULL,
							 x ? sig : NULL, x && x->timed_out ? "true" : "false",
							 dur, ob, eb, t0, o->req_id, o->background ? "true" : "false",
							 error };
		execlog_add(r->xlog, v);
		return;
	}
	if (sbx_db_query(r->db, NULL, &err,
			 "INSERT INTO execs (id, sandbox_id, org_id, cmd, exit_code, signal, timed_out, duration_ms, "
			 "stdout_bytes, stderr_bytes, started_at, request_id, background, error) "
			 "SELECT $1, s.id, s.org_id, $3, $4::int, $5::int, $6::boolean, $7::bigint, $8::bigint, "
			 "$9::bigint, to_timestamp($10::double precision / 1000), nullif($11, ''), $12::boolean, $13 "
			 "FROM sandboxes s WHERE s.id = $2",
			 13, id, o->sandbox, o->cmd ? o->cmd : "", x ? code : NULL, x ? sig : NULL,
			 x && x->timed_out ? "true" : "false", dur, ob, eb, t0, o->req_id,
			 o->background ? "true" : "false", error) < 0)
		log_warnx("sandbox %s: recording an exec: %s", o->sandbox, err.msg);
}

void op_free(struct relay *r, struct rop *o)
{
	bool stream_op = o->kind == RK_EXEC ? !o->background
					    : o->kind == RK_ATTACH || o->kind == RK_READ || o->kind == RK_WRITE;

	op_flush(r, o);
	if (o->live && stream_op && (o->ch->fd >= 0 || o->ch->dial_at) && !o->ch->doomed)
		chan_send_u32(r, o->ch, SBX_F_SIGNAL, o->stream, SIGKILL);
	if (o->prev)
		o->prev->next = o->next;
	else
		r->ops = o->next;
	if (o->next)
		o->next->prev = o->prev;
	if (o->cprev)
		o->cprev->cnext = o->cnext;
	else
		o->ch->ops = o->cnext;
	if (o->cnext)
		o->cnext->cprev = o->cprev;
	o->ch->nops--;
	o->ch->busy_at = sbx_now_ms();
	r->nops--;
	free(o->pend.p);
	free(o->outq);
	free(o->cmd);
	json_decref(o->acc);
	free(o);
}

void op_error(struct relay *r, struct rop *o, const char *code, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (o->kind == RK_EXEC && o->started)
		record_exec(r, o, NULL, code);
	op_pub_json(r, o, SBX_MSG_ERROR, json_pack("{s:s, s:s}", "message", msg, "code", code));
	op_free(r, o);
}

/* The op a first request starts (msg.h's runtime kinds). */
static enum rk op_kind(enum sbx_msg_kind k)
{
	switch (k) {
	case SBX_MSG_EXEC: return RK_EXEC;
	case SBX_MSG_FILE_WRITE: return RK_WRITE;
	case SBX_MSG_FILE_READ: return RK_READ;
	case SBX_MSG_FILE_LIST: return RK_LIST;
	case SBX_MSG_FILE_DELETE: return RK_DELETE;
	case SBX_MSG_FILE_MKDIR: return RK_MKDIR;
	case SBX_MSG_PROC_LIST: return RK_PROCS;
	case SBX_MSG_PROC_ATTACH: return RK_ATTACH;
	case SBX_MSG_PROC_STDIN: return RK_PSTDIN;
	case SBX_MSG_PROC_RESIZE: return RK_PRESIZE;
	default: return RK_PSIGNAL;
	}
}

bool relay_handles(enum sbx_msg_kind kind)
{
	return (sbx_msg_flags(kind) & SBX_MSGF_NODE) &&
	       (sbx_msg_flags(kind) & (SBX_MSGF_OP_START | SBX_MSGF_OP_FOLLOWUP));
}

void relay_on_message(struct relay *r, const sbx_mq_msg *m, enum sbx_msg_kind kind)
{
	cleanup_json json_t *b = NULL;
	json_error_t jerr;
	const char *sid = NULL, *plc = NULL, *op_id = NULL;
	json_t *v;

	if (!sbx_id_valid(m->correlation_id)) {
		log_warnx("rejecting a %s message without an op id", m->type);
		return;
	}
	/* follow-ups name their op; their events go to the op's reply_to */
	if (sbx_msg_flags(kind) & SBX_MSGF_OP_FOLLOWUP) {
		on_followup(r, m, kind);
		chan_settle_all(r);
		return;
	}
	if (!m->reply_to[0]) {
		log_warnx("rejecting a %s request without reply_to", m->type);
		return;
	}
	b = json_loadb(m->body, m->len, JSON_REJECT_DUPLICATES, &jerr);
	if (!b || !json_is_object(b) || !(v = json_object_get(b, "sandbox_id")) || !json_is_string(v) ||
	    !sbx_id_valid(sid = json_string_value(v)) || !(v = json_object_get(b, "placement_id")) ||
	    !json_is_string(v) || !sbx_id_valid(plc = json_string_value(v)) || !(v = json_object_get(b, "op_id")) ||
	    !json_is_string(v) || strcmp(op_id = json_string_value(v), m->correlation_id)) {
		log_warnx("rejecting a malformed %s message", m->type);
		reply_error(r, m, m->correlation_id, "internal", "malformed %s request", m->type);
		return;
	}
	if (sbx_msg_flags(kind) & SBX_MSGF_OP_START) {
		enum rk rk = op_kind(kind);
		if (rk == RK_EXEC)
			on_exec(r, m, b, sid, plc, op_id);
		else if (rk >= RK_WRITE && rk <= RK_MKDIR)
			on_file(r, m, b, sid, plc, op_id, rk);
		else
			on_proc(r, m, b, sid, plc, op_id, rk);
	}
	chan_settle_all(r);
}

bool relay_owns(const struct relay *r, const void *ptr)
{
	return r && ptr >= (const void *)r->chans && ptr < (const void *)(r->chans + MAX_CHANS);
}

void relay_on_event(struct relay *r, void *ptr, uint32_t events)
{
	struct chan *c = ptr;

	if (!c->id[0] || c->fd < 0)
		return; /* closed earlier in this batch */
	if (c->hs) {
		chan_hs_event(r, c);
		chan_settle_all(r);
		return;
	}
	if (events & EPOLLOUT) {
		chan_flush(r, c);
		chan_pump(r, c);
	}
	if (events & (EPOLLIN | EPOLLHUP | EPOLLERR))
		chan_read(r, c);
	chan_settle(r, c);
	chan_settle_all(r);
}

void relay_sandbox_gone(struct relay *r, const char *id, const char *code, const char *why)
{
	struct chan *c = chan_find(r, id);

	if (!c)
		return;
	for (struct rop *o = c->ops, *nx; o; o = nx) {
		nx = o->cnext;
		o->live = false;
		op_error(r, o, code, "%s", why);
	}
	chan_close(r, c);
	c->id[0] = 0;
}

void relay_set_answer_ms(struct relay *r, int ms)
{
	r->answer_ms = ms > 0 ? ms : 4000;
}

/* An op past its answer_ms: a sandbox at its CPU limit (16 shell loops in
 * one core, on a slow host) leaves sbx-init unscheduled for seconds, and
 * vfork there waits for the command's exec; failing the op then answers
 * 503 to an owner who only uses his sandbox. So, as the liveness pass does
 * (node_health.c), while the sandbox's cgroup CPU time grows the op waits
 * on, looked at every LATE_CHECK_MS, up to SANDBOX_BUSY_GRACE_MS from its
 * deadline; a sentry stopped from the host, or a stopped sbx-init in an
 * idle sandbox, uses no CPU and fails after one look. The ms until the
 * next look, or <= 0: the op fails now. */
#define LATE_CHECK_MS 2000 /* a liveness pass: its SIGCONT may be what lets sbx-init answer */

static long long op_late(struct relay *r, struct rop *o, long long now)
{
	long long cpu;

	if (!o->late_at) {
		o->late_at = now;
		o->late_cpu = sandbox_cpu_usec(r->sc, o->ch->id);
		o->late_check_at = now + LATE_CHECK_MS;
		return o->late_cpu < 0 ? 0 : LATE_CHECK_MS;
	}
	if (now < o->late_check_at)
		return o->late_check_at - now;
	cpu = sandbox_cpu_usec(r->sc, o->ch->id);
	if (cpu < 0 || o->late_cpu < 0 || cpu - o->late_cpu < SANDBOX_BUSY_MIN_USEC ||
	    now - o->late_at >= SANDBOX_BUSY_GRACE_MS)
		return 0;
	if (o->late_check_at == o->late_at + LATE_CHECK_MS)
		log_info("sandbox %s: op %s: sbx-init has not answered in %d ms, but the sandbox runs (%lld ms of "
			 "CPU in %d ms); waiting up to %d s",
			 o->sandbox, o->op_id, r->answer_ms, (cpu - o->late_cpu) / 1000, LATE_CHECK_MS,
			 SANDBOX_BUSY_GRACE_MS / 1000);
	o->late_cpu = cpu;
	o->late_check_at = now + LATE_CHECK_MS;
	return LATE_CHECK_MS;
}

long long relay_tick(struct relay *r)
{
	long long now = sbx_now_ms(), next = -1;

	chan_settle_all(r);
	if (r->nopening)
		next = chan_hs_tick(r, now);
	if (r->nwait) {
		long long l = chan_wait_tick(r, now);
		if (l >= 0 && (next < 0 || l < next))
			next = l;
	}
	for (struct rop *o = r->ops, *nx; o; o = nx) {
		long long left;
		nx = o->next;
		if (!o->await_at)
			continue;
		left = o->await_at + r->answer_ms - now;
		if (left > 0)
			o->late_at = 0; /* answered since, or progress: a new deadline */
		else if ((left = op_late(r, o, now)) <= 0) {
			/* stopped or hung inside; the op's SIGNAL waits in the channel for it */
			log_warnx("sandbox %s: op %s: sbx-init did not answer within %d ms", o->sandbox, o->op_id,
				  r->answer_ms);
			op_error(r, o, "sandbox_unresponsive", "sbx-init did not answer within %d ms", r->answer_ms);
			continue;
		}
		if (next < 0 || left < next)
			next = left;
	}
	return next;
}

int relay_ping(struct relay *r, const char *id)
{
	struct chan *c = chan_find(r, id);

	/* a handshake in progress has its own deadline (chan_hs_tick) */
	if (!c || c->fd < 0 || c->doomed || c->hs)
		return -1;
	/* an answer may wait unread when the loop was busy */
	chan_read(r, c);
	if (c->fd < 0 || c->doomed)
		return -1;
	if (c->ping_at)
		return 0;
	if (chan_send(r, c, SBX_F_PING, 0, NULL, 0) < 0)
		return -1;
	c->ping_at = sbx_now_ms();
	return 1;
}

long long relay_quiet_since(struct relay *r, const char *id)
{
	struct chan *c = chan_find(r, id);

	if (!c)
		return 0;
	if (c->doomed || c->nops || c->ping_at || c->status_at)
		return -1;
	return c->busy_at;
}

int relay_ask_status(struct relay *r, const char *id)
{
	struct chan *c = chan_get(r, id);
	sbx_err err = SBX_ERR_INIT;

	if (!c)
		return -1;
	/* the handshake runs in the loop (its STATUS waits for it); a socket
	 * not there, or a handshake that fails, is simply not asked now (its
	 * next op or the next pass will see) */
	if (c->fd < 0 && chan_open(r, c, &err) < 0) {
		log_warnx("sandbox %s: asking sbx-init whether it is idle: %s", id, err.msg);
		if (!c->nops) {
			chan_close(r, c); /* its buffers and a wait left without ops */
			c->id[0] = 0;     /* the slot; the next op connects again */
		}
		return -1;
	}
	if (c->status_at)
		return 0;
	if (chan_send(r, c, SBX_F_STATUS, 0, NULL, 0) < 0)
		return -1;
	c->status_at = sbx_now_ms();
	return 0;
}

void relay_set_execlog(struct relay *r, struct execlog *l)
{
	r->xlog = l;
}

int relay_ops(const struct relay *r)
{
	return r ? r->nops : 0;
}

struct relay *relay_new(const struct sandbox_node_cfg *sc, int ep, sbx_outbox *ob, sbx_db *db,
			const struct relay_hooks *hooks)
{
	struct relay *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	r->chans = calloc(MAX_CHANS, sizeof(*r->chans));
	if (!r->chans || sodium_init() < 0) {
		free(r->chans);
		free(r);
		return NULL;
	}
	for (int i = 0; i < MAX_CHANS; i++)
		r->chans[i].fd = -1;
	r->answer_ms = 4000;
	r->sc = sc;
	r->ep = ep;
	r->ob = ob;
	r->db = db;
	if (hooks)
		r->h = *hooks;
	return r;
}

void relay_free(struct relay *r)
{
	if (!r)
		return;
	while (r->ops) {
		r->ops->live = false;
		op_error(r, r->ops, "node_restarted",
			 "the sandbox's node agent is stopping; the command's stream was lost "
			 "(background processes keep running)");
	}
	for (int i = 0; i < MAX_CHANS; i++)
		if (r->chans[i].id[0])
			chan_close(r, &r->chans[i]);
	free(r->chans);
	free(r);
}
