/* Daemon plumbing shared by sbx-api and sbx-worker: an exclusive pidfile
 * with a stale check, and a pre-forking supervisor with pgbouncer's signal
 * contract:
 *   SIGHUP   reload the config; a bad one is refused and the old one kept;
 *            children are replaced one by one so they pick the new one up.
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
/* Installs SIGTERM/SIGINT -> sbx_child_stop in a freshly forked child, and
 * resets the other signals the master handles. */
void sbx_child_signals(void);

struct sbx_role {
	const char *name;
	const char *count_setting; /* setting that says how many; NULL = 1 */
	/* Runs in the child; returns its exit status. cfg stays valid. */
	int (*run)(const sbx_config *cfg, int index, void *ctx);
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
