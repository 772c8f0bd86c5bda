/* sbx-init: PID 1 inside every sandbox, and the node agent's channel into it.
 *
 *   sbx-init --channel /run/sbx/channel.sock [--quiet]
 *
 * It listens on a unix socket in a directory bind-mounted from the host
 * (runsc --host-uds=create makes the socket a real host socket), so the node
 * agent connects whenever it (re)starts: nothing inside needs to notice a
 * node agent restart. Frames are those of src/lib/frame.h, validated strictly
 * in both directions. One epoll loop serves every connection and process:
 *   - EXEC forks a process in its own session / process group, with pipes
 *     for stdin, stdout and stderr; output is forwarded as it is read (one
 *     read of at most 64 KiB per frame) while the process has credit, so a
 *     slow host makes the command block on write, and one stream never
 *     blocks another;
 *   - every child is reaped (signalfd for SIGCHLD), orphans included; when
 *     not PID 1 it makes itself a child subreaper so tests can run it as a
 *     normal process;
 *   - a dropped connection kills its foreground processes (their reader is
 *     gone); background ones keep running, their output recorded in a log
 *     file (records: u8 kind, u32 len, bytes) that any number of ATTACH
 *     streams replay and follow, from any connection, each with its own
 *     credit;
 *   - FILE streams write (temp file + rename), read, list, delete and make
 *     directories; data moves in frames as it is sent or credited, so a
 *     file of any size costs a frame's worth of memory.
 * Only libc is used: the binary is static and bind-mounted into every
 * sandbox, whatever its image. */
#include "config.h"
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <dirent.h>
#include <ftw.h>
#include <libgen.h>
#include <sys/uio.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <sys/wait.h>
#include "init.h"

#define MAX_CONNS 64
#define CREDIT_MAX ((uint64_t)1 << 48)
/* Background processes: output kept per process, finished ones remembered. */
#define PROC_LOG_MAX (16 * 1024 * 1024)
#define MAX_FINISHED 256
#define PROCS_DIR "/var/lib/sbx/procs"
#define PROCS_DIR_FALLBACK "/tmp/.sbx-procs"

struct conn *conns;
static int ep = -1;
static int quiet;
static int is_pid1;
const char *procs_dir = PROCS_DIR;
uint64_t proc_log_max = PROC_LOG_MAX;
static struct watch w_listen = { W_LISTEN, NULL }, w_signal = { W_SIGNAL, NULL };

void logmsg(const char *fmt, ...)
{
	va_list ap;

	if (quiet)
		return;
	va_start(ap, fmt);
	fputs("sbx-init: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

/* ---- byte buffers ------------------------------------------------------ */

size_t buf_pending(const struct buf *b)
{
	return b->len - b->off;
}

/* Room for n more bytes at p + len; compacts first. Returns -1 on ENOMEM. */
int buf_reserve(struct buf *b, size_t n)
{
	if (b->off && b->off == b->len)
		b->off = b->len = 0;
	if (b->cap - b->len >= n)
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

/* Big buffers are returned once empty, so an idle process costs nothing. */
static void buf_shrink(struct buf *b)
{
	if (buf_pending(b) == 0 && b->cap > 64 * 1024)
		buf_free(b);
}

/* ---- epoll ------------------------------------------------------------- */

void ep_add(int fd, struct watch *w, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.ptr = w };

	if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0)
		logmsg("epoll_ctl add %d: %s", fd, strerror(errno));
}

void ep_mod(int fd, struct watch *w, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.ptr = w };

	if (epoll_ctl(ep, EPOLL_CTL_MOD, fd, &ev) < 0)
		logmsg("epoll_ctl mod %d: %s", fd, strerror(errno));
}

/* Pipes are added only while they are wanted: a pipe in the set always
 * reports EPOLLHUP, which would spin a level-triggered loop. */
void set_armed(int fd, struct watch *w, int *armed, int want, uint32_t events)
{
	if (fd < 0) {
		*armed = 0;
		return;
	}
	if (want && !*armed)
		ep_add(fd, w, events);
	else if (!want && *armed)
		epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
	*armed = want;
}

void close_watched(int *fd, int *armed)
{
	if (*fd < 0)
		return;
	if (armed && *armed)
		epoll_ctl(ep, EPOLL_CTL_DEL, *fd, NULL);
	if (armed)
		*armed = 0;
	close(*fd);
	*fd = -1;
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
	int want = buf_pending(&c->out) > 0;
	if (want != c->want_out) {
		ep_mod(c->fd, &c->w, EPOLLIN | (want ? EPOLLOUT : 0));
		c->want_out = want;
	}
	buf_shrink(&c->out);
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

static void reap(void)
{
	int status;
	pid_t pid;

	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		for (struct proc *p = procs; p; p = p->next) {
			if (p->pid == pid && !p->exited) {
				p->exited = 1;
				p->status = status;
				close_watched(&p->fd_timer, NULL);
				proc_service(p);
				break;
			}
		}
	}
}

void note_congestion(struct conn *c)
{
	/* the EPOLLOUT handler lifts this once the host has read */
	if (buf_pending(&c->out) >= OUT_HIGH)
		c->congested = 1;
}

/* ---- frames from the host ---------------------------------------------- */

static void on_frame(struct conn *c, const struct sbx_frame *f)
{
	sbx_err err = SBX_ERR_INIT;
	struct sbx_exec_req req;
	struct sbx_file_req freq;
	struct sbx_attach_req areq;
	const uint8_t *data;
	struct xfer *x;
	struct proc *p;
	uint32_t v, pid;
	size_t len;

	/* frames that open a stream: never on one in use */
	switch (f->type) {
	case SBX_F_EXEC:
	case SBX_F_FILE:
	case SBX_F_ATTACH:
	case SBX_F_PROCS:
	case SBX_F_PSTDIN:
	case SBX_F_PSIGNAL:
		if (stream_in_use(c, f->stream)) {
			conn_kill(c, "a stream in use was opened again");
			return;
		}
		break;
	default:
		break;
	}
	switch (f->type) {
	case SBX_F_PING:
		conn_send(c, SBX_F_PONG, f->stream, f->payload, f->len);
		return;
	case SBX_F_EXEC:
		if (sbx_exec_decode(f->payload, f->len, &req, &err) < 0) {
			conn_kill(c, err.msg);
			return;
		}
		proc_start(c, f->stream, &req);
		sbx_exec_req_free(&req);
		return;
	case SBX_F_FILE:
		if (sbx_file_decode(f->payload, f->len, &freq, &err) < 0) {
			conn_kill(c, err.msg);
			return;
		}
		on_file(c, f->stream, &freq);
		return;
	case SBX_F_ATTACH:
		if (sbx_attach_decode(f->payload, f->len, &areq, &err) < 0) {
			conn_kill(c, err.msg);
			return;
		}
		on_attach(c, f->stream, &areq);
		return;
	case SBX_F_PROCS:
		on_procs(c, f->stream);
		return;
	case SBX_F_PSTDIN:
		if (sbx_pstdin_decode(f->payload, f->len, &pid, &data, &len, &err) < 0) {
			conn_kill(c, err.msg);
			return;
		}
		on_pstdin(c, f->stream, pid, data, len);
		return;
	case SBX_F_PSIGNAL:
		if (sbx_psignal_decode(f->payload, f->len, &pid, &v, &err) < 0) {
			conn_kill(c, err.msg);
			return;
		}
		on_psignal(c, f->stream, pid, v);
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
		logmsg("refusing a channel connection: %d open", n);
		close(fd);
		return;
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
	conn_send_u32(c, SBX_F_HELLO, 0, SBX_FRAME_VERSION);
}

/* End of each loop iteration: dropped connections release their processes
 * (foreground ones are killed, background ones detached), finished
 * processes are freed. Deferred so no event of this batch sees freed memory. */
static void collect(void)
{
	for (struct conn **cp = &conns; *cp;) {
		struct conn *c = *cp;
		if (!c->dead) {
			cp = &c->next;
			continue;
		}
		for (struct proc *p = procs; p; p = p->next) {
			if (p->conn != c)
				continue;
			p->conn = NULL;
			buf_free(&p->stdin_buf);
			if (!p->background && !p->done)
				kill(-p->pid, SIGKILL);
			proc_service(p);
		}
		for (struct xfer *x = xfers; x; x = x->next)
			if (x->conn == c && !x->done)
				xfer_release(x);
		*cp = c->next;
		close(c->fd);
		free(c->in);
		buf_free(&c->out);
		free(c);
	}
	for (struct xfer **xp = &xfers; *xp;) {
		struct xfer *x = *xp;
		if (!x->done) {
			xp = &x->next;
			continue;
		}
		*xp = x->next;
		free(x);
	}
	/* finished background processes are remembered, the newest
	 * MAX_FINISHED of them (the list is newest first) */
	int finished = 0;
	for (struct proc **pp = &procs; *pp;) {
		struct proc *p = *pp;
		if (!p->done || (p->background && (++finished <= MAX_FINISHED || p->refs > 0))) {
			pp = &p->next;
			continue;
		}
		*pp = p->next;
		if (p->background)
			log_unlink(p);
		proc_free(p);
	}
}

static void on_signal(int sfd)
{
	struct signalfd_siginfo si;

	while (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		if (si.ssi_signo == SIGCHLD)
			continue;
		if (is_pid1) {
			/* PID 1 lives as long as its sandbox: runsc ends it */
			logmsg("ignoring signal %u", si.ssi_signo);
			continue;
		}
		logmsg("signal %u: stopping", si.ssi_signo);
		for (struct proc *p = procs; p; p = p->next)
			if (!p->exited)
				kill(-p->pid, SIGKILL);
		exit(0);
	}
	reap();
}

static int listen_on(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat st;
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		logmsg("channel path too long: %s", path);
		return -1;
	}
	strcpy(sa.sun_path, path);
	/* a socket left by an earlier run is stale: nobody else binds here */
	if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode))
		unlink(path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 16) < 0) {
		logmsg("channel %s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

/* Descriptors inherited from whoever started us must not reach commands. */
static void close_inherited(void)
{
	struct dirent *d;
	DIR *dir;

	if (close_range(3, ~0U, 0) == 0)
		return;
	dir = opendir("/proc/self/fd");
	if (!dir)
		return;
	while ((d = readdir(dir))) {
		int fd = atoi(d->d_name);
		if (fd > 2 && fd != dirfd(dir))
			close(fd);
	}
	closedir(dir);
}

static void usage(void)
{
	fprintf(stderr, "usage: sbx-init --channel PATH [--procs-dir DIR] [--proc-log-max BYTES] "
			"[--quiet]\n");
	exit(2);
}

/* The directory of background output logs: made if missing; logs found
 * there belong to no process of ours (an earlier run) and are removed. */
static void procs_dir_init(void)
{
	struct dirent *d;
	DIR *dir;

	if (mkdir_p(procs_dir, 0700) < 0) {
		/* a read-only root (the default place only): /tmp is the
		 * sandbox's own writable space as well */
		if (strcmp(procs_dir, PROCS_DIR) || mkdir_p(PROCS_DIR_FALLBACK, 0700) < 0) {
			logmsg("%s: %s (background processes cannot start)", procs_dir, strerror(errno));
			return;
		}
		procs_dir = PROCS_DIR_FALLBACK;
	}
	dir = opendir(procs_dir);
	if (!dir)
		return;
	while ((d = readdir(dir))) {
		size_t n = strlen(d->d_name);
		if (n > 4 && !strcmp(d->d_name + n - 4, ".log"))
			unlinkat(dirfd(dir), d->d_name, 0);
	}
	closedir(dir);
}

int main(int argc, char **argv)
{
	const char *channel = NULL;
	struct epoll_event evs[64];
	sigset_t set;
	int lfd, sfd;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--channel") && i + 1 < argc)
			channel = argv[++i];
		else if (!strcmp(argv[i], "--procs-dir") && i + 1 < argc)
			procs_dir = argv[++i];
		else if (!strcmp(argv[i], "--proc-log-max") && i + 1 < argc)
			proc_log_max = strtoull(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--quiet"))
			quiet = 1;
		else if (!strcmp(argv[i], "--version")) {
			printf("sbx-init %s (protocol %d)\n", PACKAGE_VERSION, SBX_FRAME_VERSION);
			return 0;
		} else
			usage();
	}
	if (!channel)
		usage();
	close_inherited();
	/* the pipes given to commands must never land on 0-2 (dup2 onto
	 * itself would keep O_CLOEXEC): make sure 0-2 are taken */
	for (;;) {
		int fd = open("/dev/null", O_RDWR | O_CLOEXEC);
		if (fd > 2)
			close(fd);
		if (fd < 0 || fd > 2)
			break;
	}
	is_pid1 = getpid() == 1;
	if (!is_pid1 && prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
		logmsg("PR_SET_CHILD_SUBREAPER: %s", strerror(errno));
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	sigprocmask(SIG_BLOCK, &set, NULL);
	sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	ep = epoll_create1(EPOLL_CLOEXEC);
	if (sfd < 0 || ep < 0) {
		logmsg("signalfd/epoll: %s", strerror(errno));
		return 1;
	}
	procs_dir_init();
	lfd = listen_on(channel);
	if (lfd < 0)
		return 1;
	ep_add(sfd, &w_signal, EPOLLIN);
	ep_add(lfd, &w_listen, EPOLLIN);
	logmsg("listening on %s (pid %d)", channel, (int)getpid());
	/* children that were already ours (none as PID 1) */
	reap();
	for (;;) {
		int n = epoll_wait(ep, evs, (int)(sizeof(evs) / sizeof(evs[0])), -1);
		if (n < 0 && errno != EINTR) {
			logmsg("epoll_wait: %s", strerror(errno));
			sleep(1);
		}
		for (int i = 0; i < n; i++) {
			struct watch *w = evs[i].data.ptr;
			struct proc *p = w->obj;
			struct conn *c = w->obj;
			switch (w->kind) {
			case W_LISTEN:
				conn_accept(lfd);
				break;
			case W_SIGNAL:
				on_signal(sfd);
				break;
			case W_CONN:
				if (c->dead)
					break;
				if (evs[i].events & EPOLLOUT) {
					conn_flush(c);
					if (!c->dead && c->congested && buf_pending(&c->out) < OUT_HIGH) {
						c->congested = 0;
						procs_of_conn_service(c);
					}
				}
				if (!c->dead && (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)))
					conn_read(c);
				break;
			case W_OUT:
			case W_ERR:
				if (p->done)
					break;
				proc_read(p, w->kind == W_ERR);
				proc_service(p);
				break;
			case W_IN:
				if (p->done)
					break;
				proc_stdin_flush(p);
				proc_arm(p);
				break;
			case W_TIMER:
				if (!p->done && p->fd_timer >= 0)
					proc_timeout(p);
				break;
			}
		}
		collect();
	}
}
