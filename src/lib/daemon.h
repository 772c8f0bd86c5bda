/* Daemon plumbing shared by sbx-api and sbx-worker: an exclusive pidfile
 * with a stale check, and a pre-forking supervisor with pgbouncer's signal
 * contract:
 *   SIGHUP   reload the config; a bad one is refused and the old one kept;
 *            children are replaced so they pick the new one up (a role
 *            that hands over is told so, with SIGUSR1, and may leave work
 *            running for its successor: sbx_role.hands_over).
 *   SIGTERM  drain: children finish their current work and exit; after
 *   SIGINT   drain_timeout they are killed. A second SIGTERM exits at once.
 * Signal handlers only set flags; the loop waits in sigsuspend. */
#ifndef SBX_DAEMON_H
#define SBX_DAEMON_H

#include <signal.h>
#include <stdbool.h>
#include "err.h"
#include "settings.h"

int sbx_pidfile_create(const char *path, sbx_err *err);
void sbx_pidfile_remove(const char *path);
/* pid recorded in the file, or -1. */
long sbx_pidfile_read(const char *path);

/* Detach (fork, setsid, fork, stdio to /dev/null); the caller then writes
 * its pidfile, so the file names the process that really runs. */
int sbx_daemonize(sbx_err *err);

/* Set by the children's own handlers: the child should finish and exit. */
extern volatile sig_atomic_t sbx_child_stop;
/* Set with sbx_child_stop by SIGUSR1, which the master sends to a role that
 * hands over when a reload replaces it: a successor with the new config
 * starts as soon as this child has exited, so the child may leave it what
 * it can take over (the node agent: its warm pool) and exit with
 * SBX_EXIT_HANDED_OVER. A SIGTERM (a drain) after it clears it. */
extern volatile sig_atomic_t sbx_child_replaced;
/* The exit status of a child that left work for its successor. */
#define SBX_EXIT_HANDED_OVER 3
/* Installs SIGTERM/SIGINT -> sbx_child_stop and SIGUSR1 -> sbx_child_stop +
 * sbx_child_replaced in a freshly forked child, and resets the other
 * signals the master handles. */
void sbx_child_signals(void);

struct sbx_role {
	const char *name;
	const char *count_setting; /* setting that says how many; NULL = 1 */
	/* Runs in the child; returns its exit status. cfg stays valid. */
	int (*run)(const sbx_config *cfg, int index, void *ctx);
	/* A reload replaces it with SIGUSR1, not SIGTERM (sbx_child_replaced).
	 * Whatever the signal, a child that exits with SBX_EXIT_HANDED_OVER has
	 * left work for its successor: that one starts at once, and in a drain
	 * it starts anyway, stopping from its first moment, so that it takes
	 * over what was left and ends it (a drain leaves nothing running). */
	bool hands_over;
};

struct sbx_super {
	const char *prog;
	const char *config_path;
	unsigned who;
	const struct sbx_role *roles;
	int nroles;
	void *ctx;
	/* called in the master after a new config was accepted (may be NULL) */
	void (*reloaded)(const sbx_config *cfg, void *ctx);
};

/* Runs the master loop until drained; takes ownership of cfg. Returns the
 * exit status for main(). */
int sbx_super_run(const struct sbx_super *s, sbx_config *cfg);

#endif
