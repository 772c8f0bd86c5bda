/* The relay's channels to sbx-init (hop 2 of doc/internal-protocol.md,
 * doc/node-relay.md): one per sandbox, a non-blocking socket in the node
 * agent's epoll loop; frames are queued and written as the socket takes
 * them, and what comes back becomes the op's events (published by relay.c).
 * Stdin and file data go out only within the STDIN_ACK window sbx-init
 * gives. Frames from inside are hostile: a malformed one, or output past
 * the credit we granted, closes the channel. */
#include "config.h"
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <jansson.h>
#include "chanauth.h"
#include "errcode.h"
#include "frame.h"
#include "log.h"
#include "relay_int.h"

#define IN_CAP (SBX_FRAME_HDR + SBX_FRAME_MAX_PAYLOAD)
/* A channel reads into IN_MIN bytes until a frame needs more, then into
 * IN_CAP of their own mapping, given back once the channel has no op; its
 * out buffer starts at OUT_MIN and goes when empty and idle: an idle
 * sandbox's channel holds IN_MIN. 256 KiB in and 64 KiB out for each of a
 * thousand channels made the agent's heap ~130 MB, and every op's fork
 * copied what of it was touched (in_grow, chan_trim). */
#define IN_MIN 4096
#define OUT_MIN 4096
/* Past OUT_SOFT unsent bytes on a channel, no more stdin/file data is framed
 * (control frames still are); past OUT_HARD sbx-init is not reading at all:
 * the channel is dropped rather than grown. */
#define OUT_SOFT (1024 * 1024)
#define OUT_HARD (8 * 1024 * 1024)
/* sbx-init may overshoot our count of its credit by this much (it decides
 * per read()); more is a broken or hostile sbx-init. */
#define CREDIT_SLACK (1024 * 1024)

#define READ_ROUNDS 8 /* reads per wake-up per channel: fairness */

/* ---- channels ---- */

static void in_free(struct chan *c)
{
	if (c->in_cap == IN_CAP)
		munmap(c->in, IN_CAP);
	else
		free(c->in);
	c->in = NULL;
	c->in_cap = 0;
}

static void out_free(struct chan *c)
{
	free(c->out);
	c->out = NULL;
	c->out_off = c->out_len = c->out_cap = 0;
}

/* A full buffer that is not IN_CAP yet: a frame longer than it is coming. */
static int in_grow(struct chan *c)
{
	uint8_t *p;

	if (c->in_cap >= IN_CAP)
		return 0;
	p = mmap(NULL, IN_CAP, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return -1;
	memcpy(p, c->in, c->in_len);
	free(c->in);
	c->in = p;
	c->in_cap = IN_CAP;
	return 0;
}

/* Once no op runs: in back to IN_MIN when nothing is buffered (a stream's
 * frames keep it at IN_CAP while they come), out freed when all of it is
 * sent (the handshake's frames wait there). */
static void chan_trim(struct chan *c)
{
	uint8_t *p;

	if (c->nops)
		return;
	if (c->in && c->in_cap == IN_CAP && !c->in_len && (p = malloc(IN_MIN))) {
		munmap(c->in, IN_CAP);
		c->in = p;
		c->in_cap = IN_MIN;
	}
	if (c->out && !c->hs && c->out_off == c->out_len)
		out_free(c);
}

struct chan *chan_find(struct relay *r, const char *id)
{
	for (int i = 0; i < MAX_CHANS; i++)
		if (r->chans[i].id[0] && !strcmp(r->chans[i].id, id))
			return &r->chans[i];
	return NULL;
}

struct chan *chan_get(struct relay *r, const char *id)
{
	struct chan *c = chan_find(r, id);

	if (c)
		return c;
	for (int i = 0; i < MAX_CHANS; i++)
		if (!r->chans[i].id[0]) {
			c = &r->chans[i];
			memset(c, 0, sizeof(*c));
			c->fd = -1;
			snprintf(c->id, sizeof(c->id), "%s", id);
			return c;
		}
	return NULL;
}

/* A channel was doomed since chan_settle_all last looked: without one, it
 * need not walk the 4096 slots (it runs after every event of the loop). */
static bool maybe_doomed;

static void chan_doom(struct chan *c, enum doom d, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void chan_doom(struct chan *c, enum doom d, const char *fmt, ...)
{
	va_list ap;

	if (c->doomed)
		return;
	c->doomed = d;
	maybe_doomed = true;
	va_start(ap, fmt);
	vsnprintf(c->doom_why, sizeof(c->doom_why), fmt, ap);
	va_end(ap);
}

static void chan_interest(struct relay *r, struct chan *c)
{
	bool want = c->out_len > c->out_off;
	struct epoll_event ev = { .events = EPOLLIN | (want ? EPOLLOUT : 0), .data.ptr = c };

	if (c->fd < 0 || want == c->want_out)
		return;
	c->want_out = want;
	epoll_ctl(r->ep, EPOLL_CTL_MOD, c->fd, &ev);
}

static void chan_wait_clear(struct relay *r, struct chan *c)
{
	if (c->lost_at || c->dial_at)
		r->nwait--;
	c->lost_at = c->dial_at = 0;
}

static void chan_wait_set(struct relay *r, struct chan *c, long long *at)
{
	if (!c->lost_at && !c->dial_at)
		r->nwait++;
	*at = c->wait_check_at = sbx_now_ms();
}

void chan_close(struct relay *r, struct chan *c)
{
	/* what ends the channel ends its waits: the caller ends its ops */
	chan_wait_clear(r, c);
	if (c->fd >= 0) {
		epoll_ctl(r->ep, EPOLL_CTL_DEL, c->fd, NULL);
		close(c->fd);
	}
	c->fd = -1;
	if (c->hs) {
		sbx_chan_hs_clear(c->hs);
		free(c->hs);
		c->hs = NULL;
		r->nopening--;
	}
	in_free(c);
	out_free(c);
	c->in_len = 0;
	c->want_out = false;
	c->ping_at = 0;
	c->status_at = 0;
}

/* A connected socket becomes the channel's: non-blocking, in the epoll. */
static int chan_attach(struct relay *r, struct chan *c, int fd, sbx_err *err)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };
	int fl = fcntl(fd, F_GETFL);

	c->in = malloc(IN_MIN);
	c->in_cap = c->in ? IN_MIN : 0;
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 || !c->in ||
	    epoll_ctl(r->ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
		close(fd);
		in_free(c);
		return sbx_err_sys(err, "internal", "channel setup");
	}
	c->fd = fd;
	c->want_out = false;
	c->doomed = DOOM_NONE;
	c->doom_why[0] = 0;
	if (!c->next_stream)
		c->next_stream = 1;
	return 0;
}

int chan_open(struct relay *r, struct chan *c, sbx_err *err)
{
	uint8_t key[SBX_CHAN_KEY_LEN];
	struct sbx_chan_hs *hs;
	int fd = -1;

	if (sandbox_dial(r->sc, c->id, &fd, key, err) < 0)
		return -1;
	hs = malloc(sizeof(*hs));
	if (!hs) {
		close(fd);
		explicit_bzero(key, sizeof(key));
		return sbx_err_set(err, 500, "internal", "out of memory");
	}
	sbx_chan_hs_init(hs, key, c->id);
	explicit_bzero(key, sizeof(key));
	if (chan_attach(r, c, fd, err) < 0) {
		sbx_chan_hs_clear(hs);
		free(hs);
		return -1;
	}
	c->hs = hs;
	c->hs_at = sbx_now_ms();
	r->nopening++;
	return 0;
}

/* Which of a channel's ops chan_end_ops ends: those started on a lost
 * connection, the others, or all of them. */
enum chan_ops { OPS_OTHERS = 0, OPS_LOST = 1, OPS_ALL = -1 };

/* Ends WHICH ops of the channel with CODE, their message PREFIX then WHY. */
static void chan_end_ops(struct relay *r, struct chan *c, enum chan_ops which, const char *code, const char *prefix,
			 const char *why)
{
	for (struct rop *o = c->ops, *nx; o; o = nx) {
		nx = o->cnext;
		if (which != OPS_ALL && o->lost != (which == OPS_LOST))
			continue;
		o->live = false;
		op_error(r, o, code, "%s%s", prefix, why);
	}
}

/* The sandbox is dead (its sentry is gone): every op of the channel ends
 * with sandbox_dead, the channel and its slot go, and the node is told
 * (h.dead: the record becomes failed with WHY). The one place that does. */
void chan_dead(struct relay *r, struct chan *c, const char *why)
{
	char id[SBX_ID_LEN + 1], w[256];

	/* WHY may be the channel's own text, which what follows clears */
	snprintf(w, sizeof(w), "%s", why && why[0] ? why : "the sandbox stopped");
	snprintf(id, sizeof(id), "%s", c->id);
	chan_close(r, c);
	chan_end_ops(r, c, OPS_ALL, "sandbox_dead", "the sandbox died: ", w);
	c->doomed = DOOM_NONE;
	c->id[0] = 0;
	if (r->h.dead)
		r->h.dead(r->h.ctx, id, w);
}

/* The handshake failed or timed out: its ops end as a failed connect's
 * request did (relay_req.c op_begin). */
static void chan_open_failed(struct relay *r, struct chan *c, const char *msg)
{
	char w[256] = "";
	int alive = sandbox_alive(r->sc, c->id, w, sizeof(w));

	log_warnx("sandbox %s: channel to sbx-init: %s", c->id, msg);
	if (alive == 0) {
		chan_dead(r, c, w);
		return;
	}
	chan_close(r, c);
	chan_end_ops(r, c, OPS_ALL, "sandbox_unresponsive", "sbx-init did not answer: ", msg);
}

void chan_hs_event(struct relay *r, struct chan *c)
{
	sbx_err err = SBX_ERR_INIT;
	int rc = sbx_chan_hs_step(c->hs, c->fd, &err);

	if (rc == 0)
		return;
	if (rc < 0) {
		chan_open_failed(r, c, err.msg);
		return;
	}
	sbx_chan_hs_clear(c->hs);
	free(c->hs);
	c->hs = NULL;
	r->nopening--;
	log_info("sandbox %s: channel to sbx-init open (%lld ms, in the loop)", c->id, sbx_now_ms() - c->hs_at);
	chan_flush(r, c);
	chan_pump(r, c);
}

long long chan_hs_tick(struct relay *r, long long now)
{
	long long next = -1;

	for (int i = 0; i < MAX_CHANS && r->nopening > 0; i++) {
		struct chan *c = &r->chans[i];
		long long left;
		if (!c->id[0] || !c->hs)
			continue;
		left = c->hs_at + r->answer_ms - now;
		if (left <= 0) {
			char msg[100];
			snprintf(msg, sizeof(msg), "channel handshake: no answer within %d ms", r->answer_ms);
			chan_open_failed(r, c, msg);
		} else if (next < 0 || left < next) {
			next = left;
		}
	}
	return next;
}

void chan_flush(struct relay *r, struct chan *c)
{
	if (c->hs)
		return; /* what is queued goes once the handshake is done */
	while (c->fd >= 0 && !c->doomed && c->out_len > c->out_off) {
		ssize_t w = write(c->fd, c->out + c->out_off, c->out_len - c->out_off);
		if (w > 0) {
			c->out_off += (size_t)w;
			continue;
		}
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		chan_doom(c, DOOM_LOST, "the channel to sbx-init failed: %s", w < 0 ? strerror(errno) : "closed");
		return;
	}
	if (c->out_off == c->out_len)
		c->out_off = c->out_len = 0;
	chan_interest(r, c);
}

static size_t chan_queued(const struct chan *c)
{
	return c->out_len - c->out_off;
}

int chan_send(struct relay *r, struct chan *c, uint8_t type, uint32_t stream, const void *p, size_t n)
{
	size_t need;

	/* queued while a dial waits (chan_dial_later) */
	if ((c->fd < 0 && !c->dial_at) || c->doomed)
		return -1;
	if (chan_queued(c) + SBX_FRAME_HDR + n > OUT_HARD) {
		chan_doom(c, DOOM_WEDGED, "sbx-init does not read its channel (%zu bytes waiting)", chan_queued(c));
		return -1;
	}
	if (c->out_off && c->out_off == c->out_len)
		c->out_off = c->out_len = 0;
	need = c->out_len + SBX_FRAME_HDR + n;
	if (need > c->out_cap && c->out_off) {
		memmove(c->out, c->out + c->out_off, c->out_len - c->out_off);
		c->out_len -= c->out_off;
		c->out_off = 0;
		need = c->out_len + SBX_FRAME_HDR + n;
	}
	if (need > c->out_cap) {
		size_t cap = c->out_cap ? c->out_cap : OUT_MIN;
		uint8_t *np;
		while (cap < need)
			cap *= 2;
		np = realloc(c->out, cap);
		if (!np) {
			chan_doom(c, DOOM_WEDGED, "out of memory");
			return -1;
		}
		c->out = np;
		c->out_cap = cap;
	}
	sbx_frame_header(c->out + c->out_len, type, stream, (uint32_t)n);
	if (n)
		memcpy(c->out + c->out_len + SBX_FRAME_HDR, p, n);
	c->out_len += SBX_FRAME_HDR + n;
	chan_flush(r, c);
	return c->doomed ? -1 : 0;
}

int chan_send_u32(struct relay *r, struct chan *c, uint8_t type, uint32_t stream, uint32_t v)
{
	uint8_t b[4];

	sbx_put32(b, v);
	return chan_send(r, c, type, stream, b, 4);
}

/* The connection is gone and its ops are gone inside: they wait for the
 * verdict (chan_wait_tick), not live, never pumped onto a new connection. */
static void chan_lost(struct relay *r, struct chan *c, const char *why)
{
	for (struct rop *o = c->ops; o; o = o->cnext) {
		o->live = false;
		o->lost = true;
		o->await_at = 0;
	}
	snprintf(c->lost_why, sizeof(c->lost_why), "%s", why);
	c->doomed = DOOM_NONE;
	chan_wait_set(r, c, &c->lost_at);
}

void chan_dial_later(struct relay *r, struct chan *c, const char *why)
{
	snprintf(c->dial_why, sizeof(c->dial_why), "%s", why);
	if (!c->dial_at) {
		log_info("sandbox %s: sbx-init's socket cannot be dialled yet (%s): the op waits, dialled again from "
			 "the loop's ticks",
			 c->id, why);
		chan_wait_set(r, c, &c->dial_at);
	}
}

long long chan_wait_tick(struct relay *r, long long now)
{
	long long next = -1;
	/* a test holds the waits open past CHAN_CONNECT_MS (relay-exec.t):
	 * only a sentry seen gone or sbx-init dialled ends them then */
	bool held = fault_armed(r->sc->fault_points, r->sc->state_dir, "chan-wait-hold", NULL);

	for (int i = 0; i < MAX_CHANS && r->nwait > 0; i++) {
		struct chan *c = &r->chans[i];
		char why[256];
		sbx_err err = SBX_ERR_INIT;
		long long since;
		bool lost, undialled;
		int alive;

		if (!c->id[0] || (!c->lost_at && !c->dial_at))
			continue;
		if (now < c->wait_check_at) {
			if (next < 0 || c->wait_check_at - now < next)
				next = c->wait_check_at - now;
			continue;
		}
		since = c->lost_at && (!c->dial_at || c->lost_at < c->dial_at) ? c->lost_at : c->dial_at;
		alive = sandbox_alive(r->sc, c->id, why, sizeof(why));
		if (alive == 0) {
			log_info("sandbox %s: its sentry is gone (seen in the loop, %lld ms after the channel's %s)", c->id,
				 now - since, c->lost_at ? "loss" : "first dial");
			chan_dead(r, c, why);
			continue;
		}
		if (alive == 1 && c->fd < 0 && chan_open(r, c, &err) < 0 && (held || now - since < CHAN_CONNECT_MS)) {
			c->wait_check_at = now + WAIT_CHECK_MS;
			if (next < 0 || WAIT_CHECK_MS < next)
				next = WAIT_CHECK_MS;
			continue;
		}
		/* dialled (or the wait is over): the lost connection's ops end;
		 * a waiting dial's frames go once the handshake is done */
		lost = c->lost_at != 0;
		undialled = c->dial_at && c->fd < 0;
		chan_wait_clear(r, c);
		if (lost)
			chan_end_ops(r, c, OPS_LOST, "internal", "", c->lost_why);
		if (undialled) {
			log_warnx("sandbox %s: sbx-init's socket: %s", c->id, err.msg[0] ? err.msg : c->dial_why);
			chan_end_ops(r, c, OPS_OTHERS, "sandbox_unresponsive", "sbx-init did not answer: ",
				     err.msg[0] ? err.msg : c->dial_why);
		}
	}
	return next;
}

void chan_settle(struct relay *r, struct chan *c)
{
	char why[256] = "", doom_why[sizeof(c->doom_why)];
	enum doom d = c->doomed;

	if (!d)
		return;
	snprintf(doom_why, sizeof(doom_why), "%s", c->doom_why);
	log_warnx("sandbox %s: channel closed: %s", c->id, doom_why);
	chan_close(r, c);
	if (d == DOOM_LOST) {
		int alive = sandbox_alive(r->sc, c->id, why, sizeof(why));
		if (alive == 1 && c->nops) {
			/* EOF can come before the sentry is seen dead: the verdict
			 * waits for whichever comes first, sbx-init answering again
			 * or the sentry gone (bounded), in the loop's ticks
			 * (chan_wait_tick); with a thousand sandboxes on the node the
			 * loop must not wait here for one of them */
			chan_lost(r, c, doom_why);
			return;
		}
		if (alive == 0) {
			chan_dead(r, c, why);
			return;
		}
	}
	/* everything started on the old connection is gone inside */
	chan_end_ops(r, c, OPS_ALL, "internal", "", doom_why);
	c->doomed = DOOM_NONE;
}

void chan_settle_all(struct relay *r)
{
	if (!maybe_doomed)
		return;
	maybe_doomed = false; /* one doomed while we settle sets it again */
	for (int i = 0; i < MAX_CHANS; i++)
		if (r->chans[i].id[0] && r->chans[i].doomed)
			chan_settle(r, &r->chans[i]);
}

/* ---- stdin and file data, within the STDIN_ACK window ---- */

void op_pump(struct relay *r, struct rop *o)
{
	struct chan *c = o->ch;

	while (o->live && !o->closed && o->pend.len > o->pend.off && o->unacked < SBX_STDIN_WINDOW &&
	       chan_queued(c) < OUT_SOFT) {
		size_t n = o->pend.len - o->pend.off;
		if (n > SBX_STDIN_WINDOW - o->unacked)
			n = SBX_STDIN_WINDOW - o->unacked;
		if (n > SBX_FRAME_MAX_PAYLOAD)
			n = SBX_FRAME_MAX_PAYLOAD;
		if (chan_send(r, c, SBX_F_STDIN, o->stream, o->pend.p + o->pend.off, n) < 0)
			return;
		o->pend.off += n;
		o->unacked += n;
		/* a file takes its data at once (a process may rightly not read) */
		if (o->kind == RK_WRITE && !o->await_at)
			o->await_at = sbx_now_ms();
	}
	if (o->pend.off == o->pend.len) {
		free(o->pend.p);
		memset(&o->pend, 0, sizeof(o->pend));
		if (o->live && o->want_close && !o->closed && chan_send(r, c, SBX_F_STDIN, o->stream, NULL, 0) == 0) {
			o->closed = true;
			if (o->kind == RK_WRITE && !o->await_at)
				o->await_at = sbx_now_ms(); /* the rename's EXIT */
		}
	}
}

void chan_pump(struct relay *r, struct chan *c)
{
	(void)r;
	for (struct rop *o = c->ops; o && !c->doomed && chan_queued(c) < OUT_SOFT; o = o->cnext)
		if ((o->pend.len > o->pend.off || (o->want_close && !o->closed)))
			op_pump(r, o);
}

/* ---- frames from sbx-init ---- */

static struct rop *op_by_stream(struct relay *r, struct chan *c, uint32_t stream)
{
	(void)r;
	for (struct rop *o = c->ops; o; o = o->cnext)
		if (o->stream == stream)
			return o;
	return NULL;
}

static bool credit_ok(struct rop *o, size_t n)
{
	o->out_total += n;
	return o->out_total <= o->credit_in + CREDIT_SLACK;
}

static void on_list_entry(struct relay *r, struct rop *o, const struct sbx_frame *f)
{
	sbx_err err = SBX_ERR_INIT;

	(void)r;
	if (o->truncated)
		return;
	if (o->acc_bytes + f->len > ACC_MAX) {
		o->truncated = true;
		return;
	}
	if (o->kind == RK_LIST) {
		struct sbx_list_entry e;
		if (sbx_list_entry_decode(f->payload, f->len, &e, &err) < 0) {
			chan_doom(o->ch, DOOM_BAD, "bad list entry from sbx-init: %s", err.msg);
			return;
		}
		json_array_append_new(o->acc, json_pack("{s:s%, s:s, s:I, s:I, s:I}", "name", e.name, e.name_len,
							"type", sbx_ftype_name(e.type), "size", (json_int_t)e.size,
							"mode", (json_int_t)e.mode, "mtime", (json_int_t)e.mtime));
	} else {
		struct sbx_proc_info pi;
		char ts[40] = "";
		time_t t;
		struct tm tm;
		json_t *j;
		if (sbx_proc_info_decode(f->payload, f->len, &pi, &err) < 0) {
			chan_doom(o->ch, DOOM_BAD, "bad process entry from sbx-init: %s", err.msg);
			return;
		}
		t = (time_t)(pi.started_ms / 1000);
		if (gmtime_r(&t, &tm))
			strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%SZ", &tm);
		j = json_pack("{s:I, s:s%, s:s, s:o, s:o, s:s, s:I, s:b, s:b}", "pid", (json_int_t)pi.pid, "cmd",
			      pi.cmd, pi.cmd_len, "state", pi.running ? "running" : "exited", "exit_code",
			      pi.running ? json_null() : json_integer(pi.exit_code), "signal",
			      pi.running || !pi.signal ? json_null() : json_integer(pi.signal), "started_at", ts,
			      "output_bytes", (json_int_t)pi.bytes, "timed_out", (pi.flags & SBX_EXIT_TIMED_OUT) != 0,
			      "truncated", (pi.flags & SBX_EXIT_TRUNCATED) != 0);
		json_array_append_new(o->acc, j);
	}
	o->acc_bytes += f->len + 64;
}

static void on_exit_frame(struct relay *r, struct rop *o, const struct sbx_frame *f)
{
	struct sbx_exit_info x;
	sbx_err err = SBX_ERR_INIT;
	json_t *done;

	if (sbx_frame_decode_exit(f, &x, &err) < 0) {
		chan_doom(o->ch, DOOM_BAD, "bad EXIT from sbx-init: %s", err.msg);
		return;
	}
	o->live = false;
	if (x.flags & SBX_EXIT_ERRNO) {
		op_error(r, o, o->kind == RK_EXEC ? "exec_failed" : sbx_errno_code(x.err), "%s", strerror(x.err));
		return;
	}
	switch (o->kind) {
	case RK_EXEC:
		if (x.flags & SBX_EXIT_DETACHED) {
			/* a background process runs on: its start is the answer */
			op_pub_json(r, o, SBX_MSG_DONE, json_pack("{s:I}", "pid", (json_int_t)o->pid));
			record_exec(r, o, NULL, NULL);
			break;
		}
		/* fall through */
	case RK_ATTACH: {
		long oom = o->kind == RK_EXEC ? sandbox_oom_kills(o->ch->id) : -1;
		json_t *j = json_pack("{s:i, s:o, s:b, s:b, s:I}", "exit_code", x.code, "signal",
				      x.signal ? json_integer(x.signal) : json_null(), "timed_out", x.timed_out != 0,
				      "oom", o->oom0 >= 0 && oom > o->oom0, "duration_ms",
				      (json_int_t)(sbx_now_ms() - o->t0_mono));
		if (o->kind == RK_ATTACH) {
			json_object_set_new(j, "running", json_boolean((x.flags & SBX_EXIT_DETACHED) != 0));
			json_object_set_new(j, "truncated", json_boolean((x.flags & SBX_EXIT_TRUNCATED) != 0));
			json_object_set_new(j, "offset", json_integer((json_int_t)(o->got + (int64_t)o->out_total)));
		}
		op_pub_json(r, o, SBX_MSG_EXIT, j);
		record_exec(r, o, &x, NULL);
		break;
	}
	case RK_READ:
		op_pub_json(r, o, SBX_MSG_DONE, json_pack("{s:I}", "size", (json_int_t)o->read_total));
		break;
	case RK_LIST:
	case RK_PROCS:
		done = json_pack("{s:O, s:b}", o->kind == RK_LIST ? "entries" : "processes", o->acc, "truncated",
				 o->truncated);
		op_pub_json(r, o, SBX_MSG_DONE, done);
		break;
	case RK_WRITE:
		op_pub_json(r, o, SBX_MSG_DONE, json_pack("{s:I}", "size", (json_int_t)o->got));
		break;
	default:
		op_pub_json(r, o, SBX_MSG_DONE, json_object());
		break;
	}
	op_free(r, o);
}

static void on_frame(struct relay *r, struct chan *c, const struct sbx_frame *f)
{
	struct rop *o;
	uint32_t v;
	sbx_err err = SBX_ERR_INIT;

	if (f->type == SBX_F_HELLO)
		return;
	if (f->type == SBX_F_PONG && f->stream == 0) {
		c->ping_at = 0; /* the liveness PING (relay_ping) */
		return;
	}
	if (f->type == SBX_F_STATUS_R) {
		/* idle.c's question (relay_ask_status); unasked, it is ignored */
		if (c->status_at) {
			c->status_at = 0;
			if (r->h.status)
				r->h.status(r->h.ctx, c->id, sbx_get32(f->payload));
		}
		return;
	}
	o = op_by_stream(r, c, f->stream);
	if (!o)
		return; /* an op we ended already (its late frames) */
	/* sbx-init has read the op and works on it */
	o->await_at = 0;
	switch (f->type) {
	case SBX_F_PONG:
		break;
	case SBX_F_STARTED:
		if (sbx_frame_decode_u32(f, &v, &err) < 0 || o->kind != RK_EXEC || o->started) {
			chan_doom(c, DOOM_BAD, "unexpected STARTED from sbx-init");
			return;
		}
		o->started = true;
		o->pid = v;
		op_pub_json(r, o, SBX_MSG_STARTED, json_pack("{s:I}", "pid", (json_int_t)v));
		break;
	case SBX_F_STAT: {
		struct sbx_file_stat st;
		if (o->kind != RK_READ || o->stat_seen || sbx_frame_decode_stat(f, &st, &err) < 0) {
			chan_doom(c, DOOM_BAD, "unexpected STAT from sbx-init");
			return;
		}
		o->stat_seen = true;
		op_pub_json(r, o, SBX_MSG_FILE_STAT, json_pack("{s:I, s:I, s:I}", "size", (json_int_t)st.size, "mode",
							(json_int_t)st.mode, "mtime", (json_int_t)st.mtime));
		break;
	}
	case SBX_F_STDOUT:
	case SBX_F_STDERR:
		if (o->kind == RK_LIST || o->kind == RK_PROCS) {
			if (f->type != SBX_F_STDOUT) {
				chan_doom(c, DOOM_BAD, "STDERR on a list stream");
				return;
			}
			on_list_entry(r, o, f);
			break;
		}
		if ((o->kind != RK_EXEC && o->kind != RK_ATTACH && o->kind != RK_READ) ||
		    (o->kind == RK_READ && f->type != SBX_F_STDOUT)) {
			chan_doom(c, DOOM_BAD, "output on a stream that has none");
			return;
		}
		if (!credit_ok(o, f->len)) {
			chan_doom(c, DOOM_BAD, "sbx-init sent output past its credit");
			return;
		}
		if (o->kind == RK_READ) {
			o->read_total += f->len;
			op_pub(r, o, SBX_MSG_FILE_DATA, f->payload, f->len);
		} else {
			if (f->type == SBX_F_STDOUT)
				o->out_b += f->len;
			else
				o->err_b += f->len;
			op_pub(r, o, f->type == SBX_F_STDOUT ? SBX_MSG_STDOUT : SBX_MSG_STDERR, f->payload, f->len);
		}
		break;
	case SBX_F_STDIN_ACK:
		if (sbx_frame_decode_u32(f, &v, &err) < 0 || v > o->unacked) {
			chan_doom(c, DOOM_BAD, "STDIN_ACK of more than was sent");
			return;
		}
		o->unacked -= v;
		if (o->kind == RK_WRITE && (o->unacked || o->closed))
			o->await_at = sbx_now_ms(); /* progress: the rest in as much time again */
		/* the API keeps at most a window unacknowledged (no stdin piles up here) */
		if (o->kind == RK_WRITE && v)
			op_pub_json(r, o, SBX_MSG_FILE_CREDIT, json_pack("{s:I}", "bytes", (json_int_t)v));
		else if (o->kind == RK_EXEC && o->stdin_open && v)
			op_pub_json(r, o, SBX_MSG_STDIN_CREDIT, json_pack("{s:I}", "bytes", (json_int_t)v));
		op_pump(r, o);
		break;
	case SBX_F_EXIT:
		on_exit_frame(r, o, f);
		break;
	case SBX_F_ERROR: {
		o->live = false;
		op_error(r, o, sbx_exec_error_code((const char *)f->payload, f->len), "%.*s", (int)f->len,
			 (const char *)f->payload);
		break;
	}
	default:
		chan_doom(c, DOOM_BAD, "frame type 0x%02x is not expected", f->type);
	}
}

static void chan_read_rounds(struct relay *r, struct chan *c);

/* What the reads brought goes out before we wait again (relay.c op_pub). */
void chan_read(struct relay *r, struct chan *c)
{
	chan_read_rounds(r, c);
	/* its own ops only: with a thousand sandboxes, walking every op
	 * after each read was the cost of a read */
	for (struct rop *o = c->ops; o; o = o->cnext)
		op_flush(r, o);
	chan_trim(c);
}

static void chan_read_rounds(struct relay *r, struct chan *c)
{
	for (int round = 0; round < READ_ROUNDS && c->fd >= 0 && !c->doomed; round++) {
		ssize_t n;
		size_t off = 0;

		if (c->in_len == c->in_cap && in_grow(c) < 0) {
			chan_doom(c, DOOM_WEDGED, "out of memory");
			return;
		}
		n = read(c->fd, c->in + c->in_len, c->in_cap - c->in_len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n <= 0) {
			chan_doom(c, DOOM_LOST, "sbx-init closed the channel%s%s", n < 0 ? ": " : "",
				  n < 0 ? strerror(errno) : "");
			return;
		}
		c->in_len += (size_t)n;
		while (!c->doomed && c->fd >= 0) {
			struct sbx_frame f;
			sbx_err err = SBX_ERR_INIT;
			long l = sbx_frame_parse(c->in + off, c->in_len - off, 1, &f, &err);
			if (l == 0)
				break;
			if (l < 0) {
				chan_doom(c, DOOM_BAD, "malformed frame from sbx-init: %s", err.msg);
				return;
			}
			on_frame(r, c, &f);
			off += (size_t)l;
		}
		if (c->in && off) {
			memmove(c->in, c->in + off, c->in_len - off);
			c->in_len -= off;
		}
	}
}
