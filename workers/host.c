/* Running host tools for the node side (host.h): one runner for the sandbox
 * steps (mkfs, runsc) and the network plumbing (ip, nft). */
#include "config.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "clock.h"
#include "hash.h"
#include "host.h"
#include "id.h"

#define NETNS_DIR "/run/netns"
#define OUT_MAX_DEFAULT (1u << 20)

static const char *const tool_env[] = { "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C", NULL };

/* ---- small helpers ----------------------------------------------------- */

void host_sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

char *host_read_fd_all(int fd, size_t max)
{
	struct stat st;
	size_t len, got = 0;
	off_t off = 0;
	char *buf;

	if (fstat(fd, &st) < 0)
		return strdup("");
	len = (size_t)st.st_size;
	if (len > max) {
		off = (off_t)(len - max);
		len = max;
	}
	if (!(buf = malloc(len + 1)))
		return NULL;
	while (got < len) {
		ssize_t r = pread(fd, buf + got, len - got, off + (off_t)got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	buf[got] = 0;
	return buf;
}

void host_tail(const char *s, char *out, size_t outsz)
{
	size_t n = s ? strlen(s) : 0, start;
	size_t j = 0;

	while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == ' '))
		n--;
	start = n > outsz - 1 ? n - (outsz - 1) : 0;
	for (size_t i = start; i < n && j + 1 < outsz; i++)
		out[j++] = s[i] == '\n' || s[i] == '\t' ? ' ' : s[i];
	out[j] = 0;
}

void host_file_tail(const char *path, char *out, size_t outsz)
{
	cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	cleanup_free char *s = NULL;

	out[0] = 0;
	if (fd < 0 || !(s = host_read_fd_all(fd, 4096)))
		return;
	host_tail(s, out, outsz);
}

void host_strv_free(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

/* s->h at twice the ids it will hold, at least */
static int idset_rehash(struct host_idset *s)
{
	size_t cap = s->hcap ? s->hcap : 64;
	size_t *h;

	while (cap <= (s->n + 1) * 2)
		cap *= 2;
	if (!(h = calloc(cap, sizeof(*h))))
		return -1;
	for (size_t i = 0; i < s->n; i++) {
		size_t k = sbx_hash_mem(s->v[i], strlen(s->v[i])) & (cap - 1);
		while (h[k])
			k = (k + 1) & (cap - 1);
		h[k] = i + 1;
	}
	free(s->h);
	s->h = h;
	s->hcap = cap;
	return 0;
}

void host_idset_add(struct host_idset *s, const char *id, size_t len)
{
	size_t k;

	if (s->oom || !sbx_id_valid_n(id, len))
		return;
	if ((s->n + 1) * 2 >= s->hcap && idset_rehash(s) < 0) {
		s->oom = true;
		return;
	}
	for (k = sbx_hash_mem(id, len) & (s->hcap - 1); s->h[k]; k = (k + 1) & (s->hcap - 1))
		if (strncmp(s->v[s->h[k] - 1], id, len) == 0)
			return;
	if (s->n == s->cap) {
		size_t ncap = s->cap ? s->cap * 2 : 16;
		char **p = realloc(s->v, ncap * sizeof(*p));
		if (!p) {
			s->oom = true;
			return;
		}
		s->v = p;
		s->cap = ncap;
	}
	if (!(s->v[s->n] = strndup(id, len)))
		s->oom = true;
	else
		s->h[k] = ++s->n;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int host_idset_add_dir(struct host_idset *s, const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;

	if (!d)
		return errno == ENOENT ? 0 : -1;
	while ((e = readdir(d)))
		host_idset_add(s, e->d_name, strlen(e->d_name));
	closedir(d);
	return 0;
}

int host_idset_take(struct host_idset *s, char ***ids, size_t *n)
{
	*ids = NULL;
	*n = 0;
	if (s->oom) {
		host_idset_free(s);
		return -1;
	}
	if (s->n) /* qsort(NULL, 0, ...) is undefined */
		qsort(s->v, s->n, sizeof(*s->v), cmp_str);
	free(s->h);
	*ids = s->v;
	*n = s->n;
	memset(s, 0, sizeof(*s));
	return 0;
}

void host_idset_free(struct host_idset *s)
{
	free(s->h);
	host_strv_free(s->v, s->n);
	memset(s, 0, sizeof(*s));
}

const char *host_tool(const char *name, char *buf, size_t bufsz)
{
	static const char *const dirs[] = { "/usr/sbin", "/sbin", "/usr/bin", "/bin" };

	for (size_t i = 0; i < SBX_ARRAY_LEN(dirs); i++) {
		snprintf(buf, bufsz, "%s/%s", dirs[i], name);
		if (access(buf, X_OK) == 0)
			return buf;
	}
	return NULL;
}

/* ---- running tools ----------------------------------------------------- */

void host_out_free(struct host_out *o)
{
	free(o->out);
	free(o->errs);
	o->out = o->errs = NULL;
}

static int pidfd_open_(pid_t pid)
{
	return (int)syscall(SYS_pidfd_open, pid, 0);
}

/* The child's stdin: /dev/null, or a memfd holding input. */
static int input_fd(const char *input, const char *code, const char *what, sbx_err *err)
{
	cleanup_close int fd = -1;
	size_t len, done = 0;

	if (!input) {
		fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
		return fd < 0 ? sbx_err_sys(err, code, "open input for %s", what) : sbx_steal_fd(&fd);
	}
	fd = memfd_create("sbx-host-in", MFD_CLOEXEC);
	if (fd < 0)
		return sbx_err_sys(err, code, "open input for %s", what);
	len = strlen(input);
	while (done < len) {
		ssize_t w = write(fd, input + done, len - done);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return sbx_err_sys(err, code, "write input for %s", what);
		done += (size_t)w;
	}
	if (lseek(fd, 0, SEEK_SET) < 0)
		return sbx_err_sys(err, code, "rewind input for %s", what);
	return sbx_steal_fd(&fd);
}

/* What the child of host_run needs, read only: under vfork it runs on the
 * caller's memory until it execs. */
struct child {
	const char *exe;
	const char *const *argv;
	int in, out, errs;
	const char *nspath;
	bool launcher;
	pid_t parent;
};

/* The child's side, from fork or vfork to execve: only async-signal-safe
 * calls, nothing written but its own frame. The signal mask and
 * dispositions of the caller are not ours to keep. */
static void __attribute__((noreturn)) child_exec(const struct child *k)
{
	sigset_t none;

	for (int s = 1; s < NSIG; s++) {
		struct sigaction sa;
		if (sigaction(s, NULL, &sa) == 0 && sa.sa_handler != SIG_DFL && sa.sa_handler != SIG_IGN) {
			sa.sa_handler = SIG_DFL;
			sa.sa_flags = 0;
			sigaction(s, &sa, NULL);
		}
	}
	signal(SIGPIPE, SIG_DFL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	/* A tool never outlives its caller: a start killed mid-way must
	 * not go on making things after a destroy has looked. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != k->parent)
		_exit(126);
	/* dup2 clears O_CLOEXEC on the new descriptor */
	if (dup2(k->in, 0) < 0 || dup2(k->out, 1) < 0 || dup2(k->errs, 2) < 0)
		_exit(126);
	if (k->nspath[0]) {
		static const char m0[] = "cannot enter network namespace\n";
		int fd = open(k->nspath, O_RDONLY | O_CLOEXEC);
		if (fd < 0 || setns(fd, CLONE_NEWNET) < 0) {
			(void)!write(2, m0, sizeof(m0) - 1);
			_exit(126);
		}
	}
	if (k->launcher) {
		/* Own session: a signal to the caller's group never reaches
		 * runsc or its gofer. Own mount namespace with a tmpfs over
		 * /proc/sys/net: runsc's "am I in the root netns" test looks
		 * for /proc/sys/net/core/rmem_default, which this kernel has
		 * in every netns (DESIGN.md). Slave, so the host's umounts
		 * still reach the copies this namespace holds. */
		static const char m1[] = "sandbox launcher: setsid/unshare/mount failed\n";
		if (setsid() < 0 || unshare(CLONE_NEWNS) < 0 ||
		    mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) < 0 ||
		    mount("tmpfs", "/proc/sys/net", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
			  "size=4k,mode=0555") < 0) {
			(void)!write(2, m1, sizeof(m1) - 1);
			_exit(126);
		}
	}
	execve(k->exe, (char *const *)k->argv, (char *const *)tool_env);
	_exit(127);
}

/* vfork for a tool: the child shares our memory until it execs, so none
 * of our page tables is copied (fork's copy was ~7 % of the node's CPU in
 * the destroys of a thousand sandboxes, bench/density). Every signal stays
 * blocked until the child has put the dispositions back to default: a
 * handler of ours run in it would run on our memory. The launcher (runsc
 * run: a mount namespace of its own) forks as before. */
static pid_t __attribute__((noinline)) spawn(const struct child *k)
{
	sigset_t all, old;
	pid_t pid;

	if (k->launcher) {
		pid = fork();
		if (pid == 0)
			child_exec(k);
		return pid;
	}
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pid = vfork();
	if (pid == 0)
		child_exec(k);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return pid;
}

int host_run(const char *const argv[], const struct host_run_opts *ro, struct host_out *o, sbx_err *err)
{
	static const struct host_run_opts defaults = HOST_RUN_OPTS(NULL);
	cleanup_close int in = -1, out = -1, errs = -1, pfd = -1;
	char exe_buf[64], nspath[PATH_MAX] = "";
	const char *exe = argv[0], *code;
	int timeout, st = 0;
	size_t out_max;
	long long deadline;
	pid_t pid;

	if (!ro)
		ro = &defaults;
	code = ro->code ? ro->code : "host";
	memset(o, 0, sizeof(*o));
	timeout = ro->timeout_ms > 0 ? ro->timeout_ms : HOST_TOOL_TIMEOUT_MS;
	out_max = ro->out_max ? ro->out_max : OUT_MAX_DEFAULT;
	if (!strchr(argv[0], '/') && !(exe = host_tool(argv[0], exe_buf, sizeof(exe_buf))))
		return sbx_err_set(err, 500, code, "%s not found", argv[0]);
	if (ro->netns && *ro->netns)
		snprintf(nspath, sizeof(nspath), NETNS_DIR "/%s", ro->netns);
	if ((in = input_fd(ro->input, code, argv[0], err)) < 0)
		return -1;
	if (ro->out_fd < 0) {
		out = memfd_create("sbx-host-out", MFD_CLOEXEC);
		errs = memfd_create("sbx-host-err", MFD_CLOEXEC);
		if (out < 0 || errs < 0)
			return sbx_err_sys(err, code, "open output for %s", argv[0]);
	}
	{
		struct child k = { .exe = exe,
				   .argv = argv,
				   .in = in,
				   .out = ro->out_fd >= 0 ? ro->out_fd : out,
				   .errs = ro->out_fd >= 0 ? ro->out_fd : errs,
				   .nspath = nspath,
				   .launcher = ro->launcher,
				   .parent = getpid() };
		pid = spawn(&k);
	}
	if (pid < 0)
		return sbx_err_sys(err, code, "fork");
	pfd = pidfd_open_(pid);
	deadline = sbx_now_ms() + timeout;
	for (;;) {
		pid_t r = waitpid(pid, &st, WNOHANG);
		if (r == pid)
			break;
		if (r < 0 && errno != EINTR)
			return sbx_err_sys(err, code, "waitpid %s", argv[0]);
		if (ro->reap_all) {
			int st2;
			pid_t q;
			bool done = false;
			while ((q = waitpid(-1, &st2, WNOHANG)) > 0) {
				if (q == pid) {
					st = st2;
					done = true;
				}
			}
			if (done)
				break;
		}
		if (sbx_now_ms() >= deadline) {
			/* Its own group when launched with setsid. */
			if (ro->launcher)
				kill(-pid, SIGKILL);
			kill(pid, SIGKILL);
			while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
				;
			return sbx_err_set(err, 500, code, "%s did not finish within %d ms", argv[0], timeout);
		}
		if (pfd >= 0) {
			struct pollfd p = { pfd, POLLIN, 0 };
			poll(&p, 1, ro->reap_all ? 5 : 50);
		} else {
			host_sleep_ms(5);
		}
	}
	o->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	if (ro->out_fd < 0) {
		o->out = host_read_fd_all(out, out_max);
		o->errs = host_read_fd_all(errs, out_max);
		if (!o->out || !o->errs) {
			host_out_free(o);
			return sbx_err_set(err, 500, code, "out of memory");
		}
	}
	return 0;
}

int host_run_ok(const char *step, const char *const argv[], const struct host_run_opts *ro,
		struct host_out *o, sbx_err *err)
{
	char tail[HOST_TAIL_MAX];

	if (host_run(argv, ro, o, err) < 0)
		return sbx_err_ctx(err, "%s", step);
	if (o->status != 0) {
		host_tail(o->errs && *o->errs ? o->errs : o->out, tail, sizeof(tail));
		sbx_err_set(err, 500, ro && ro->code ? ro->code : "host", "%s: %s exited %d: %s", step,
			    argv[0], o->status, tail);
		host_out_free(o);
		return -1;
	}
	return 0;
}
