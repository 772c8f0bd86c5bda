/* Private to the relay: what its AMQP side (relay.c: requests, ops,
 * publishing) and its sbx-init side (chan.c: channels, frames) share. */
#ifndef SBX_WORKER_RELAY_INT_H
#define SBX_WORKER_RELAY_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include <jansson.h>
#include "clock.h"
#include "frame.h"
#include "id.h"
#include "relay.h"

#define MAX_CHANS 4096
#define CHAN_CONNECT_MS 2000 /* sbx-init's HELLO and AUTH_OK are due within this */
#define WAIT_CHECK_MS 10     /* chan_wait_tick: how often a waiting channel's sentry and socket are looked at */
#define ACC_MAX (8 * 1024 * 1024) /* a list/procs answer */

enum rk { RK_EXEC, RK_ATTACH, RK_WRITE, RK_READ, RK_LIST, RK_DELETE, RK_MKDIR, RK_PROCS, RK_PSTDIN, RK_PSIGNAL, RK_PRESIZE };

enum doom { DOOM_NONE, DOOM_LOST, DOOM_BAD, DOOM_WEDGED };

struct chan {
	char id[SBX_ID_LEN + 1]; /* the placement; "": free slot */
	int fd;                  /* -1: not connected */
	uint32_t next_stream;
	uint8_t *in;
	size_t in_len, in_cap; /* in_cap: IN_MIN or IN_CAP (chan.c) */
	uint8_t *out;
	size_t out_off, out_len, out_cap;
	bool want_out;
	enum doom doomed;
	char doom_why[200];
	int nops;
	struct rop *ops;      /* its ops (rop.cnext): what a read serves, without walking every op */
	long long last_touch; /* mono ms of the last last_activity_at update; 0 never */
	long long ping_at;    /* the liveness PING (stream 0) unanswered since (mono ms); 0 none */
	long long busy_at;    /* an op of it began or ended last (mono ms); 0 never */
	long long status_at;  /* the STATUS (idle.c's question) unanswered since (mono ms); 0 none */
	/* the handshake, while it runs in the loop (chan_open): fd is in the
	 * epoll, frames wait in out until it is done */
	struct sbx_chan_hs *hs;
	long long hs_at; /* mono ms it began */
	/* Waits the loop's ticks resolve (chan_wait_tick), never the loop
	 * itself; mono ms since when, 0: none.
	 * lost_at: the connection was lost with ops on it, the sentry still
	 * seen alive (chan_settle): did the sandbox die, or only the
	 * connection? dial_at: an op began while sbx-init's socket could not
	 * be dialled (still binding it): its frames wait in out. */
	long long lost_at, dial_at, wait_check_at;
	char lost_why[200], dial_why[200];
};

struct buf {
	uint8_t *p;
	size_t off, len;
};

struct rop {
	struct rop *next, *prev;   /* all ops of the relay */
	struct rop *cnext, *cprev; /* the ops of its channel (chan.ops) */
	struct chan *ch;
	enum rk kind;
	uint32_t stream;
	bool live;      /* the stream exists inside (no EXIT/ERROR yet) */
	bool lost;      /* its connection was lost; ends with the channel's verdict */
	long long await_at; /* waits for an answer from sbx-init since (mono ms); 0 not */
	/* late (past answer_ms) in a busy sandbox (relay_tick): since when, the
	 * cgroup CPU time last seen, when to look again */
	long long late_at, late_cpu, late_check_at;
	char op_id[SBX_ID_LEN + 1], reply_to[256], req_id[72];
	char sandbox[SBX_ID_LEN + 1];
	/* bytes for sbx-init's STDIN frames (exec stdin, file data) */
	struct buf pend;
	size_t unacked;
	bool want_close, closed;
	/* output credit we granted (initial + the API's credit messages) */
	uint64_t credit_in, out_total;
	/* exec */
	bool background, started, stdin_open;
	uint32_t pid;
	long long t0_mono, t0_wall_ms;
	long oom0;
	uint64_t out_b, err_b;
	char *cmd;
	/* file.write: declared size (-1: not given), bytes received */
	int64_t size, got;
	/* file.read */
	bool stat_seen;
	uint64_t read_total;
	/* list / procs */
	json_t *acc;
	size_t acc_bytes;
	bool truncated;
	/* output (stdout, stderr, file data) of one kind waiting to be
	 * published as one message: what one read of the channel brought */
	uint8_t *outq;
	size_t outq_len;
	enum sbx_msg_kind outq_kind;
};

struct relay {
	const struct sandbox_node_cfg *sc;
	int ep;
	sbx_outbox *ob; /* the node agent's: publishing off the loop */
	sbx_db *db;
	struct relay_hooks h;
	struct rop *ops;
	int nops;
	struct chan *chans;
	int answer_ms; /* sbx-init answers an op within this, or the op fails */
	int nopening;  /* channels whose handshake runs (chan.hs) */
	int nwait;     /* channels with a wait (chan.lost_at, chan.dial_at) */
	struct execlog *xlog; /* exec records off the loop (execlog.h); NULL: written at once */
};


/* ---- relay.c: an op's events and its end ---- */

void op_pub(struct relay *r, struct rop *o, enum sbx_msg_kind kind, const void *b, size_t n);
/* Publishes the output op_pub holds back (the end of a channel read). */
void op_flush(struct relay *r, struct rop *o);
void op_pub_json(struct relay *r, struct rop *o, enum sbx_msg_kind kind, json_t *body);
/* One finished exec, for usage and audit (sql/004_execs.sql). */
void record_exec(struct relay *r, struct rop *o, const struct sbx_exit_info *x, const char *error);
/* Unlinks and frees; the op's events are done. A foreground process still
 * running inside is killed: nobody will read it. For a transfer (attach,
 * file read/write) the same SIGNAL asks sbx-init to drop the stream (it
 * ignores it today: the stream then ends on its own, idle without credit). */
void op_free(struct relay *r, struct rop *o);
void op_error(struct relay *r, struct rop *o, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* ---- chan.c: the channels to sbx-init ---- */

struct chan *chan_find(struct relay *r, const char *id);
struct chan *chan_get(struct relay *r, const char *id);
/* Opens the channel without waiting for sbx-init: the connect (a local
 * socket) now, the handshake in the loop (chan_hs_event), the frames sent
 * meanwhile queued. -1 when the socket cannot be dialled (sbx-init still
 * binding it: see chan_dial_later). A handshake that fails, or takes over
 * answer_ms, ends the channel's ops (sandbox_unresponsive, or sandbox_dead
 * when its sentry is gone). */
int chan_open(struct relay *r, struct chan *c, sbx_err *err);
/* The socket of a channel whose handshake runs is readable. */
void chan_hs_event(struct relay *r, struct chan *c);
/* Ends handshakes past their answer_ms; the ms until the next one is due, or -1. */
long long chan_hs_tick(struct relay *r, long long now);
/* An op begins on a channel whose socket cannot be dialled yet (sbx-init
 * alive, still binding it): its frames are queued, and the dial is retried
 * in the loop's ticks (chan_wait_tick) for up to CHAN_CONNECT_MS. */
void chan_dial_later(struct relay *r, struct chan *c, const char *why);
/* The channels' waits, looked at every WAIT_CHECK_MS; the ms until the
 * next look, or -1:
 *  - a sentry seen dead ends every op of the channel with sandbox_dead;
 *  - sbx-init dialled (a new connection, its handshake in the loop) ends a
 *    lost connection's ops with the loss's reason (internal), and lets a
 *    waiting dial's frames go once the handshake is done;
 *  - CHAN_CONNECT_MS without either ends the lost ops the same way and a
 *    waiting dial's ops with sandbox_unresponsive. */
long long chan_wait_tick(struct relay *r, long long now);
void chan_close(struct relay *r, struct chan *c);
/* The sentry is gone: every op of the channel ends with sandbox_dead, the
 * channel and its slot go, h.dead reports the sandbox (WHY: its reason;
 * empty: "the sandbox stopped"). */
void chan_dead(struct relay *r, struct chan *c, const char *why);
/* Queues one frame and tries to write it at once. -1: the channel is doomed. */
int chan_send(struct relay *r, struct chan *c, uint8_t type, uint32_t stream, const void *p, size_t n);
int chan_send_u32(struct relay *r, struct chan *c, uint8_t type, uint32_t stream, uint32_t v);
void chan_flush(struct relay *r, struct chan *c);
void chan_read(struct relay *r, struct chan *c);
/* Frames pending stdin/file data while the window and the channel allow. */
void op_pump(struct relay *r, struct rop *o);
void chan_pump(struct relay *r, struct chan *c);
/* Ends every op of the channel, closes it; when its sentry is dead the
 * sandbox is reported and the slot freed, else it reconnects on next use. */
void chan_settle(struct relay *r, struct chan *c);
void chan_settle_all(struct relay *r);

/* relay.c, for relay_req.c */
struct rop *op_find(struct relay *r, const char *op_id);
/* An event to a request's reply_to (before or without an op); body stolen. */
void reply_json(struct relay *r, const sbx_mq_msg *m, const char *corr, enum sbx_msg_kind kind, json_t *body);
/* An error event to a request's reply_to (before or without an op). */
void reply_error(struct relay *r, const sbx_mq_msg *m, const char *corr, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

/* relay_req.c: the first request of each op kind, and follow-ups */
/* sid: the sandbox (records, logs); plc: its placement (what it is on this node) */
void on_exec(struct relay *r, const sbx_mq_msg *m, json_t *b, const char *sid, const char *plc, const char *op_id);
void on_file(struct relay *r, const sbx_mq_msg *m, json_t *b, const char *sid, const char *plc, const char *op_id,
	     enum rk kind);
void on_proc(struct relay *r, const sbx_mq_msg *m, json_t *b, const char *sid, const char *plc, const char *op_id,
	     enum rk kind);
void on_followup(struct relay *r, const sbx_mq_msg *m, enum sbx_msg_kind kind);

#endif
