/* Background processes, reached by pid from any connection: ATTACH replays
 * (and follows) a process's output log, PROCS lists them, PSTDIN writes to a
 * process's stdin and PSIGNAL signals its process group. */
#include "config.h"
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>
#include "init.h"

/* A background process by pid: the running one, else the newest finished
 * one (pids are reused; the list is newest first). */
static struct proc *bg_find(uint32_t pid)
{
	struct proc *last = NULL;

	for (struct proc *p = procs; p; p = p->next) {
		if (!p->background || (uint32_t)p->pid != pid)
			continue;
		if (!p->done)
			return p;
		if (!last)
			last = p;
	}
	return last;
}

/* ATTACH: the log from the stream's position, as STDOUT/STDERR frames
 * (consecutive records of one kind merged), within credit; at the end of
 * the log it waits for more (follow), or ends. */
void attach_service(struct xfer *x)
{
	static uint8_t chunk[READ_CHUNK], fb[READ_CHUNK];
	struct conn *c = x->conn;
	struct proc *p = x->proc;

	while (!x->done && !c->dead && !c->congested) {
		size_t want, i = 0, fl = 0;
		uint8_t fkind = 0;
		ssize_t n;

		if (x->fpos >= p->log_size) {
			uint8_t tr = p->truncated ? SBX_EXIT_TRUNCATED : 0;
			if (p->done)
				xfer_end(x, p->code, p->sig, tr | (p->timed_out ? SBX_EXIT_TIMED_OUT : 0));
			else if (!x->follow)
				xfer_end(x, 0, 0, tr | SBX_EXIT_DETACHED);
			return; /* following: proc_log() calls back */
		}
		if (x->credit == 0 && x->skip == 0)
			return;
		want = p->log_size - x->fpos < READ_CHUNK ? (size_t)(p->log_size - x->fpos) : READ_CHUNK;
		n = pread(p->log_fd, chunk, want, (off_t)x->fpos);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			xfer_fail(x, n < 0 ? errno : EIO);
			return;
		}
		while (i < (size_t)n) {
			size_t take;
			if (x->rec_left == 0) {
				uint32_t len;
				if ((size_t)n - i < LOG_REC_HDR)
					break;
				len = sbx_get32(chunk + i + 1);
				if ((chunk[i] != 1 && chunk[i] != 2) || len == 0) {
					xfer_fail(x, EIO); /* not a log we wrote */
					return;
				}
				x->rec_kind = chunk[i];
				x->rec_left = len;
				i += LOG_REC_HDR;
				x->fpos += LOG_REC_HDR;
				continue;
			}
			take = (size_t)n - i;
			if (take > x->rec_left)
				take = (size_t)x->rec_left;
			if (x->skip) {
				if (take > x->skip)
					take = (size_t)x->skip;
				x->skip -= take;
			} else {
				if (take > x->credit)
					take = (size_t)x->credit;
				if (take == 0)
					break;
				if (fl && fkind != x->rec_kind) {
					conn_send(c, fkind == 2 ? SBX_F_STDERR : SBX_F_STDOUT, x->stream, fb, fl);
					fl = 0;
				}
				fkind = x->rec_kind;
				memcpy(fb + fl, chunk + i, take);
				fl += take;
				x->credit -= take;
			}
			x->rec_left -= take;
			i += take;
			x->fpos += take;
		}
		if (fl)
			conn_send(c, fkind == 2 ? SBX_F_STDERR : SBX_F_STDOUT, x->stream, fb, fl);
		note_congestion(c);
		if (i == 0)
			return; /* cannot happen with a log of whole records */
	}
}

/* PSTDIN: answered once its bytes reached the pipe (or stdin was closed,
 * when it asked for that); EPIPE when the pipe went away first. */
void pstdin_service(struct xfer *x)
{
	struct proc *p = x->proc;

	if (x->upto <= p->stdin_written && (!x->close_after || p->fd_in < 0))
		xfer_end(x, 0, 0, 0);
	else if (p->fd_in < 0 || p->done)
		xfer_fail(x, EPIPE);
}

void on_attach(struct conn *c, uint32_t stream, const struct sbx_attach_req *req)
{
	struct proc *p = bg_find(req->pid);
	struct xfer *x;

	if (!p) {
		answer(c, stream, ESRCH);
		return;
	}
	x = xfer_new(c, stream, X_ATTACH);
	if (!x)
		return;
	x->proc = p;
	p->refs++;
	x->follow = (req->flags & SBX_ATTACH_FOLLOW) != 0;
	x->credit = req->credit;
	x->skip = req->offset;
	attach_service(x);
}

void on_procs(struct conn *c, uint32_t stream)
{
	char line[SBX_PROC_LINE_MAX];

	for (struct proc *p = procs; p; p = p->next) {
		struct sbx_proc_info pi = { 0 };
		long n;

		if (!p->background)
			continue;
		pi.pid = (uint32_t)p->pid;
		pi.running = !p->done;
		pi.exit_code = p->done ? p->code : 0;
		pi.signal = p->done ? (uint32_t)p->sig : 0;
		pi.flags = (uint8_t)((p->truncated ? SBX_EXIT_TRUNCATED : 0) |
				     (p->done && p->timed_out ? SBX_EXIT_TIMED_OUT : 0));
		pi.started_ms = p->started_ms;
		pi.ended_ms = p->done ? p->ended_ms : 0;
		pi.bytes = p->out_bytes;
		pi.cmd = p->cmd;
		pi.cmd_len = strlen(p->cmd);
		n = sbx_proc_info_encode(&pi, line, sizeof(line));
		if (n > 0)
			conn_send(c, SBX_F_STDOUT, stream, line, (size_t)n);
		else
			logmsg("pid %d cannot be listed", (int)p->pid);
	}
	answer(c, stream, 0);
}

void on_pstdin(struct conn *c, uint32_t stream, uint32_t pid, const uint8_t *data, size_t len)
{
	struct proc *p = bg_find(pid);
	struct xfer *x;

	if (!p) {
		answer(c, stream, ESRCH);
		return;
	}
	if (p->done || p->fd_in < 0 || p->stdin_close) {
		/* closing what is closed already is done */
		answer(c, stream, len == 0 && (p->fd_in < 0 || p->stdin_close) ? 0 : EPIPE);
		return;
	}
	if (len) {
		/* every process's stdin buffer is bounded, whoever writes to it */
		if (buf_pending(&p->stdin_buf) + len > SBX_STDIN_WINDOW) {
			answer(c, stream, EAGAIN);
			return;
		}
		if (buf_reserve(&p->stdin_buf, len) < 0) {
			answer(c, stream, ENOMEM);
			return;
		}
		memcpy(p->stdin_buf.p + p->stdin_buf.len, data, len);
		p->stdin_buf.len += len;
	} else {
		p->stdin_close = 1;
	}
	x = xfer_new(c, stream, X_PSTDIN);
	if (!x)
		return;
	x->proc = p;
	p->refs++;
	x->upto = p->stdin_written + buf_pending(&p->stdin_buf);
	x->close_after = len == 0;
	proc_stdin_flush(p); /* answers x when it can */
	proc_arm(p);
}

void on_presize(struct conn *c, uint32_t stream, uint32_t pid, uint16_t cols, uint16_t rows)
{
	struct proc *p = bg_find(pid);

	answer(c, stream, !p || p->exited ? ESRCH : proc_resize(p, cols, rows));
}

void on_psignal(struct conn *c, uint32_t stream, uint32_t pid, uint32_t sig)
{
	struct proc *p = bg_find(pid);

	if (!p || p->exited)
		answer(c, stream, ESRCH);
	else
		answer(c, stream, kill(-p->pid, (int)sig) < 0 ? errno : 0);
}
