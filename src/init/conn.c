/* sbx-init's connections to the host: accepting them (HELLO first), reading
 * their frames and acting on each (on_frame), and sending frames back through
 * a buffer flushed as the socket takes it. The byte buffers used for output
 * and stdin are here too. */
#include "config.h"
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include "init.h"

#define MAX_CONNS 64
#define CREDIT_MAX ((uint64_t)1 << 48)

struct conn *conns;

/* ---- byte buffers ------------------------------------------------------ */

size_t buf_pending(const struct buf *b)
{
	return b->len - b->off;
}

size_t buf_room(struct buf *b)
{
	if (b->off && b->off == b->len)
		b->off = b->len = 0;
	return b->cap - b->len;
}

/* Room for n more bytes at p + len; compacts first. Returns -1 on ENOMEM. */
int buf_reserve(struct buf *b, size_t n)
{
	if (buf_room(b) >= n)
		return 0;
	if (b->off) {
		memmove(b->p, b->p + b->off, b->len - b->off);
		b->len -= b->off;
		b->off = 0;
		if (b->cap - b->len >= n)
			return 0;
	}
	size_t cap = b->cap ? b->cap : 4096;
	while (cap - b->len < n)
		cap *= 2;
	uint8_t *p = realloc(b->p, cap);
	if (!p)
		return -1;
	b->p = p;
	b->cap = cap;
	return 0;
}

void buf_free(struct buf *b)
{
	free(b->p);
	memset(b, 0, sizeof(*b));
}

/* Big buffers are returned once empty and the loop has been quiet for
 * SHRINK_IDLE_MS, so an idle sandbox costs nothing. Not each time one
 * drains: a stream would then allocate it anew for every burst, and musl's
 * malloc maps and unmaps a block that size each time (an mmap, a munmap and
 * the faults of fresh pages, each a trap into gVisor's sentry): `cat` of a
 * file streamed 128-141 MiB/s so against 178-208 with glibc's malloc. */
#define SHRINK_IDLE_MS 100

static int big_and_empty(const struct buf *b)
{
	return buf_pending(b) == 0 && b->cap > 64 * 1024;
}

int conns_shrink_wait(int wait_ms)
{
	for (struct conn *c = conns; c; c = c->next)
		if (!c->dead && big_and_empty(&c->out))
			return wait_ms >= 0 && wait_ms < SHRINK_IDLE_MS ? wait_ms : SHRINK_IDLE_MS;
	return wait_ms;
}

void conns_shrink(void)
{
	for (struct conn *c = conns; c; c = c->next)
		if (big_and_empty(&c->out))
			buf_free(&c->out);
}

/* ---- connections ------------------------------------------------------- */

void conn_kill(struct conn *c, const char *why)
{
	if (!c->dead)
		logmsg("channel %d closed: %s", c->fd, why);
	c->dead = 1;
}

void conn_flush(struct conn *c)
{
	while (!c->dead && buf_pending(&c->out)) {
		ssize_t n = send(c->fd, c->out.p + c->out.off, buf_pending(&c->out), MSG_NOSIGNAL);
		if (n > 0) {
			c->out.off += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		conn_kill(c, n < 0 ? strerror(errno) : "short write");
		return;
	}
	/* Congested, EPOLLOUT stays armed even with nothing left to send: only
	 * its handler (main.c) lifts the congestion and serves the processes
	 * again. A flush from elsewhere (a PONG, a STARTED) that sent the rest
	 * used to disarm it, and then no output was read again on this
	 * connection: every command of the sandbox hung (seen once in a
	 * 5-run repeat of runtime-exec.t's 40 MB exec). */
	int want = buf_pending(&c->out) > 0 || c->congested;
	if (want != c->want_out) {
		ep_mod(c->fd, &c->w, EPOLLIN | (want ? EPOLLOUT : 0));
		c->want_out = want;
	}
}

void conn_send(struct conn *c, uint8_t type, uint32_t stream, const void *payload, size_t len)
{
	if (c->dead)
		return;
	if (buf_reserve(&c->out, SBX_FRAME_HDR + len) < 0) {
		conn_kill(c, "out of memory");
		return;
	}
	sbx_frame_header(c->out.p + c->out.len, type, stream, (uint32_t)len);
	if (len)
		memcpy(c->out.p + c->out.len + SBX_FRAME_HDR, payload, len);
	c->out.len += SBX_FRAME_HDR + len;
	conn_flush(c);
}

void conn_send_u32(struct conn *c, uint8_t type, uint32_t stream, uint32_t v)
{
	uint8_t b[4];

	sbx_put32(b, v);
	conn_send(c, type, stream, b, 4);
}

void send_error(struct conn *c, uint32_t stream, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n >= sizeof(msg))
		n = sizeof(msg) - 1;
	/* the host checks the message is UTF-8: a path with other bytes is
	 * shown with '?' rather than making the frame invalid */
	for (int i = 0; i < n; i++)
		if ((unsigned char)msg[i] >= 0x80 || msg[i] == 0)
			msg[i] = '?';
	conn_send(c, SBX_F_ERROR, stream, msg, (size_t)n);
}

void send_exit(struct conn *c, uint32_t stream, int code, int sig, uint8_t flags)
{
	uint8_t b[9];

	sbx_exit_encode(b, code, (uint32_t)sig, flags);
	conn_send(c, SBX_F_EXIT, stream, b, sizeof(b));
}

void procs_of_conn_service(struct conn *c)
{
	for (struct proc *p = procs; p; p = p->next)
		if (p->conn == c)
			proc_service(p);
	for (struct xfer *x = xfers; x; x = x->next)
		if (x->conn == c)
			xfer_service(x);
}

static struct proc *proc_find(struct conn *c, uint32_t stream)
{
	for (struct proc *p = procs; p; p = p->next)
		if (!p->done && p->conn == c && p->stream == stream)
			return p;
	return NULL;
}

static struct xfer *xfer_find(struct conn *c, uint32_t stream)
{
	for (struct xfer *x = xfers; x; x = x->next)
		if (!x->done && x->conn == c && x->stream == stream)
			return x;
	return NULL;
}

static int stream_in_use(struct conn *c, uint32_t stream)
{
	return proc_find(c, stream) || xfer_find(c, stream);
}

void note_congestion(struct conn *c)
{
	/* the EPOLLOUT handler lifts this once the host has read */
	if (buf_pending(&c->out) >= OUT_HIGH)
		c->congested = 1;
}

/* ---- frames from the host ---------------------------------------------- */

uint8_t chan_key[SBX_CHAN_KEY_LEN];
char chan_id[SBX_CHAN_ID_MAX + 1];

/* Before anything else the host proves it holds this sandbox's key; we
 * answer with our own proof. Whatever else comes first ends the connection:
 * something inside the sandbox may connect too (the socket is in its
 * filesystem), and it gets nothing. */
static void on_auth(struct conn *c, const struct sbx_frame *f)
{
	uint8_t nonce[SBX_CHAN_NONCE_LEN], mac[SBX_CHAN_MAC_LEN];

	if (sbx_auth_decode(f, nonce, mac, NULL) < 0) {
		conn_kill(c, "a frame before AUTH");
		return;
	}
	if (!sbx_chan_mac_ok(chan_key, "node", c->nonce, chan_id, mac)) {
		conn_kill(c, "AUTH with a wrong key");
		return;
	}
	c->authed = 1;
	sbx_chan_mac(chan_key, "init", nonce, chan_id, mac);
	conn_send(c, SBX_F_AUTH_OK, 0, mac, sizeof(mac));
}

/* STATUS: the processes that run besides us. As PID 1 that is every live
 * process of the sandbox (its /proc), so a daemon a command left behind
 * counts too: the node agent freezes only a sandbox with nothing to run.
 * Outside a sandbox (tests) only our own children are known. */
static uint32_t count_procs(void)
{
	uint32_t n = 0;
	DIR *d;
	struct dirent *de;

	if (getpid() != 1) {
		for (struct proc *p = procs; p; p = p->next)
			n += !p->exited;
		return n;
	}
	d = opendir("/proc");
	if (!d)
		return UINT32_MAX; /* unknown: the host must not freeze */
	while ((de = readdir(d))) {
		char path[64], st[512], *rp;
		int fd;
		ssize_t r;

		if (de->d_name[0] < '1' || de->d_name[0] > '9' || !strcmp(de->d_name, "1"))
			continue;
		/* waiting for a command that has not come: nothing to run */
		if (spare_pid() && atoi(de->d_name) == spare_pid())
			continue;
		snprintf(path, sizeof(path), "/proc/%.20s/stat", de->d_name);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue; /* gone meanwhile */
		r = read(fd, st, sizeof(st) - 1);
		close(fd);
		if (r <= 0)
			continue;
		st[r] = 0;
		rp = strrchr(st, ')');
		if (rp && rp[1] == ' ' && (rp[2] == 'Z' || rp[2] == 'X'))
			continue; /* about to be reaped */
		n++;
	}
	closedir(d);
	return n;
}

static int opens_stream(uint8_t type)
{
	switch (type) {
	case SBX_F_EXEC:
	case SBX_F_FILE:
	case SBX_F_ATTACH:
	case SBX_F_PROCS:
	case SBX_F_PSTDIN:
	case SBX_F_PSIGNAL:
	case SBX_F_PRESIZE:
		return 1;
	default:
		return 0;
	}
}

/* A frame that opens a stream: decoded and acted on; < 0 (err says why)
 * when it is malformed. */
static int on_request(struct conn *c, const struct sbx_frame *f, sbx_err *err)
{
	struct sbx_exec_req req;
	struct sbx_file_req freq;
	struct sbx_attach_req areq;
	const uint8_t *data;
	uint32_t v, pid;
	size_t len;

	switch (f->type) {
	case SBX_F_EXEC:
		if (sbx_exec_decode(f->payload, f->len, &req, err) < 0)
			return -1;
		proc_start(c, f->stream, &req);
		sbx_exec_req_free(&req);
		return 0;
	case SBX_F_FILE:
		if (sbx_file_decode(f->payload, f->len, &freq, err) < 0)
			return -1;
		on_file(c, f->stream, &freq);
		return 0;
	case SBX_F_ATTACH:
		if (sbx_attach_decode(f->payload, f->len, &areq, err) < 0)
			return -1;
		on_attach(c, f->stream, &areq);
		return 0;
	case SBX_F_PROCS:
		on_procs(c, f->stream);
		return 0;
	case SBX_F_PSTDIN:
		if (sbx_pstdin_decode(f->payload, f->len, &pid, &data, &len, err) < 0)
			return -1;
		on_pstdin(c, f->stream, pid, data, len);
		return 0;
	case SBX_F_PSIGNAL:
		if (sbx_psignal_decode(f->payload, f->len, &pid, &v, err) < 0)
			return -1;
		on_psignal(c, f->stream, pid, v);
		return 0;
	case SBX_F_PRESIZE: {
		uint16_t cols, rows;
		if (sbx_presize_decode(f->payload, f->len, &pid, &cols, &rows, err) < 0)
			return -1;
		on_presize(c, f->stream, pid, cols, rows);
		return 0;
	}
	default:
		return sbx_err_set(err, 0, "bad_frame", "not a request frame");
	}
}

static void on_frame(struct conn *c, const struct sbx_frame *f)
{
	sbx_err err = SBX_ERR_INIT;
	struct xfer *x;
	struct proc *p;
	uint32_t v;
	int request = opens_stream(f->type);

	/* a frame that opens a stream: never on one in use */
	if (request && stream_in_use(c, f->stream)) {
		conn_kill(c, "a stream in use was opened again");
		return;
	}
	if (!c->authed) {
		on_auth(c, f);
		return;
	}
	if (request) {
		if (on_request(c, f, &err) < 0)
			conn_kill(c, err.msg);
		return;
	}
	switch (f->type) {
	case SBX_F_PING:
		conn_send(c, SBX_F_PONG, f->stream, f->payload, f->len);
		return;
	case SBX_F_STATUS:
		conn_send_u32(c, SBX_F_STATUS_R, 0, count_procs());
		return;
	case SBX_F_AUTH:
		conn_kill(c, "AUTH twice");
		return;
	case SBX_F_STDIN:
		/* an unknown stream is one that just ended: not an error */
		x = xfer_find(c, f->stream);
		if (x && x->kind == X_WRITE) {
			file_write_data(x, f->payload, f->len);
			return;
		}
		p = proc_find(c, f->stream);
		if (!p)
			return;
		if (f->len == 0) {
			p->stdin_close = 1;
		} else if (p->fd_in < 0 || p->stdin_close) {
			conn_send_u32(c, SBX_F_STDIN_ACK, p->stream, f->len);
			return;
		} else {
			if (buf_pending(&p->stdin_buf) + f->len > SBX_STDIN_WINDOW) {
				conn_kill(c, "stdin window exceeded");
				return;
			}
			if (buf_reserve(&p->stdin_buf, f->len) < 0) {
				conn_kill(c, "out of memory");
				return;
			}
			memcpy(p->stdin_buf.p + p->stdin_buf.len, f->payload, f->len);
			p->stdin_buf.len += f->len;
		}
		proc_stdin_flush(p);
		proc_arm(p);
		return;
	case SBX_F_SIGNAL:
		if (sbx_frame_decode_u32(f, &v, &err) < 0 || v < 1 || v > 64) {
			conn_kill(c, "bad SIGNAL frame");
			return;
		}
		p = proc_find(c, f->stream);
		if (p && !p->exited)
			kill(-p->pid, (int)v);
		else if (!p && (x = xfer_find(c, f->stream)))
			xfer_cancel(x);
		return;
	case SBX_F_CREDIT:
		if (sbx_frame_decode_u32(f, &v, &err) < 0) {
			conn_kill(c, "bad CREDIT frame");
			return;
		}
		p = proc_find(c, f->stream);
		x = p ? NULL : xfer_find(c, f->stream);
		if (p) {
			p->credit += v;
			if (p->credit > CREDIT_MAX)
				p->credit = CREDIT_MAX;
			proc_service(p);
		} else if (x) {
			x->credit += v;
			if (x->credit > CREDIT_MAX)
				x->credit = CREDIT_MAX;
			xfer_service(x);
		}
		return;
	default:
		conn_kill(c, "unexpected frame type");
	}
}

void conn_read(struct conn *c)
{
	size_t cap = SBX_FRAME_HDR + SBX_FRAME_MAX_PAYLOAD, off = 0;
	sbx_err err = SBX_ERR_INIT;
	struct sbx_frame f;
	ssize_t n;
	long used = 0;

	n = recv(c->fd, c->in + c->inlen, cap - c->inlen, 0);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		conn_kill(c, n == 0 ? "closed by the host" : strerror(errno));
		return;
	}
	c->inlen += (size_t)n;
	while (!c->dead && (used = sbx_frame_parse(c->in + off, c->inlen - off, 0, &f, &err)) > 0) {
		on_frame(c, &f);
		off += (size_t)used;
	}
	if (used < 0) {
		conn_kill(c, err.msg);
		return;
	}
	memmove(c->in, c->in + off, c->inlen - off);
	c->inlen -= off;
}

void conn_accept(int lfd)
{
	struct conn *c;
	int fd, n = 0;

	fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (fd < 0)
		return;
	for (c = conns; c; c = c->next)
		n += !c->dead;
	if (n >= MAX_CONNS) {
		/* connections that never proved the key make room (newest
		 * first in the list, so the oldest such one goes): a process
		 * inside that opens many cannot lock the host out */
		struct conn *victim = NULL;
		for (c = conns; c; c = c->next)
			if (!c->dead && !c->authed)
				victim = c;
		if (!victim) {
			logmsg("refusing a channel connection: %d open", n);
			close(fd);
			return;
		}
		conn_kill(victim, "making room: it never authenticated");
	}
	c = calloc(1, sizeof(*c));
	if (c)
		c->in = malloc(SBX_FRAME_HDR + SBX_FRAME_MAX_PAYLOAD);
	if (!c || !c->in) {
		if (c)
			free(c);
		close(fd);
		return;
	}
	c->fd = fd;
	c->w = (struct watch){ W_CONN, c };
	c->next = conns;
	conns = c;
	ep_add(fd, &c->w, EPOLLIN);
	{
		uint8_t hello[SBX_HELLO_LEN];
		if (sbx_chan_random(c->nonce, sizeof(c->nonce), NULL) < 0) {
			conn_kill(c, "no random nonce");
			return;
		}
		sbx_hello_encode(c->nonce, hello);
		conn_send(c, SBX_F_HELLO, 0, hello, sizeof(hello));
	}
}
