/* The spare shell (--spare-shell): a `/bin/sh -s` started ahead of the next
 * EXEC of `/bin/sh -c CMD`, in the cwd and environment of the last one, so
 * that the next such command with the same cwd and environment runs in a
 * shell that has already started. Under gVisor starting dash is most of an
 * exec of `true`: vfork+execve of `sh -c true` p50 12 ms inside a sandbox,
 * the same command written to a started `sh -s` 1.2 ms (doc/idle.md).
 *
 * The command goes to the shell's stdin, a pipe, in one write of at most
 * PIPE_BUF bytes (atomic), and the write end is closed: dash reads its input
 * in 8 KiB blocks, so its first read takes the whole command and what the
 * command reads from stdin is an empty pipe, as /dev/null would be. Only
 * dash: bash reads a script on a pipe a line at a time and would leave the
 * rest of the command to the command's own stdin (`cat; echo hi`).
 *
 * What a user can tell: `ps` shows `/bin/sh -s` for the shell (not `/bin/sh
 * -c CMD`) and one more, the next spare; the shell's stdin is a pipe at EOF,
 * not /dev/null. A spare is used once, never given a second command; it is
 * not counted as something running (STATUS), so a sandbox with only a spare
 * is idle. */
#include "config.h"
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "init.h"

int spare_on;

static struct {
	pid_t pid; /* 0: none */
	int fd_cmd, fd_out, fd_err;
	char *cwd;
	char *env; /* its environment: each string with its NUL */
	size_t env_len;
} sp = { 0, -1, -1, -1, NULL, NULL, 0 };

pid_t spare_pid(void)
{
	return sp.pid;
}

/* Lets the spare go (closing its pipes makes a waiting dash read EOF and
 * exit; it is reaped as any orphan), keeping the plan for the next. */
static void spare_close(void)
{
	if (sp.fd_cmd >= 0)
		close(sp.fd_cmd);
	if (sp.fd_out >= 0)
		close(sp.fd_out);
	if (sp.fd_err >= 0)
		close(sp.fd_err);
	sp.pid = 0;
	sp.fd_cmd = sp.fd_out = sp.fd_err = -1;
}

/* ... and the plan: no spare until the next EXEC that fits. */
static void spare_forget(void)
{
	spare_close();
	free(sp.cwd);
	free(sp.env);
	sp.cwd = sp.env = NULL;
	sp.env_len = 0;
}

void spare_reaped(pid_t pid)
{
	if (pid == sp.pid && pid > 0)
		spare_close();
}

/* An EXEC a spare can serve: `/bin/sh -c CMD`, CMD short enough for one
 * atomic write, nothing on stdin, no terminal, not in the background. */
static int spare_fits(const struct sbx_exec_req *req)
{
	return spare_on && !(req->flags & (SBX_EXEC_STDIN | SBX_EXEC_PTY | SBX_EXEC_BACKGROUND)) &&
	       req->argc == 3 && !strcmp(req->argv[0], "/bin/sh") && !strcmp(req->argv[1], "-c") &&
	       strlen(req->argv[2]) <= PIPE_BUF;
}

static char *env_flat(char **env, size_t *len)
{
	size_t n = 0;
	char *s, *q;

	for (char **e = env; *e; e++)
		n += strlen(*e) + 1;
	s = malloc(n ? n : 1);
	if (!s)
		return NULL;
	q = s;
	for (char **e = env; *e; e++) {
		size_t l = strlen(*e) + 1;
		memcpy(q, *e, l);
		q += l;
	}
	*len = n;
	return s;
}

static int spare_matches(const struct sbx_exec_req *req, char **env)
{
	size_t n = 0;
	const char *q = sp.env;

	if (!sp.cwd || strcmp(req->cwd, sp.cwd))
		return 0;
	for (char **e = env; *e; e++) {
		size_t l = strlen(*e) + 1;
		if (n + l > sp.env_len || memcmp(q + n, *e, l))
			return 0;
		n += l;
	}
	return n == sp.env_len;
}

/* Starts the planned spare. Failing is never an error: the next EXEC
 * starts cold. */
static void spare_start(void)
{
	static const char *const sh_argv[] = { "/bin/sh", "-s", NULL };
	struct sbx_exec_req sreq = { .cwd = sp.cwd, .argc = 2, .argv = (const char **)sh_argv };
	char real[PATH_MAX], *base, **envv = NULL;
	int pin[2] = { -1, -1 }, pout[2] = { -1, -1 }, perr[2] = { -1, -1 };
	struct child_err ce;
	size_t k = 0;
	pid_t pid;

	/* dash only (above); the image may have another /bin/sh */
	if (!realpath("/bin/sh", real) || !(base = strrchr(real, '/')) || strcmp(base + 1, "dash"))
		goto fail;
	for (size_t off = 0; off < sp.env_len; off += strlen(sp.env + off) + 1)
		k++;
	if (!(envv = calloc(k + 1, sizeof(*envv))))
		goto fail;
	k = 0;
	for (size_t off = 0; off < sp.env_len; off += strlen(sp.env + off) + 1)
		envv[k++] = sp.env + off;
	if (proc_pipes(pin, pout, perr) < 0)
		goto fail;
	pid = proc_spawn(&sreq, envv, pin[0], pout[1], perr[1], -1, &ce);
	if (pid < 0)
		goto fail;
	free(envv);
	close(pin[0]);
	close(pout[1]);
	close(perr[1]);
	sp.pid = pid;
	sp.fd_cmd = pin[1];
	sp.fd_out = pout[0];
	sp.fd_err = perr[0];
	/* as proc_start sets a command's: here, off the next EXEC's way */
	fcntl(sp.fd_out, F_SETFL, O_NONBLOCK);
	fcntl(sp.fd_err, F_SETFL, O_NONBLOCK);
	return;
fail:
	free(envv);
	proc_pipes_close(pin, pout, perr);
	spare_forget();
}

/* The EXEC runs in the spare when it matches: returns 1 with the command
 * written to it and its pid and pipes in *pid, out[0], err[0] (now the
 * caller's); 0 when it starts cold. */
int spare_take(const struct sbx_exec_req *req, char **env, pid_t *pid, int out[2], int err[2])
{
	const char *cmd;
	size_t len;

	if (!sp.pid || !spare_fits(req) || !spare_matches(req, env))
		return 0;
	cmd = req->argv[2];
	len = strlen(cmd);
	/* EPIPE: it died before us noticing (reaped later): start cold */
	if (len && write(sp.fd_cmd, cmd, len) != (ssize_t)len) {
		kill(sp.pid, SIGKILL);
		spare_close();
		return 0;
	}
	*pid = sp.pid;
	out[0] = sp.fd_out;
	err[0] = sp.fd_err;
	sp.fd_out = sp.fd_err = -1;
	spare_close();
	return 1;
}

/* After an EXEC started (from the spare or cold): the next one's spare is
 * planned for its cwd and environment (one for others is dropped), and
 * started once no command runs (spare_idle): its start, ~10 ms of the
 * sandbox's CPU, would slow the command down. */
void spare_next(const struct sbx_exec_req *req, char **env)
{
	if (!spare_fits(req) || spare_matches(req, env))
		return;
	if (sp.pid)
		kill(sp.pid, SIGKILL);
	spare_forget();
	if (!(sp.env = env_flat(env, &sp.env_len)) || !(sp.cwd = strdup(req->cwd)))
		spare_forget();
}

void spare_idle(void)
{
	if (sp.pid || !sp.cwd)
		return;
	for (struct proc *p = procs; p; p = p->next)
		if (!p->done && !p->background)
			return;
	spare_start();
}
