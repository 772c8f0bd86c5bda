/* sbx-init: PID 1 inside every sandbox, and the node agent's channel into it.
 *
 *   SBX_CHANNEL_KEY=HEX SBX_SANDBOX_ID=ID sbx-init --channel /run/sbx/channel.sock
 *       [--procs-dir DIR] [--proc-log-max BYTES] [--nproc N] [--spare-shell] [--quiet]
 *
 * It listens on a unix socket in a directory of the sandbox's own disk that
 * is bind-mounted at /run/sbx (runsc --host-uds=create makes the socket a
 * real host socket), so the node agent connects whenever it (re)starts:
 * nothing inside needs to notice a node agent restart. Each connection starts
 * with the v3 handshake (frame.h): the host and sbx-init prove they hold this
 * sandbox's key, so a connection that reached the wrong socket fails. Frames are those of src/lib/frame.h, validated strictly
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
 * sandbox, whatever its image.
 *
 * init.h lists the files sbx-init is made of and what each one holds. */
#include "config.h"
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <dirent.h>
#include <sys/epoll.h>
#include <sys/inotify.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include "init.h"

/* Background processes: output kept per process, finished ones remembered. */
#define PROC_LOG_MAX (16 * 1024 * 1024)
#define MAX_FINISHED 256
#define PROCS_DIR "/var/lib/sbx/procs"
#define PROCS_DIR_FALLBACK "/tmp/.sbx-procs"

static int ep = -1;
static int quiet;
static int is_pid1;
const char *procs_dir = PROCS_DIR;
uint64_t proc_log_max = PROC_LOG_MAX;
long cmd_nproc;
static struct watch w_listen = { W_LISTEN, NULL }, w_signal = { W_SIGNAL, NULL },
	w_chandir = { W_CHANDIR, NULL };

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

static void reap(void)
{
	int status;
	pid_t pid;

	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		spare_reaped(pid);
		for (struct proc *p = procs; p; p = p->next) {
			if (p->pid == pid && !p->exited) {
				p->exited = 1;
				p->status = status;
				proc_service(p);
				break;
			}
		}
	}
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

static void chan_quiesce(void);
static void chan_wake(void);

static void on_one_signal(const struct signalfd_siginfo *si)
{
	if (si->ssi_signo == SIGCHLD)
		return;
	/* the node agent's pause (runsc kill): gVisor cannot checkpoint a
	 * socket bound to the host, so the channel goes before the checkpoint
	 * and comes back after the restore */
	if (si->ssi_signo == SIGUSR1) {
		chan_quiesce();
		return;
	}
	if (si->ssi_signo == SIGUSR2) {
		chan_wake();
		return;
	}
	if (is_pid1) {
		/* PID 1 lives as long as its sandbox: runsc ends it */
		logmsg("ignoring signal %u", si->ssi_signo);
		return;
	}
	logmsg("signal %u: stopping", si->ssi_signo);
	for (struct proc *p = procs; p; p = p->next)
		if (!p->exited)
			kill(-p->pid, SIGKILL);
	exit(0);
}

static void on_signal(int sfd)
{
	/* a batch a read: a second read only to learn that there is no more
	 * would cost a trap into gVisor on every exec's way to EXIT */
	struct signalfd_siginfo si[8];
	ssize_t r;

	do {
		r = read(sfd, si, sizeof(si));
		for (ssize_t i = 0; r > 0 && i < r / (ssize_t)sizeof(si[0]); i++)
			on_one_signal(&si[i]);
	} while (r == (ssize_t)sizeof(si));
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

/* The channel socket is a file in the sandbox's filesystem: a command (or
 * the files API) may remove or replace it. Then the node agent could not
 * reach us after its next restart, so we bind it again at once. Watched with
 * inotify on its directory: no periodic wake-ups. */
static const char *chan_path;
static int chan_lfd = -1, chan_ifd = -1;
static struct stat chan_st;
static int chan_quiet; /* between SIGUSR1 and SIGUSR2: no channel at all */

static int chan_listen(void)
{
	int fd = listen_on(chan_path);

	if (fd < 0)
		return -1;
	if (stat(chan_path, &chan_st) < 0) {
		close(fd);
		return -1;
	}
	if (chan_lfd >= 0) {
		epoll_ctl(ep, EPOLL_CTL_DEL, chan_lfd, NULL);
		close(chan_lfd);
	}
	chan_lfd = fd;
	ep_add(chan_lfd, &w_listen, EPOLLIN);
	return 0;
}

static void chan_watch(void)
{
	char dir[sizeof(((struct sockaddr_un *)0)->sun_path)], *slash;

	snprintf(dir, sizeof(dir), "%s", chan_path);
	slash = strrchr(dir, '/');
	if (!slash)
		return;
	*slash = 0;
	chan_ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (chan_ifd < 0 || inotify_add_watch(chan_ifd, dir[0] ? dir : "/",
					      IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE) < 0) {
		logmsg("inotify on %s: %s (a removed channel socket is not bound again)", dir, strerror(errno));
		if (chan_ifd >= 0)
			close(chan_ifd);
		chan_ifd = -1;
		return;
	}
	ep_add(chan_ifd, &w_chandir, EPOLLIN);
}

static void chan_check(void)
{
	char ev[4096];
	struct stat st;

	while (read(chan_ifd, ev, sizeof(ev)) > 0)
		;
	if (chan_quiet)
		return;
	if (lstat(chan_path, &st) == 0 && st.st_dev == chan_st.st_dev && st.st_ino == chan_st.st_ino)
		return;
	/* whatever is there now is not ours: a socket of someone else, a
	 * symlink, a file, an empty directory */
	if (unlink(chan_path) < 0 && errno == EISDIR)
		rmdir(chan_path);
	if (chan_listen() < 0)
		logmsg("channel %s was replaced and cannot be bound again", chan_path);
	else
		logmsg("channel %s was removed or replaced: bound again", chan_path);
}

/* Every connection and the listening socket close, and the socket file
 * goes last: its absence tells the node agent the channel is down (then it
 * checkpoints). Commands and background processes go on running. */
static void chan_quiesce(void)
{
	for (struct conn *c = conns; c; c = c->next)
		conn_kill(c, "the sandbox is being paused");
	collect();
	chan_quiet = 1;
	if (chan_lfd >= 0) {
		epoll_ctl(ep, EPOLL_CTL_DEL, chan_lfd, NULL);
		close(chan_lfd);
		chan_lfd = -1;
	}
	unlink(chan_path);
	logmsg("channel closed for a pause");
}

static void chan_wake(void)
{
	if (!chan_quiet)
		return;
	chan_quiet = 0;
	if (chan_listen() < 0)
		logmsg("channel %s cannot be bound again after a resume", chan_path);
	else
		logmsg("channel bound again after a resume");
}

/* Descriptors inherited from whoever started us must not reach commands. */
static void close_inherited(void)
{
	struct dirent *d;
	DIR *dir;

	/* INT_MAX, not ~0U: gVisor refuses a last fd above INT_MAX (EINVAL),
	 * and the walk of /proc/self/fd below took ~1 ms of a start there.
	 * The raw call: musl (sbx-init's libc where it is there) has no
	 * wrapper. */
	if (syscall(SYS_close_range, 3, INT_MAX, 0) == 0)
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
	fprintf(stderr, "usage: sbx-init --channel PATH [--procs-dir DIR] [--proc-log-max BYTES] [--nproc N] [--spare-shell] "
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

/* The channel key and sandbox id come in the environment (chanauth.h),
 * which is then cleared of them: no command inherits them. */
static int channel_key_init(void)
{
	const char *key = getenv(SBX_CHAN_KEY_ENV), *id = getenv(SBX_CHAN_ID_ENV);
	size_t n = id ? strlen(id) : 0;

	if (sbx_chan_key_parse(key, chan_key, NULL) < 0) {
		logmsg("%s is missing or not %d hex characters: nobody could talk to us", SBX_CHAN_KEY_ENV,
		       SBX_CHAN_KEY_HEX);
		return -1;
	}
	if (n == 0 || n > SBX_CHAN_ID_MAX || strspn(id, "0123456789abcdefghijklmnopqrstuvwxyz-") != n) {
		logmsg("%s is missing or malformed", SBX_CHAN_ID_ENV);
		return -1;
	}
	memcpy(chan_id, id, n + 1);
	/* the string itself too: /proc/1/environ shows the first one */
	explicit_bzero((char *)key, strlen(key));
	unsetenv(SBX_CHAN_KEY_ENV);
	unsetenv(SBX_CHAN_ID_ENV);
	/* a file the key was rendered into before we started (a Nomad
	 * template in the task's secrets dir, doc/nomad.md): gone before any
	 * command runs */
	key = getenv(SBX_CHAN_KEY_FILE_ENV);
	if (key && key[0] == '/' && unlink(key) < 0 && errno != ENOENT)
		logmsg("cannot remove %s: %s", key, strerror(errno));
	unsetenv(SBX_CHAN_KEY_FILE_ENV);
	return 0;
}

int main(int argc, char **argv)
{
	const char *channel = NULL;
	struct epoll_event evs[64];
	sigset_t set;
	int sfd;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--channel") && i + 1 < argc)
			channel = argv[++i];
		else if (!strcmp(argv[i], "--procs-dir") && i + 1 < argc)
			procs_dir = argv[++i];
		else if (!strcmp(argv[i], "--proc-log-max") && i + 1 < argc)
			proc_log_max = strtoull(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--nproc") && i + 1 < argc)
			cmd_nproc = strtol(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--spare-shell"))
			spare_on = 1;
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
	if (channel_key_init() < 0)
		return 1;
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
	/* listening first: the host's connect (its tries are a ms apart) then
	 * overlaps what follows; nothing is accepted before the loop, and
	 * nothing runs as a child before the signals are set up */
	ep = epoll_create1(EPOLL_CLOEXEC);
	if (ep < 0) {
		logmsg("epoll: %s", strerror(errno));
		return 1;
	}
	chan_path = channel;
	if (chan_listen() < 0)
		return 1;
	is_pid1 = getpid() == 1;
	if (!is_pid1 && prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
		logmsg("PR_SET_CHILD_SUBREAPER: %s", strerror(errno));
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGUSR1);
	sigaddset(&set, SIGUSR2);
	sigprocmask(SIG_BLOCK, &set, NULL);
	sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sfd < 0) {
		logmsg("signalfd: %s", strerror(errno));
		return 1;
	}
	procs_dir_init();
	chan_watch();
	ep_add(sfd, &w_signal, EPOLLIN);
	logmsg("listening on %s (pid %d)", channel, (int)getpid());
	/* children that were already ours (none as PID 1) */
	reap();
	for (;;) {
		int hold = proc_timers(), wait = conns_shrink_wait(hold);
		int n = epoll_wait(ep, evs, (int)(sizeof(evs) / sizeof(evs[0])), wait);
		if (n == 0 && wait != hold)
			conns_shrink(); /* quiet for SHRINK_IDLE_MS */
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
				conn_accept(chan_lfd);
				break;
			case W_CHANDIR:
				chan_check();
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
						/* EPOLLOUT only while something waits */
						conn_flush(c);
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
			}
		}
		collect();
	}
}
