/* Idle sandboxes cost nothing: the node agent freezes a sandbox that has
 * been idle for idle_freeze_ms (its cgroup's freezer, freezer.h) and thaws
 * it before anything reaches it again (doc/idle.md).
 *
 * Idle means: no op of the relay in flight on it (exec, file, process
 * request), none for idle_freeze_ms, no liveness question unanswered, and
 * sbx-init, asked last (SBX_F_STATUS), counts no process in the sandbox
 * besides itself. A background process the user started (or a daemon a
 * command left behind) keeps its sandbox running, however quiet it is. */
#ifndef SBX_WORKER_IDLE_H
#define SBX_WORKER_IDLE_H

#include <stdbool.h>
#include <stdint.h>

struct node;
struct sb;

/* Per sandbox, inside node.c's struct sb. */
struct sb_idle {
	long long since;    /* mono ms it was last seen busy (ready, thawed, a process inside) */
	long long asked_at; /* the STATUS question unanswered since (mono ms); 0 none */
	bool frozen;        /* we froze it (or found it frozen when adopted) */
};

/* The sandbox became ready here (started), or was adopted after a restart
 * (adopted: its freezer's state is read, a frozen one stays frozen). */
void idle_ready(struct sb *s, bool adopted);
/* One pass over the node's sandboxes: asks the quiet ones whether they
 * are idle, and thaws every frozen one when freezing is off. */
void idle_pass(struct node *n);
/* sbx-init's answer to the question (relay hook). */
void idle_on_status(struct node *n, const char *id, uint32_t nprocs);

/* The small API for everything else on the node (relay, destroy, pause):
 * is it frozen, and thaw it now (0 when it runs, < 0 when it could not be
 * thawed; it then stays marked frozen). */
bool idle_frozen(struct node *n, const char *id);
int idle_thaw(struct node *n, const char *id);

#endif
