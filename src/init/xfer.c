/* Streams that are not processes (struct xfer): a file operation, an
 * attachment to a background process, or a PSTDIN waiting for its bytes to be
 * written. Their start, their service when credit or output arrives, and their
 * end (EXIT 0 or an errno); main.c's collect() frees them. */
#include "config.h"
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>
#include <dirent.h>
#include "init.h"

struct xfer *xfers;

struct xfer *xfer_new(struct conn *c, uint32_t stream, enum xkind kind)
{
	struct xfer *x = calloc(1, sizeof(*x));

	if (!x) {
		conn_kill(c, "out of memory");
		return NULL;
	}
	x->conn = c;
	x->stream = stream;
	x->kind = kind;
	x->fd = -1;
	x->next = xfers;
	xfers = x;
	return x;
}

/* Lets go of what the stream holds; a write that was not renamed into
 * place leaves nothing behind. Freed by collect(). */
void xfer_release(struct xfer *x)
{
	if (x->fd >= 0)
		close(x->fd);
	x->fd = -1;
	if (x->dir)
		closedir(x->dir);
	x->dir = NULL;
	if (x->tmp)
		unlink(x->tmp);
	free(x->tmp);
	free(x->path);
	x->tmp = x->path = NULL;
	if (x->proc)
		x->proc->refs--;
	x->proc = NULL;
	x->done = 1;
}

void xfer_end(struct xfer *x, int code, int sig, uint8_t flags)
{
	if (x->done)
		return;
	send_exit(x->conn, x->stream, code, sig, flags);
	xfer_release(x);
}

int errno_code(int e)
{
	return e > 0 && e < 256 ? e : EIO;
}

void xfer_fail(struct xfer *x, int e)
{
	xfer_end(x, errno_code(e), 0, SBX_EXIT_ERRNO);
}

/* The host gave up on the stream (a SIGNAL on it): a write's temp file
 * goes, a read, list or attachment stops. A PSTDIN keeps its place: its
 * bytes may be on their way into the pipe, and it is answered then. */
void xfer_cancel(struct xfer *x)
{
	if (x->kind != X_PSTDIN)
		xfer_fail(x, ECANCELED);
}

/* The answer of a one-shot operation: EXIT 0, or the errno. */
void answer(struct conn *c, uint32_t stream, int e)
{
	send_exit(c, stream, e ? errno_code(e) : 0, 0, e ? SBX_EXIT_ERRNO : 0);
}

void xfer_service(struct xfer *x)
{
	if (x->done || x->conn->dead)
		return;
	switch (x->kind) {
	case X_READ:
		read_service(x);
		break;
	case X_LIST:
		list_service(x);
		break;
	case X_ATTACH:
		attach_service(x);
		break;
	case X_PSTDIN:
		pstdin_service(x);
		break;
	case X_WRITE:
		break;
	}
}

void proc_xfers_service(struct proc *p)
{
	for (struct xfer *x = xfers; x; x = x->next)
		if (!x->done && x->proc == p)
			xfer_service(x);
}
