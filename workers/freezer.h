/* Freezing a sandbox: every host task of it (the sentry, its systrap stubs)
 * stopped by its cgroup's freezer, so an idle sandbox costs no host CPU
 * (doc/idle.md). The policy, when to freeze and thaw, is the node agent's
 * (workers/idle.c); these are the host steps, usable from any process of
 * the node (destroy thaws first; a checkpoint must too). */
#ifndef SBX_WORKER_FREEZER_H
#define SBX_WORKER_FREEZER_H

#include "err.h"

enum sandbox_freeze_state {
	SANDBOX_THAWED = 0,
	SANDBOX_FREEZING, /* asked; some task has not stopped yet */
	SANDBOX_FROZEN,
};

/* Asks the freezer to stop every task of the sandbox's cgroup and returns
 * at once (the kernel may report FREEZING for a moment). */
int sandbox_freeze(const char *id, sbx_err *err);
/* Lets them run again; done when it returns. Fine on a thawed sandbox. */
int sandbox_thaw(const char *id, sbx_err *err);
/* The freezer's state of its cgroup; < 0 when there is no such cgroup. */
int sandbox_freeze_state(const char *id);

#endif
