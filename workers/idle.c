/* Freezing idle sandboxes (idle.h, doc/idle.md). A systrap sentry with
 * nothing to run still burns 2-3 % of a core (its platform's fast-path
 * monitor wakes every 400 us); the cgroup freezer stops all its tasks, so a
 * frozen sandbox costs no CPU, and thawing it takes a few ms.
 *
 * Freezing must never change what a user sees except latency, so a sandbox
 * is frozen only when nothing inside would run: no op in flight, none for
 * idle_freeze_ms, and no process inside but sbx-init (it counts /proc).
 * Everything that reaches sbx-init thaws first (the relay's wake hook);
 * liveness does not ask a frozen sbx-init (it cannot answer) but still
 * watches its sentry; destroy thaws (a frozen task takes no SIGKILL). */
#include "config.h"
#include <stdio.h>
#include <string.h>
#include "clock.h"
#include "freezer.h"
#include "log.h"
#include "node_int.h"
#include "idle.h"

#define PASS_MS 1000
/* An unanswered STATUS is forgotten after this long (liveness deals with a
 * sbx-init that does not answer); the next pass asks again. */
#define ASK_MS 10000
#define RECHECK_PASSES 5

/* What the logs name: the sandbox a placement serves (operators and tests
 * look for the sandbox's id), else the placement. */
static const char *who(const struct sb *s)
{
	return s->sandbox_id[0] ? s->sandbox_id : s->id;
}

/* A running sandbox, or a warm pool member waiting for its create: a
 * member is idle by nature, and pool.c thaws it at its hand-over. */
static bool freezable(const struct sb *s)
{
	/* a sandbox Nomad runs is in Docker's cgroups, not runsc's of ours */
	return !s->nomad && (s->st == SB_READY || (s->st == SB_POOL && s->pool));
}

void idle_ready(struct sb *s, bool adopted)
{
	s->idle.since = sbx_now_ms();
	s->idle.asked_at = 0;
	s->idle.frozen = adopted && sandbox_freeze_state(s->id) > SANDBOX_THAWED;
	if (s->idle.frozen)
		log_info("sandbox %s: adopted frozen (placement %s)", who(s), s->id);
}

static long long delay_ms(struct node *n)
{
	return sbx_cfg_int(n->cfg, "idle_freeze_ms");
}

/* Quiet since when (mono ms), or -1 while anything is in flight. */
static long long quiet_since(struct node *n, struct sb *s)
{
	long long q = relay_quiet_since(n->relay, s->id);

	if (q < 0)
		return -1;
	return q > s->idle.since ? q : s->idle.since;
}

bool idle_frozen(struct node *n, const char *id)
{
	struct sb *s = sb_find(n, id);

	return s && s->idle.frozen;
}

int idle_thaw(struct node *n, const char *id)
{
	struct sb *s = sb_find(n, id);
	sbx_err err = SBX_ERR_INIT;
	long long t0 = sbx_now_ms();

	if (!s || !s->idle.frozen)
		return 0;
	if (sandbox_thaw(id, &err) < 0) {
		log_warnx("sandbox %s: thawing: %s (placement %s)", who(s), err.msg, id);
		return -1;
	}
	s->idle.frozen = false;
	s->idle.since = sbx_now_ms();
	s->init_missed = 0;
	log_info("sandbox %s: thawed (%lld ms, placement %s)", who(s), s->idle.since - t0, id);
	return 0;
}

void idle_on_status(struct node *n, const char *id, uint32_t nprocs)
{
	struct sb *s = sb_find(n, id);
	long long now = sbx_now_ms(), q, delay = delay_ms(n);
	sbx_err err = SBX_ERR_INIT;

	/* a snapshot in flight runs `runsc exec` and freezes it itself */
	if (!s || !freezable(s) || s->idle.frozen || !s->idle.asked_at || node_op_find(n, id))
		return;
	s->idle.asked_at = 0;
	if (nprocs) {
		/* a process runs inside: busy, ask again in a while */
		s->idle.since = now;
		return;
	}
	/* anything that began since the question makes it busy again */
	q = quiet_since(n, s);
	if (delay <= 0 || q < 0 || now - q < delay)
		return;
	if (sandbox_freeze(id, &err) < 0) {
		log_warnx("sandbox %s: freezing: %s (placement %s)", who(s), err.msg, id);
		s->idle.since = now;
		return;
	}
	s->idle.frozen = true;
	s->init_missed = 0;
	log_info("sandbox %s: idle: frozen (placement %s)", who(s), id);
}

void idle_pass(struct node *n)
{
	static long long next;
	static unsigned passes;
	long long now = sbx_now_ms(), delay = delay_ms(n);
	bool recheck;

	if (now < next)
		return;
	next = now + PASS_MS;
	/* now and then: was a frozen one thawed behind our back (an operator's
	 * `runsc exec` needs that)? It is then busy like any other. */
	recheck = passes++ % RECHECK_PASSES == 0;
	for (int i = 0; i < MAX_SANDBOXES; i++) {
		struct sb *s = &n->sbs[i];
		long long q;

		if (!freezable(s))
			continue;
		if (s->idle.frozen) {
			if (delay <= 0) {
				idle_thaw(n, s->id); /* freezing was turned off */
			} else if (recheck && sandbox_freeze_state(s->id) == SANDBOX_THAWED) {
				log_info("sandbox %s: was thawed from outside (placement %s)", who(s), s->id);
				s->idle.frozen = false;
				s->idle.since = now;
			}
			continue;
		}
		if (delay <= 0)
			continue;
		if (s->idle.asked_at) {
			if (now - s->idle.asked_at < ASK_MS)
				continue;
			s->idle.asked_at = 0;
		}
		q = quiet_since(n, s);
		if (q < 0 || now - q < delay)
			continue;
		if (relay_ask_status(n->relay, s->id) == 0)
			s->idle.asked_at = now;
		else
			s->idle.since = now; /* no channel now: try again after a delay */
	}
}
