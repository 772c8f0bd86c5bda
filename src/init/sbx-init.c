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

extern char **environ;

#define MAX_CONNS 64
#define CREDIT_MAX ((uint64_t)1 << 48)
/* After the main process exited, at most this much more is read from a pipe
 * that a grandchild still holds open; then the pipe is closed. */
#define DRAIN_MAX (1024 * 1024)
/* Background processes: output kept per process, finished ones remembered. */
#define PROC_LOG_MAX (16 * 1024 * 1024)
#define MAX_FINISHED 256
#define PROCS_DIR "/var/lib/sbx/procs"
#define PROCS_DIR_FALLBACK "/tmp/.sbx-procs"

struct conn *conns;
struct proc *procs;
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

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
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

static void proc_log(struct proc *p, int is_err, const uint8_t *data, size_t n);

static int proc_wants_output(const struct proc *p)
{
	if (!p->conn)
		return 1;
	if (p->conn->dead || p->conn->congested)
		return 0;
	return p->credit > 0;
}

void proc_arm(struct proc *p)
{
	int out = proc_wants_output(p);

	set_armed(p->fd_out, &p->w_out, &p->armed_out, out, EPOLLIN);
	set_armed(p->fd_err, &p->w_err, &p->armed_err, out, EPOLLIN);
	set_armed(p->fd_in, &p->w_in, &p->armed_in, buf_pending(&p->stdin_buf) > 0, EPOLLOUT);
}

/* One read from stdout or stderr: > 0 bytes forwarded, 0 the pipe is closed,
 * -1 nothing to read now, -2 no credit (or the channel is congested). */
ssize_t proc_read(struct proc *p, int is_err)
{
	static uint8_t scratch[READ_CHUNK];
	int *fd = is_err ? &p->fd_err : &p->fd_out;
	int *armed = is_err ? &p->armed_err : &p->armed_out;
	size_t max = READ_CHUNK;
	ssize_t n;

	if (*fd < 0)
		return 0;
	if (!proc_wants_output(p))
		return -2;
	if (!p->conn) {
		/* background: recorded; a dropped foreground one: discarded */
		n = read(*fd, scratch, max);
		if (n > 0 && p->background)
			proc_log(p, is_err, scratch, (size_t)n);
	} else {
		struct conn *c = p->conn;
		if (p->credit < max)
			max = (size_t)p->credit;
		if (buf_reserve(&c->out, SBX_FRAME_HDR + max) < 0) {
			conn_kill(c, "out of memory");
			return -2;
		}
		n = read(*fd, c->out.p + c->out.len + SBX_FRAME_HDR, max);
		if (n > 0) {
			sbx_frame_header(c->out.p + c->out.len, is_err ? SBX_F_STDERR : SBX_F_STDOUT,
					 p->stream, (uint32_t)n);
			c->out.len += SBX_FRAME_HDR + (size_t)n;
			p->credit -= (uint64_t)n;
			conn_flush(c);
			/* the EPOLLOUT handler lifts this once the host has read */
			if (buf_pending(&c->out) >= OUT_HIGH)
				c->congested = 1;
		}
	}
	if (n > 0) {
		if (p->exited)
			p->drained += (size_t)n;
		return n;
	}
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return -1;
	close_watched(fd, armed);
	return 0;
}

void proc_stdin_flush(struct proc *p)
{
	uint64_t acked = 0, written = 0;

	while (p->fd_in >= 0 && buf_pending(&p->stdin_buf)) {
		ssize_t n = write(p->fd_in, p->stdin_buf.p + p->stdin_buf.off, buf_pending(&p->stdin_buf));
		if (n > 0) {
			p->stdin_buf.off += (size_t)n;
			acked += (uint64_t)n;
			written += (uint64_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			break;
		/* EPIPE: the process closed its stdin; what is left is dropped */
		close_watched(&p->fd_in, &p->armed_in);
	}
	if (p->fd_in < 0) {
		acked += buf_pending(&p->stdin_buf);
		p->stdin_buf.off = p->stdin_buf.len;
	}
	p->stdin_written += written;
	if (acked && p->conn)
		conn_send_u32(p->conn, SBX_F_STDIN_ACK, p->stream, (uint32_t)acked);
	if (!buf_pending(&p->stdin_buf)) {
		buf_free(&p->stdin_buf);
		if (p->stdin_close)
			close_watched(&p->fd_in, &p->armed_in);
	}
	if (p->background)
		proc_xfers_service(p);
}

static void proc_finish_if_done(struct proc *p)
{
	uint8_t b[9];
	int code, sig = 0;

	if (p->done || !p->exited || p->fd_out >= 0 || p->fd_err >= 0)
		return;
	if (WIFEXITED(p->status)) {
		code = WEXITSTATUS(p->status);
	} else {
		sig = WTERMSIG(p->status);
		code = 128 + sig;
	}
	if (p->timed_out)
		code = 124;
	p->code = code;
	p->sig = sig;
	if (p->conn) {
		sbx_exit_encode(b, code, (uint32_t)sig, p->timed_out ? SBX_EXIT_TIMED_OUT : 0);
		conn_send(p->conn, SBX_F_EXIT, p->stream, b, sizeof(b));
	}
	close_watched(&p->fd_in, &p->armed_in);
	close_watched(&p->fd_timer, NULL);
	buf_free(&p->stdin_buf);
	p->done = 1;
	if (p->background) {
		p->ended_ms = now_ms();
		/* attachments at the end of the log can now say how it ended */
		proc_xfers_service(p);
	}
}

/* After the main process exited: read what is readable now (within credit)
 * and close the pipe at the first EAGAIN, so a grandchild that keeps the
 * pipe open cannot hold the EXIT back forever. */
static void proc_drain(struct proc *p, int is_err)
{
	int *fd = is_err ? &p->fd_err : &p->fd_out;
	int *armed = is_err ? &p->armed_err : &p->armed_out;

	while (*fd >= 0) {
		if (p->drained >= DRAIN_MAX) {
			close_watched(fd, armed);
			break;
		}
		ssize_t r = proc_read(p, is_err);
		if (r == -1)
			close_watched(fd, armed);
		if (r == -2)
			break;
	}
}

/* Re-evaluates a process after anything changed: exit, credit, congestion. */
void proc_service(struct proc *p)
{
	if (p->done)
		return;
	if (p->exited) {
		proc_drain(p, 0);
		proc_drain(p, 1);
	}
	proc_arm(p);
	proc_finish_if_done(p);
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

/* argv as one line for PROCS: UTF-8 kept, anything else shown as '?'. */
static char *cmd_line(const struct sbx_exec_req *req)
{
	size_t len = 0;
	char *s = malloc(SBX_CMD_MAX + 1);

	if (!s)
		return NULL;
	for (int i = 0; i < req->argc && len < SBX_CMD_MAX; i++) {
		const char *a = req->argv[i];
		size_t al = strlen(a);
		int utf8 = sbx_utf8_valid((const uint8_t *)a, al);
		if (i)
			s[len++] = ' ';
		for (size_t j = 0; j < al && len < SBX_CMD_MAX; j++) {
			unsigned char ch = (unsigned char)a[j];
			s[len++] = (ch < 0x20 || ch == 0x7f || (ch >= 0x80 && !utf8)) ? '?' : (char)ch;
		}
	}
	/* cut at a character boundary */
	while (len && !sbx_utf8_valid((const uint8_t *)s, len))
		len--;
	s[len] = 0;
	return s;
}

/* The output log of a background process: a new file, even when an old
 * entry with the same pid still holds its (now unlinked) log open. */
static int log_open(pid_t pid)
{
	char path[4200];

	snprintf(path, sizeof(path), "%s/%d.log", procs_dir, (int)pid);
	unlink(path);
	return open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
}

void log_unlink(const struct proc *p)
{
	char path[4200];
	struct stat a, b;

	if (p->log_fd < 0)
		return;
	snprintf(path, sizeof(path), "%s/%d.log", procs_dir, (int)p->pid);
	/* only if the name is still this process's log (not a newer one's) */
	if (fstat(p->log_fd, &a) == 0 && stat(path, &b) == 0 && a.st_ino == b.st_ino &&
	    a.st_dev == b.st_dev)
		unlink(path);
}

/* Appends one record; past the cap (or on a write error) only counts. */
static void proc_log(struct proc *p, int is_err, const uint8_t *data, size_t n)
{
	uint8_t hdr[LOG_REC_HDR];
	size_t keep = n, done = 0;

	p->out_bytes += n;
	if (p->truncated || p->log_fd < 0)
		return;
	if (p->logged + n > proc_log_max) {
		keep = (size_t)(proc_log_max - p->logged);
		p->truncated = 1;
	}
	if (keep == 0)
		return;
	hdr[0] = is_err ? 2 : 1;
	sbx_put32(hdr + 1, (uint32_t)keep);
	while (done < LOG_REC_HDR + keep) {
		struct iovec iov[2] = { { hdr, LOG_REC_HDR }, { (void *)data, keep } };
		ssize_t w;
		if (done >= LOG_REC_HDR) {
			iov[0].iov_base = (void *)(data + (done - LOG_REC_HDR));
			iov[0].iov_len = keep - (done - LOG_REC_HDR);
			w = pwritev(p->log_fd, iov, 1, (off_t)(p->log_size + done));
		} else {
			iov[0].iov_base = hdr + done;
			iov[0].iov_len = LOG_REC_HDR - done;
			w = pwritev(p->log_fd, iov, 2, (off_t)(p->log_size + done));
		}
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			/* disk full: keep what is complete, record no more */
			logmsg("log of pid %d: %s", (int)p->pid, w < 0 ? strerror(errno) : "short write");
			if (ftruncate(p->log_fd, (off_t)p->log_size) < 0)
				logmsg("log of pid %d: truncate: %s", (int)p->pid, strerror(errno));
			p->truncated = 1;
			return;
		}
		done += (size_t)w;
	}
	p->log_size += LOG_REC_HDR + keep;
	p->logged += keep;
	proc_xfers_service(p);
}

struct child_err {
	int stage; /* 1 chdir, 2 exec */
	int err;
};

static void child_fail(int fd, int stage)
{
	struct child_err ce = { stage, errno };
	ssize_t r = write(fd, &ce, sizeof(ce));

	(void)r;
	_exit(127);
}

/* The child side of EXEC: everything here happens between fork and exec. */
static void child_exec(const struct sbx_exec_req *req, int in, int out, int err, int errfd)
{
	sigset_t none;

	setsid();
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGPIPE, SIG_DFL); /* ignored dispositions survive exec */
	if (in < 0)
		in = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (in < 0 || dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0)
		child_fail(errfd, 2);
	if (chdir(req->cwd) < 0)
		child_fail(errfd, 1);
	environ = (char **)req->envp;
	execvp(req->argv[0], (char *const *)req->argv);
	child_fail(errfd, 2);
}

static int pipe_pair(int p[2])
{
	return pipe2(p, O_CLOEXEC);
}

void proc_start(struct conn *c, uint32_t stream, const struct sbx_exec_req *req)
{
	int pin[2] = { -1, -1 }, pout[2] = { -1, -1 }, perr[2] = { -1, -1 }, pe[2] = { -1, -1 };
	struct child_err ce;
	struct stat st;
	struct proc *p;
	char **saved_environ;
	ssize_t r;
	pid_t pid;

	if (stat(req->cwd, &st) < 0 || !S_ISDIR(st.st_mode)) {
		send_error(c, stream, "cwd does not exist: %s", req->cwd);
		return;
	}
	if (((req->flags & SBX_EXEC_STDIN) && pipe_pair(pin) < 0) || pipe_pair(pout) < 0 ||
	    pipe_pair(perr) < 0 || pipe_pair(pe) < 0) {
		send_error(c, stream, "cannot start: pipe: %s", strerror(errno));
		goto out;
	}
	/* vfork: copying sbx-init's address space is what makes fork slow in
	 * gVisor. The child only touches its own stack, file table and signal
	 * state, plus `environ`, which is put back here once it has exec'd. */
	saved_environ = environ;
	pid = vfork();
	if (pid == 0)
		child_exec(req, pin[0], pout[1], perr[1], pe[1]);
	environ = saved_environ;
	if (pid < 0) {
		send_error(c, stream, "cannot start: fork: %s", strerror(errno));
		goto out;
	}
	close(pe[1]);
	pe[1] = -1;
	/* exec closes pe[1] (O_CLOEXEC): EOF here means the command runs */
	do
		r = read(pe[0], &ce, sizeof(ce));
	while (r < 0 && errno == EINTR);
	if (r == (ssize_t)sizeof(ce)) {
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
		errno = ce.err;
		if (ce.stage == 1 && (ce.err == ENOENT || ce.err == ENOTDIR))
			send_error(c, stream, "cwd does not exist: %s", req->cwd);
		else if (ce.stage == 1)
			send_error(c, stream, "cannot enter cwd %s: %s", req->cwd, strerror(ce.err));
		else if (ce.err == ENOENT)
			send_error(c, stream, "command not found: %s", req->argv[0]);
		else if (ce.err == EACCES)
			send_error(c, stream, "permission denied: %s", req->argv[0]);
		else
			send_error(c, stream, "cannot execute %s: %s", req->argv[0], strerror(ce.err));
		goto out;
	}
	p = calloc(1, sizeof(*p));
	if (!p) {
		/* the command runs but cannot be tracked: stop it */
		kill(-pid, SIGKILL);
		send_error(c, stream, "cannot start: out of memory");
		goto out;
	}
	p->log_fd = -1;
	if (req->flags & SBX_EXEC_BACKGROUND) {
		int e;
		p->log_fd = log_open(pid);
		e = errno;
		p->cmd = cmd_line(req);
		if (p->log_fd < 0 || !p->cmd) {
			if (p->log_fd >= 0)
				e = ENOMEM;
			/* not tracked: stopped (and reaped like any orphan) */
			kill(-pid, SIGKILL);
			if (p->log_fd >= 0)
				close(p->log_fd);
			free(p->cmd);
			free(p);
			send_error(c, stream, "cannot record the output of a background process in %s: %s",
				   procs_dir, strerror(e));
			goto out;
		}
		p->started_ms = now_ms();
	}
	p->conn = c;
	p->stream = stream;
	p->pid = pid;
	p->background = (req->flags & SBX_EXEC_BACKGROUND) != 0;
	p->credit = req->credit;
	p->fd_in = pin[1];
	p->fd_out = pout[0];
	p->fd_err = perr[0];
	p->fd_timer = -1;
	pin[1] = pout[0] = perr[0] = -1;
	p->w_out = (struct watch){ W_OUT, p };
	p->w_err = (struct watch){ W_ERR, p };
	p->w_in = (struct watch){ W_IN, p };
	p->w_timer = (struct watch){ W_TIMER, p };
	fcntl(p->fd_out, F_SETFL, O_NONBLOCK);
	fcntl(p->fd_err, F_SETFL, O_NONBLOCK);
	if (p->fd_in >= 0)
		fcntl(p->fd_in, F_SETFL, O_NONBLOCK);
	if (req->timeout_ms) {
		struct itimerspec its = { .it_value = { req->timeout_ms / 1000,
							(long)(req->timeout_ms % 1000) * 1000000 } };
		p->fd_timer = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
		if (p->fd_timer >= 0 && timerfd_settime(p->fd_timer, 0, &its, NULL) == 0)
			ep_add(p->fd_timer, &p->w_timer, EPOLLIN);
		else
			logmsg("timerfd for pid %d: %s", (int)pid, strerror(errno));
	}
	p->next = procs;
	procs = p;
	conn_send_u32(c, SBX_F_STARTED, stream, (uint32_t)pid);
	if (p->background) {
		/* its stream ends here: ATTACH, PSTDIN and PSIGNAL reach it by pid,
		 * from any connection */
		send_exit(c, stream, 0, 0, SBX_EXIT_DETACHED);
		p->conn = NULL;
		p->stream = 0;
	}
	proc_arm(p);
out:
	for (int i = 0; i < 2; i++) {
		if (pin[i] >= 0)
			close(pin[i]);
		if (pout[i] >= 0)
			close(pout[i]);
		if (perr[i] >= 0)
			close(perr[i]);
		if (pe[i] >= 0)
			close(pe[i]);
	}
}

void proc_timeout(struct proc *p)
{
	uint64_t ticks;

	if (read(p->fd_timer, &ticks, sizeof(ticks)) < 0 && errno == EAGAIN)
		return;
	close_watched(&p->fd_timer, NULL);
	if (p->exited)
		return;
	p->timed_out = 1;
	kill(-p->pid, SIGKILL);
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

void proc_free(struct proc *p)
{
	if (p->log_fd >= 0)
		close(p->log_fd);
	buf_free(&p->stdin_buf);
	free(p->cmd);
	free(p);
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
