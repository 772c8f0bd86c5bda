/* sbx-init's processes (EXEC): started in their own session with pipes,
 * output forwarded within the host's credit, stdin, timeouts, and the EXIT
 * once a process has exited and its pipes are drained; the output logs of
 * background processes. */
#include "config.h"
#include <errno.h>
#include <sys/resource.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include "init.h"

extern char **environ;

/* After the main process exited, at most this much more is read from a pipe
 * that a grandchild still holds open; then the pipe is closed. */
#define DRAIN_MAX (1024 * 1024)

struct proc *procs;

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t mono_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void proc_log(struct proc *p, int is_err, const uint8_t *data, size_t n);

/* Output is read at most every HOLD_US while it keeps coming in small
 * writes. Under gVisor every wake-up of ours costs the sandbox ~0.2 ms of
 * CPU: a command writing 8 KiB at a time (head, stdio) woke us for each,
 * and a relayed `yes | head` moved 35 MiB/s where `yes | head > /dev/null`
 * moves 150-220. A read after a quiet HOLD_US goes out at once (a prompt, a
 * line now and then), a full read (more is waiting) is followed at once;
 * the end of a command is never held (proc_drain reads what is left).
 * Streamed, three runs each (bench/exec-latency's lines): 1 ms gave `yes |
 * head` 43-48 MiB/s, 3 ms 57-62, 8 ms 54-57 (`head -c` of a file 63-71,
 * 63-96, 67-71); 50,000 one-line writes 178-358 ms at any of them. What
 * is held is at most HOLD_US late. */
#define HOLD_US 3000

static int proc_held(const struct proc *p)
{
	return p->hold_until && mono_us() < p->hold_until;
}

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
	int out = proc_wants_output(p) && !proc_held(p);

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
		int direct;
		if (p->credit < max)
			max = (size_t)p->credit;
		/* Straight into the channel's buffer when it has room for a whole
		 * chunk (a stream under way); else into scratch, and the buffer
		 * grows by what came. Growing it to a chunk for the few bytes of
		 * a short command (or its EOF) was a 512 KiB allocation on every
		 * exec, freed again once idle (conns_shrink): an mmap before
		 * EXIT and a munmap later, each a trip through gVisor's memory
		 * management (0.7-2 ms seen in runsc --strace). */
		direct = buf_room(&c->out) >= SBX_FRAME_HDR + max;
		n = read(*fd, direct ? c->out.p + c->out.len + SBX_FRAME_HDR : scratch, max);
		if (n > 0 && !direct) {
			if (buf_reserve(&c->out, SBX_FRAME_HDR + (size_t)n) < 0) {
				conn_kill(c, "out of memory");
				return -2;
			}
			memcpy(c->out.p + c->out.len + SBX_FRAME_HDR, scratch, (size_t)n);
		}
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
		int64_t t = mono_us();
		if (p->exited)
			p->drained += (size_t)n;
		else if ((size_t)n < max && t - p->last_read_us < HOLD_US)
			p->hold_until = t + HOLD_US;
		p->last_read_us = t;
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
		if (p->stdin_close && p->pty && p->fd_in >= 0) {
			/* a terminal has no end of input: EOF is typed (^D twice:
			 * the first ends a partial line, the second reads as EOF),
			 * and the terminal stays */
			static const char eot[] = "\x04\x04";
			ssize_t w = write(p->fd_in, eot, sizeof(eot) - 1);
			(void)w;
		}
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
	buf_free(&p->stdin_buf);
	p->done = 1;
	if (p->background) {
		p->ended_ms = now_ms();
		/* attachments at the end of the log can now say how it ended */
		proc_xfers_service(p);
	}
	spare_idle();
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

static void child_fail(int fd, int stage)
{
	struct child_err ce = { stage, errno };
	ssize_t r = write(fd, &ce, sizeof(ce));

	(void)r;
	_exit(127);
}

/* The child side of EXEC: everything here happens between fork and exec.
 * tty >= 0 (a pty's slave, also in/out/err) becomes the new session's
 * controlling terminal. */
static void child_exec(const struct sbx_exec_req *req, char **env, int in, int out, int err, int tty, int errfd)
{
	sigset_t none;

	setsid();
	if (tty >= 0 && ioctl(tty, TIOCSCTTY, 0) < 0)
		child_fail(errfd, 2);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGPIPE, SIG_DFL); /* ignored dispositions survive exec */
	if (in < 0)
		in = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (in < 0 || dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0)
		child_fail(errfd, 2);
	if (chdir(req->cwd) < 0)
		child_fail(errfd, 1);
	/* the sandbox's process limit; ours is higher, so a command that
	 * holds all of its own cannot stop the next exec (--nproc) */
	if (cmd_nproc > 0) {
		struct rlimit rl = { (rlim_t)cmd_nproc, (rlim_t)cmd_nproc };
		if (setrlimit(RLIMIT_NPROC, &rl) < 0)
			child_fail(errfd, 2);
	}
	environ = env;
	execvp(req->argv[0], (char *const *)req->argv);
	child_fail(errfd, 2);
}

static int pipe_pair(int p[2])
{
	return pipe2(p, O_CLOEXEC);
}

/* A pseudo-terminal of the request's size: *m the master, *s the slave. */
static int pty_open(const struct sbx_exec_req *req, int *m, int *s)
{
	struct winsize ws = { .ws_row = req->rows, .ws_col = req->cols };
	char name[64];

	*m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (*m < 0)
		return -1;
	if (grantpt(*m) < 0 || unlockpt(*m) < 0 || ptsname_r(*m, name, sizeof(name)) != 0 ||
	    ioctl(*m, TIOCSWINSZ, &ws) < 0)
		return -1;
	*s = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
	return *s < 0 ? -1 : 0;
}

int proc_resize(struct proc *p, uint16_t cols, uint16_t rows)
{
	struct winsize ws = { .ws_row = rows, .ws_col = cols };

	if (!p->pty || p->fd_out < 0)
		return ENOTTY;
	return ioctl(p->fd_out, TIOCSWINSZ, &ws) < 0 ? errno : 0;
}

/* A command's environment: sbx-init's own, which is what the bundle gave it
 * (PATH, HOME and LANG, then the image's Env, then the sandbox's env at
 * create: oci.c), with each name the request gives set to its value (the
 * sandbox's env and this call's, from the API). Points into both. */
__attribute__((noinline)) static char **exec_env(const struct sbx_exec_req *req)
{
	size_t nb = 0, k = 0;
	char **e;

	for (char **p = environ; *p; p++)
		nb++;
	e = calloc(nb + (size_t)req->envc + 1, sizeof(*e));
	if (!e)
		return NULL;
	for (char **p = environ; *p; p++) {
		size_t l = strcspn(*p, "=");
		bool given = false;
		for (int i = 0; i < req->envc && !given; i++)
			given = !strncmp(req->envp[i], *p, l) && req->envp[i][l] == '=';
		if (!given)
			e[k++] = *p;
	}
	for (int i = 0; i < req->envc; i++)
		e[k++] = (char *)req->envp[i];
	return e;
}

/* The pipes of a command: stdin (pin NULL: none), stdout and stderr. */
int proc_pipes(int pin[2], int pout[2], int perr[2])
{
	if ((pin && pipe_pair(pin) < 0) || pipe_pair(pout) < 0 || pipe_pair(perr) < 0)
		return -1;
	/* larger is only faster: a failure keeps the default size */
	(void)fcntl(pout[0], F_SETPIPE_SZ, OUT_PIPE_SZ);
	(void)fcntl(perr[0], F_SETPIPE_SZ, OUT_PIPE_SZ);
	return 0;
}

/* Closes what of the three pairs is open. */
void proc_pipes_close(int pin[2], int pout[2], int perr[2])
{
	for (int i = 0; i < 2; i++) {
		if (pin[i] >= 0)
			close(pin[i]);
		if (pout[i] >= 0)
			close(pout[i]);
		if (perr[i] >= 0)
			close(perr[i]);
	}
}

/* Starts req's command with env on in/out/err (tty >= 0: its terminal, all
 * three). Returns its pid; -1 with errno when it could not be made, -2 with
 * *ce when the child could not enter cwd or exec (it is reaped). */
pid_t proc_spawn(const struct sbx_exec_req *req, char **env, int in, int out, int err, int tty, struct child_err *ce)
{
	int pe[2];
	char **saved_environ;
	ssize_t r;
	pid_t pid;

	if (pipe_pair(pe) < 0)
		return -1;
	/* vfork: copying sbx-init's address space is what makes fork slow in
	 * gVisor. The child only touches its own stack, file table and signal
	 * state, plus `environ`, which is put back here once it has exec'd. */
	saved_environ = environ;
	pid = vfork();
	if (pid == 0)
		child_exec(req, env, in, out, err, tty, pe[1]);
	environ = saved_environ;
	close(pe[1]);
	if (pid < 0) {
		close(pe[0]);
		return -1;
	}
	/* exec closes pe[1] (O_CLOEXEC): EOF here means the command runs */
	do
		r = read(pe[0], ce, sizeof(*ce));
	while (r < 0 && errno == EINTR);
	close(pe[0]);
	if (r != (ssize_t)sizeof(*ce))
		return pid;
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
	return -2;
}

void proc_start(struct conn *c, uint32_t stream, const struct sbx_exec_req *req)
{
	int pin[2] = { -1, -1 }, pout[2] = { -1, -1 }, perr[2] = { -1, -1 };
	int pty = (req->flags & SBX_EXEC_PTY) != 0;
	struct child_err ce;
	struct stat st;
	struct proc *p;
	char **env = NULL;
	int spare;
	pid_t pid;

	if (stat(req->cwd, &st) < 0 || !S_ISDIR(st.st_mode)) {
		send_error(c, stream, "cwd does not exist: %s", req->cwd);
		return;
	}
	if (!(env = exec_env(req))) {
		send_error(c, stream, "cannot start: out of memory");
		goto out;
	}
	if ((spare = spare_take(req, env, &pid, pout, perr)))
		goto track;
	if (pty) {
		/* one terminal for all three: output comes from the master (as
		 * stdout), input goes to it through its own descriptor; the
		 * child's three ends are all the slave (pin[0], closed once) */
		if (pty_open(req, &pout[0], &pin[0]) < 0 || (pin[1] = fcntl(pout[0], F_DUPFD_CLOEXEC, 3)) < 0) {
			send_error(c, stream, "cannot start: pseudo-terminal: %s", strerror(errno));
			goto out;
		}
	} else if (proc_pipes((req->flags & SBX_EXEC_STDIN) ? pin : NULL, pout, perr) < 0) {
		send_error(c, stream, "cannot start: pipe: %s", strerror(errno));
		goto out;
	}
	pid = proc_spawn(req, env, pin[0], pty ? pin[0] : pout[1], pty ? pin[0] : perr[1], pty ? pin[0] : -1, &ce);
	if (pid == -1) {
		send_error(c, stream, "cannot start: fork: %s", strerror(errno));
		goto out;
	}
	if (pid == -2) {
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
track:
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
	p->pty = (req->flags & SBX_EXEC_PTY) != 0;
	p->credit = req->credit;
	p->fd_in = pin[1];
	p->fd_out = pout[0];
	p->fd_err = perr[0];
	pin[1] = pout[0] = perr[0] = -1;
	p->w_out = (struct watch){ W_OUT, p };
	p->w_err = (struct watch){ W_ERR, p };
	p->w_in = (struct watch){ W_IN, p };
	if (!spare) {
		fcntl(p->fd_out, F_SETFL, O_NONBLOCK);
		if (p->fd_err >= 0)
			fcntl(p->fd_err, F_SETFL, O_NONBLOCK);
	}
	if (p->fd_in >= 0)
		fcntl(p->fd_in, F_SETFL, O_NONBLOCK);
	if (req->timeout_ms)
		p->deadline_us = mono_us() + (int64_t)req->timeout_ms * 1000;
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
	spare_next(req, env);
out:
	free(env);
	proc_pipes_close(pin, pout, perr);
}

/* Before the loop waits: arms again each held process whose time has come
 * and kills the process group of each whose timeout has passed; returns the
 * ms until the next of those moments (-1: none), the wait's timeout. The
 * timeouts are the loop's, not a timerfd each: that was three system calls
 * on every exec's way to STARTED and one after it, each a trap into gVisor. */
int proc_timers(void)
{
	int64_t t = mono_us(), first = 0;

	for (struct proc *p = procs; p; p = p->next) {
		if (p->done)
			continue;
		if (p->deadline_us && !p->exited) {
			if (t >= p->deadline_us) {
				p->deadline_us = 0;
				p->timed_out = 1;
				kill(-p->pid, SIGKILL);
			} else if (!first || p->deadline_us < first) {
				first = p->deadline_us;
			}
		}
		if (!p->hold_until)
			continue;
		if (t >= p->hold_until) {
			p->hold_until = 0;
			proc_arm(p);
		} else if (!first || p->hold_until < first) {
			first = p->hold_until;
		}
	}
	return first ? (int)((first - t + 999) / 1000) : -1;
}

void proc_free(struct proc *p)
{
	if (p->log_fd >= 0)
		close(p->log_fd);
	buf_free(&p->stdin_buf);
	free(p->cmd);
	free(p);
}
