#include "config.h"
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "cleanup.h"
#include "clock.h"
#include "daemon.h"
#include "log.h"

volatile sig_atomic_t sbx_child_stop;
volatile sig_atomic_t sbx_child_replaced;

long sbx_pidfile_read(const char *path)
{
	char buf[32];
	cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;
	char *end;
	long pid;

	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	pid = strtol(buf, &end, 10);
	if (pid <= 0 || (*end && *end != '\n'))
		return -1;
	return pid;
}

int sbx_pidfile_create(const char *path, sbx_err *err)
{
	char tmp[4096], buf[32];
	int n;

	/* The file appears complete or not at all: written under a private
	 * name, then linked into place (link fails with EEXIST atomically). */
	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.%ld.tmp", path, (long)getpid()) >= sizeof(tmp))
		return sbx_err_set(err, 0, "pidfile", "pidfile path too long");
	{
		cleanup_close int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (fd < 0)
			return sbx_err_sys(err, "pidfile", "create %s", tmp);
		n = snprintf(buf, sizeof(buf), "%ld\n", (long)getpid());
		if (write(fd, buf, (size_t)n) != n) {
			unlink(tmp);
			return sbx_err_sys(err, "pidfile", "write %s", tmp);
		}
	}
	for (int attempt = 0; attempt < 2; attempt++) {
		long pid;

		if (link(tmp, path) == 0) {
			unlink(tmp);
			return 0;
		}
		if (errno != EEXIST) {
			sbx_err_sys(err, "pidfile", "create %s", path);
			unlink(tmp);
			return -1;
		}
		pid = sbx_pidfile_read(path);
		if (pid > 0 && (kill((pid_t)pid, 0) == 0 || errno == EPERM)) {
			unlink(tmp);
			return sbx_err_set(err, 0, "pidfile", "already running (pid %ld, %s)", pid, path);
		}
		log_warnx("removing stale pidfile %s (pid %ld is gone)", path, pid);
		if (unlink(path) < 0 && errno != ENOENT) {
			sbx_err_sys(err, "pidfile", "unlink stale %s", path);
			unlink(tmp);
			return -1;
		}
	}
	unlink(tmp);
	return sbx_err_set(err, 0, "pidfile", "%s: could not be created", path);
}

void sbx_pidfile_remove(const char *path)
{
	if (sbx_pidfile_read(path) == (long)getpid())
		unlink(path);
}

int sbx_daemonize(sbx_err *err)
{
	pid_t pid;
	int fd;

	pid = fork();
	if (pid < 0)
		return sbx_err_sys(err, "daemon", "fork");
	if (pid > 0)
		_exit(0);
	if (setsid() < 0)
		return sbx_err_sys(err, "daemon", "setsid");
	pid = fork();
	if (pid < 0)
		return sbx_err_sys(err, "daemon", "fork");
	if (pid > 0)
		_exit(0);
	if (chdir("/") < 0)
		return sbx_err_sys(err, "daemon", "chdir /");
	fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return sbx_err_sys(err, "daemon", "open /dev/null");
	dup2(fd, 0);
	dup2(fd, 1);
	dup2(fd, 2);
	if (fd > 2)
		close(fd);
	return 0;
}

/* ---- the supervisor ---- */

static volatile sig_atomic_t got_chld, got_hup, got_term, got_alrm;

static void on_signal(int sig)
{
	switch (sig) {
	case SIGCHLD: got_chld = 1; break;
	case SIGHUP: got_hup = 1; break;
	case SIGTERM:
	case SIGINT: got_term++; break;
	case SIGALRM: got_alrm = 1; break;
	}
}

static void on_child_stop(int sig)
{
	(void)sig;
	sbx_child_replaced = 0; /* a drain ends what a reload would have handed over */
	sbx_child_stop = 1;
}

static void on_child_replace(int sig)
{
	(void)sig;
	sbx_child_replaced = 1;
	sbx_child_stop = 1;
}

void sbx_child_signals(void)
{
	struct sigaction sa;
	sigset_t none;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_child_stop;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sa.sa_handler = on_child_replace;
	sigaction(SIGUSR1, &sa, NULL);
	sa.sa_handler = SIG_DFL;
	sigaction(SIGCHLD, &sa, NULL);
	sigaction(SIGALRM, &sa, NULL);
	sa.sa_handler = SIG_IGN;
	sigaction(SIGHUP, &sa, NULL);
	sigaction(SIGPIPE, &sa, NULL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	/* a master killed outright must not leave children serving alone */
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	if (getppid() == 1)
		sbx_child_stop = 1;
}

struct slot {
	int role;
	int index;
	pid_t pid;
	long long started_ms;
	long long restart_at_ms; /* 0: not waiting */
	long delay_ms;
	bool retire;  /* asked to go away (reload, shrink): do not count as a crash */
	bool takeover; /* its last child exited SBX_EXIT_HANDED_OVER: the next one
	                * must run, even in a drain (sbx_role.hands_over) */
};

static int count_for(const struct sbx_role *r, const sbx_config *cfg)
{
	return r->count_setting ? (int)sbx_cfg_int(cfg, r->count_setting) : 1;
}

/* stopping: the child starts with sbx_child_stop set (a successor started
 * in a drain only to take over what its predecessor left, and end it). */
static pid_t spawn(const struct sbx_super *s, const sbx_config *cfg, struct slot *sl, bool stopping)
{
	const struct sbx_role *r = &s->roles[sl->role];
	pid_t pid = fork();

	if (pid < 0) {
		/* try again later, backing off like a child that died young */
		log_warn("fork %s", r->name);
		sl->pid = 0;
		sl->restart_at_ms = sbx_now_ms() + sl->delay_ms;
		sl->delay_ms *= 2;
		if (sl->delay_ms > sbx_cfg_int(cfg, "worker_restart_max_ms"))
			sl->delay_ms = sbx_cfg_int(cfg, "worker_restart_max_ms");
		return -1;
	}
	if (pid == 0) {
		char prog[64];
		sbx_child_signals();
		if (stopping)
			sbx_child_stop = 1;
		snprintf(prog, sizeof(prog), "%s-%s", s->prog, r->name);
		sbx_log_init(prog, sbx_cfg_str(cfg, "log_file"), sbx_cfg_str(cfg, "log_level"));
		_exit(r->run(cfg, sl->index, s->ctx));
	}
	sl->pid = pid;
	sl->started_ms = sbx_now_ms();
	sl->restart_at_ms = 0;
	sl->retire = false;
	sl->takeover = false;
	log_info("started %s #%d (pid %d)%s", r->name, sl->index, (int)pid,
		 stopping ? ", stopping at once: it takes over what its predecessor left, and ends it" : "");
	return pid;
}

/* Slots are kept in a fixed array large enough for the biggest counts. */
#define MAX_SLOTS 1024

int sbx_super_run(const struct sbx_super *s, sbx_config *cfg)
{
	static struct slot slots[MAX_SLOTS];
	int nslots = 0, status = 0;
	struct sigaction sa;
	sigset_t block, waitmask;
	long long drain_deadline = 0;
	bool draining = false;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigemptyset(&block);
	sigaddset(&block, SIGCHLD);
	sigaddset(&block, SIGHUP);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGALRM);
	sigprocmask(SIG_BLOCK, &block, &waitmask);
	sigdelset(&waitmask, SIGCHLD);
	sigdelset(&waitmask, SIGHUP);
	sigdelset(&waitmask, SIGTERM);
	sigdelset(&waitmask, SIGINT);
	sigdelset(&waitmask, SIGALRM);
	sigaction(SIGCHLD, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGALRM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	for (int r = 0; r < s->nroles; r++)
		for (int i = 0; i < count_for(&s->roles[r], cfg) && nslots < MAX_SLOTS; i++) {
			slots[nslots] = (struct slot){ .role = r, .index = i,
						       .delay_ms = sbx_cfg_int(cfg, "worker_restart_min_ms") };
			spawn(s, cfg, &slots[nslots], false);
			nslots++;
		}

	for (;;) {
		long long now = sbx_now_ms(), next_wake = 0;
		int alive = 0;

		if (got_chld) {
			pid_t pid;
			int st;
			got_chld = 0;
			while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
				for (int i = 0; i < nslots; i++) {
					struct slot *sl = &slots[i];
					if (sl->pid != pid)
						continue;
					sl->pid = 0;
					if (WIFEXITED(st) && WEXITSTATUS(st) == SBX_EXIT_HANDED_OVER &&
					    s->roles[sl->role].hands_over && sl->index >= 0) {
						/* its successor takes over what it left: at once,
						 * whatever asked it to go (a drain too) */
						log_info("%s #%d (pid %d) exited, leaving work to its successor",
							 s->roles[sl->role].name, sl->index, (int)pid);
						sl->takeover = true;
						sl->restart_at_ms = now;
						sl->delay_ms = sbx_cfg_int(cfg, "worker_restart_min_ms");
						break;
					}
					if (draining || sl->retire) {
						log_info("%s #%d (pid %d) exited", s->roles[sl->role].name, sl->index,
							 (int)pid);
						sl->restart_at_ms = sl->retire && !draining ? now : 0;
						break;
					}
					if (WIFSIGNALED(st))
						log_warnx("%s #%d (pid %d) died of signal %d", s->roles[sl->role].name,
							  sl->index, (int)pid, WTERMSIG(st));
					else
						log_warnx("%s #%d (pid %d) exited with status %d",
							  s->roles[sl->role].name, sl->index, (int)pid, WEXITSTATUS(st));
					/* back off while it keeps dying young; forgive a long life */
					if (now - sl->started_ms > 10000)
						sl->delay_ms = sbx_cfg_int(cfg, "worker_restart_min_ms");
					sl->restart_at_ms = now + sl->delay_ms;
					log_info("restarting %s #%d in %ld ms", s->roles[sl->role].name, sl->index,
						 sl->delay_ms);
					sl->delay_ms *= 2;
					if (sl->delay_ms > sbx_cfg_int(cfg, "worker_restart_max_ms"))
						sl->delay_ms = sbx_cfg_int(cfg, "worker_restart_max_ms");
					break;
				}
			}
		}
		if (got_term) {
			if (!draining) {
				draining = true;
				drain_deadline = now + sbx_cfg_int(cfg, "drain_timeout") * 1000;
				log_info("draining: asking %d children to finish", nslots);
				for (int i = 0; i < nslots; i++)
					if (slots[i].pid > 0)
						kill(slots[i].pid, SIGTERM);
			}
			if (got_term > 1) {
				log_warnx("second stop signal: exiting now");
				for (int i = 0; i < nslots; i++)
					if (slots[i].pid > 0)
						kill(slots[i].pid, SIGKILL);
				status = 1;
				break;
			}
		}
		if (got_hup && !draining) {
			sbx_config *nc = NULL;
			sbx_err err = SBX_ERR_INIT;
			got_hup = 0;
			if (sbx_config_load(s->config_path, &nc, &err) < 0 ||
			    sbx_config_check(nc, s->who, &err) < 0) {
				log_warnx("reload refused, keeping the running config: %s", err.msg);
				sbx_config_free(nc);
			} else {
				int n = 0;
				sbx_config_diff_nonreloadable(cfg, nc, s->who);
				sbx_config_free(cfg);
				cfg = nc;
				sbx_log_init(s->prog, sbx_cfg_str(cfg, "log_file"), sbx_cfg_str(cfg, "log_level"));
				if (s->reloaded)
					s->reloaded(cfg, s->ctx);
				/* retire every child; each slot respawns with the new config */
				for (int i = 0; i < nslots; i++) {
					struct slot *sl = &slots[i];
					sl->delay_ms = sbx_cfg_int(cfg, "worker_restart_min_ms");
					if (sl->index >= count_for(&s->roles[sl->role], cfg)) {
						sl->retire = true;
						sl->restart_at_ms = 0;
						if (sl->pid > 0)
							kill(sl->pid, SIGTERM);
						sl->index = -1; /* removed below once it has gone */
						continue;
					}
					if (sl->pid > 0) {
						sl->retire = true;
						kill(sl->pid, s->roles[sl->role].hands_over ? SIGUSR1 : SIGTERM);
					}
				}
				/* grow */
				for (int r = 0; r < s->nroles; r++) {
					int have = 0;
					for (int i = 0; i < nslots; i++)
						if (slots[i].role == r && slots[i].index >= 0)
							have++;
					for (int i = have; i < count_for(&s->roles[r], cfg) && nslots < MAX_SLOTS; i++) {
						slots[nslots] = (struct slot){ .role = r, .index = i,
									       .delay_ms = sbx_cfg_int(cfg, "worker_restart_min_ms") };
						spawn(s, cfg, &slots[nslots], false);
						nslots++;
						n++;
					}
				}
				log_info("config reloaded (%d children added)", n);
			}
		}
		got_hup = 0;
		/* compact removed slots whose process has gone */
		for (int i = 0; i < nslots;) {
			if (slots[i].index < 0 && slots[i].pid == 0) {
				slots[i] = slots[--nslots];
				continue;
			}
			i++;
		}
		for (int i = 0; i < nslots; i++) {
			struct slot *sl = &slots[i];
			if (sl->pid > 0) {
				alive++;
				continue;
			}
			if (draining && sl->takeover) {
				spawn(s, cfg, sl, true);
				if (sl->pid > 0)
					alive++;
				continue;
			}
			if (draining || sl->index < 0)
				continue;
			if (sl->restart_at_ms && sl->restart_at_ms <= now)
				spawn(s, cfg, sl, false);
			if (sl->pid > 0)
				alive++;
			else if (sl->restart_at_ms && (!next_wake || sl->restart_at_ms < next_wake))
				next_wake = sl->restart_at_ms;
		}
		if (draining) {
			if (alive == 0) {
				log_info("drained");
				break;
			}
			if (now >= drain_deadline) {
				log_warnx("drain timeout: killing %d children", alive);
				for (int i = 0; i < nslots; i++)
					if (slots[i].pid > 0)
						kill(slots[i].pid, SIGKILL);
				drain_deadline = now + 60000;
			}
			if (!next_wake || drain_deadline < next_wake)
				next_wake = drain_deadline;
		}
		if (got_chld || got_term > (draining ? 1 : 0) || got_hup)
			continue;
		if (next_wake) {
			long long d = next_wake - sbx_now_ms();
			struct itimerval it = { { 0, 0 }, { 0, 0 } };
			if (d <= 0)
				continue;
			it.it_value.tv_sec = d / 1000;
			it.it_value.tv_usec = (d % 1000) * 1000;
			setitimer(ITIMER_REAL, &it, NULL);
		}
		got_alrm = 0;
		if (!got_chld && !got_hup && !(got_term && !draining))
			sigsuspend(&waitmask);
	}
	sbx_config_free(cfg);
	return status;
}
